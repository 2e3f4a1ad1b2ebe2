//! Zstandard filter (id 32015, hdf5plugin/HDF Group registered): the chunk is a zstd frame
//! (`cd[0]` is the compression level). Decoded with libzstd (built from source by the `zstd`
//! crate) straight into a buffer of the stage limit: libzstd refuses to write past it, so the
//! frame's declared content size is never trusted for allocation.

use super::Stage;
use ::zstd::bulk::Decompressor;

pub(crate) fn decode(input: &[u8], stage: &Stage) -> Result<Vec<u8>, String> {
    Frames::default().decode(input, stage.limit)
}

/// Decode one frame into `out`; the number of bytes written. Each thread keeps one context.
pub(crate) fn decode_into(input: &[u8], out: &mut [u8]) -> Result<usize, String> {
    thread_local! {
        static CTX: std::cell::RefCell<Frames> = std::cell::RefCell::new(Frames::default());
    }
    CTX.with(|f| match f.try_borrow_mut() {
        Ok(mut f) => f.decode_to(input, out),
        Err(_) => Frames::default().decode_to(input, out),
    })
}

/// Decodes a series of zstd frames with one decompression context (bitshuffle and blosc
/// store one frame per block; a context costs more to set up than a small block to decode).
#[derive(Default)]
pub(crate) struct Frames {
    ctx: Option<Decompressor<'static>>,
}

impl Frames {
    fn ctx(&mut self) -> Result<&mut Decompressor<'static>, String> {
        if self.ctx.is_none() {
            self.ctx = Some(Decompressor::new().map_err(|e| format!("zstd init: {e}"))?);
        }
        self.ctx.as_mut().ok_or_else(|| "zstd init".to_string())
    }

    /// Decode one zstd frame of at most `limit` bytes.
    pub(crate) fn decode(&mut self, input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(limit);
        self.ctx()?
            .decompress_to_buffer(input, &mut out)
            .map_err(|e| format!("zstd frame: {e}"))?;
        Ok(out)
    }

    /// Decode one zstd frame into `out`; the number of bytes written.
    pub(crate) fn decode_to(&mut self, input: &[u8], out: &mut [u8]) -> Result<usize, String> {
        self.ctx()?
            .decompress_to_buffer(input, out)
            .map_err(|e| format!("zstd frame: {e}"))
    }
}
