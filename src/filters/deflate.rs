//! Deflate filter (id 1): each chunk is one zlib stream (RFC 1950 header, RFC 1951 data,
//! Adler-32 trailer). `cd[0]` is the compression level and is not needed to decode.
//!
//! Decoded in one shot with libdeflate into a buffer of the stage limit: libdeflate never
//! writes past the buffer and reports a stream that would, so a chunk that expands past
//! the chunk size (a bomb or corruption) fails without allocating more. libdeflate is also
//! the fastest inflater measured on shuffled float chunks, ahead of flate2 (zlib-rs) and
//! miniz_oxide (figures in `docs/performance.md`).

use super::Stage;
use libdeflater::{DecompressionError, Decompressor};

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; stage.limit];
    let n = zlib_into(input, &mut out).map_err(|e| message(e, stage.limit))?;
    out.truncate(n);
    Ok(out)
}

/// What a failed inflate into a buffer of `limit` bytes means.
pub(crate) fn message(e: DecompressionError, limit: usize) -> String {
    match e {
        DecompressionError::InsufficientSpace => format!("inflates past the chunk size {limit}"),
        DecompressionError::BadData => "corrupt or truncated zlib stream".to_string(),
    }
}

/// Inflate a zlib stream into `dst`; the number of bytes written.
pub(crate) fn zlib_into(src: &[u8], dst: &mut [u8]) -> Result<usize, DecompressionError> {
    // A decompressor is a ~10 KiB allocation; keep one per thread.
    thread_local! {
        static D: std::cell::RefCell<Option<Decompressor>> = const { std::cell::RefCell::new(None) };
    }
    D.with(|d| match d.try_borrow_mut() {
        Ok(mut d) => d
            .get_or_insert_with(Decompressor::new)
            .zlib_decompress(src, dst),
        Err(_) => Decompressor::new().zlib_decompress(src, dst),
    })
}
