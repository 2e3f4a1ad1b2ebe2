//! Deflate filter (id 1): each chunk is one zlib stream (RFC 1950 header, RFC 1951 data,
//! Adler-32 trailer). `cd[0]` is the compression level and is not needed to decode.
//!
//! The inflater writes only into a buffer of the stage limit plus one byte: filling it means
//! the stream expands past the chunk size (a bomb or a corrupt chunk) and decoding stops.

use super::Stage;
use flate2::{Decompress, FlushDecompress, Status};

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let cap = stage.limit.saturating_add(1);
    let mut out = Vec::with_capacity(cap);
    let mut z = Decompress::new(true);
    // Each call fills the spare capacity; loop only while the inflater makes progress.
    loop {
        let before = (z.total_in(), z.total_out());
        let consumed = z.total_in() as usize;
        let rest = input.get(consumed..).unwrap_or(&[]);
        let status = z
            .decompress_vec(rest, &mut out, FlushDecompress::Finish)
            .map_err(|e| format!("zlib stream: {e}"))?;
        if out.len() > stage.limit {
            return Err(format!("inflates past the chunk size {}", stage.limit));
        }
        match status {
            Status::StreamEnd => return Ok(out),
            Status::Ok | Status::BufError => {
                if (z.total_in(), z.total_out()) == before {
                    return Err(format!(
                        "zlib stream ends early after {} of {} bytes",
                        z.total_in(),
                        input.len()
                    ));
                }
            }
        }
    }
}
