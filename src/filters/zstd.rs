//! Zstandard filter (id 32015, hdf5plugin/HDF Group registered): the chunk is a zstd frame
//! (`cd[0]` is the compression level). Decoded with libzstd (built from source by the `zstd`
//! crate) straight into a buffer of the stage limit: libzstd refuses to write past it, so the
//! frame's declared content size is never trusted for allocation.

use super::Stage;
use ::zstd::bulk::Decompressor;

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    Frames::default().decode(input, stage.limit)
}

/// Decodes a series of zstd frames with one decompression context (bitshuffle and blosc
/// store one frame per block; a context costs more to set up than a small block to decode).
#[derive(Default)]
pub(crate) struct Frames {
    ctx: Option<Decompressor<'static>>,
}

impl Frames {
    /// Decode one zstd frame of at most `limit` bytes.
    pub(crate) fn decode(&mut self, input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
        let ctx = match &mut self.ctx {
            Some(c) => c,
            None => self
                .ctx
                .insert(Decompressor::new().map_err(|e| format!("zstd init: {e}"))?),
        };
        let mut out = Vec::with_capacity(limit);
        ctx.decompress_to_buffer(input, &mut out)
            .map_err(|e| format!("zstd frame: {e}"))?;
        Ok(out)
    }
}
