//! BZip2 filter (id 307, PyTables/hdf5plugin): the chunk is one bzip2 stream; `cd[0]` is the
//! block size used when writing. Decoded with the `bzip2` crate (pure Rust backend) into a
//! buffer capped at the stage limit.

use super::Stage;
use ::bzip2::{Decompress, Status};

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(stage.limit.saturating_add(1));
    let mut z = Decompress::new(false);
    loop {
        let before = (z.total_in(), z.total_out());
        let rest = input.get(z.total_in() as usize..).unwrap_or(&[]);
        let status = z
            .decompress_vec(rest, &mut out)
            .map_err(|e| format!("bzip2 stream: {e}"))?;
        if out.len() > stage.limit {
            return Err(format!("expands past the chunk size {}", stage.limit));
        }
        if let Status::StreamEnd = status {
            return Ok(out);
        }
        if (z.total_in(), z.total_out()) == before {
            return Err(format!(
                "bzip2 stream ends early after {} of {} bytes",
                z.total_in(),
                input.len()
            ));
        }
    }
}
