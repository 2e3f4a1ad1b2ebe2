//! Zstandard filter (id 32015, hdf5plugin/HDF Group registered): the chunk is a zstd frame
//! (`cd[0]` is the compression level). Decoded with libzstd (built from source by the `zstd`
//! crate) straight into a buffer of the stage limit: libzstd refuses to write past it, so the
//! frame's declared content size is never trusted for allocation.

use super::Stage;

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    decode_capped(input, stage.limit)
}

/// Decode a zstd frame of at most `limit` bytes (also used by bitshuffle and blosc).
pub(crate) fn decode_capped(input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(limit);
    let mut d = ::zstd::bulk::Decompressor::new().map_err(|e| format!("zstd init: {e}"))?;
    d.decompress_to_buffer(input, &mut out)
        .map_err(|e| format!("zstd frame: {e}"))?;
    Ok(out)
}
