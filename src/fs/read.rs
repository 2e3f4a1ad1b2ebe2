//! Reads of dataset byte images.
//!
//! The kernel asks for at most its maximum request size (1 MiB, set at `init`), aligned to
//! pages for buffered reads. The answer is clipped at the end of the image and filled by
//! repeated [`Dataset::read_at`] calls, so a layout that returns short reads (one chunk at a
//! time) still yields a full buffer: FUSE treats a short answer as end of file.

use std::ops::Range;

use crate::cache::ChunkBytes;
use crate::error::{Error, Result};
use crate::io::ReadCtx;
use crate::model::Dataset;

/// Upper bound on one answer, whatever the kernel asks: four times the usual maximum
/// request, so a kernel with larger requests still works but no request can make us
/// allocate more than this.
pub const MAX_READ: u64 = 4 << 20;

/// Bytes `offset..offset + size` of the dataset's image (fewer at the end, none past it),
/// read for `ctx`.
pub fn read(ctx: ReadCtx, ds: &Dataset, offset: u64, size: u32) -> Result<Vec<u8>> {
    read_image(ds.len(), offset, size, |off, buf| ds.read_in(ctx, off, buf))
}

/// [`read`] into `out`, which is resized to the answer. Growing `out` zeroes only the new
/// bytes, so a buffer reused across requests is neither reallocated nor cleared.
pub fn read_into(
    ctx: ReadCtx,
    ds: &Dataset,
    offset: u64,
    size: u32,
    out: &mut Vec<u8>,
) -> Result<()> {
    read_image_into(ds.len(), offset, size, out, |off, buf| {
        ds.read_in(ctx, off, buf)
    })
}

/// Where the answer to a read is.
#[derive(Debug)]
pub enum Answer {
    /// In the caller's buffer.
    Buffer,
    /// These bytes of a cached decoded chunk: the request fell in one contiguous run of one
    /// chunk, so it is answered without a copy into the buffer.
    Shared(ChunkBytes, Range<usize>),
}

impl Answer {
    /// The answer's bytes, `buf` being the caller's buffer.
    pub fn bytes<'a>(&'a self, buf: &'a [u8]) -> &'a [u8] {
        match self {
            Answer::Buffer => buf,
            // The range was checked against the chunk when the answer was made.
            Answer::Shared(data, r) => data.get(r.clone()).unwrap_or_default(),
        }
    }
}

/// [`read_into`], answered from a cached chunk instead when the bytes are one contiguous run
/// of one chunk; `out` is then left as it was.
pub fn read_answer(
    ctx: ReadCtx,
    ds: &Dataset,
    offset: u64,
    size: u32,
    out: &mut Vec<u8>,
) -> Result<Answer> {
    let want = clip(ds.len(), offset, size);
    if want > 0 {
        if let Some((data, start)) = ds.read_shared(ctx, offset, want)? {
            // `want` <= MAX_READ and `read_shared` checked `start + want` against the chunk.
            let end = start + want as usize;
            return Ok(Answer::Shared(data, start..end));
        }
    }
    read_into(ctx, ds, offset, size, out)?;
    Ok(Answer::Buffer)
}

/// Bytes a read of `size` at `offset` answers from an image of `len` bytes.
fn clip(len: u64, offset: u64, size: u32) -> u64 {
    len.saturating_sub(offset)
        .min(u64::from(size))
        .min(MAX_READ)
}

/// [`read`] over any image of `len` bytes served by `read_at`.
pub fn read_image(
    len: u64,
    offset: u64,
    size: u32,
    read_at: impl FnMut(u64, &mut [u8]) -> Result<usize>,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    read_image_into(len, offset, size, &mut out, read_at)?;
    Ok(out)
}

/// [`read_image`] into a reused buffer.
pub fn read_image_into(
    len: u64,
    offset: u64,
    size: u32,
    out: &mut Vec<u8>,
    mut read_at: impl FnMut(u64, &mut [u8]) -> Result<usize>,
) -> Result<()> {
    let want = clip(len, offset, size);
    // `want` <= MAX_READ, so the conversion cannot truncate.
    out.resize(want as usize, 0);
    let buf = &mut out[..];
    let mut done = 0usize;
    while done < buf.len() {
        let pos = offset + done as u64;
        let n = read_at(pos, &mut buf[done..])?;
        if n == 0 {
            return Err(Error::corrupt(
                "dataset image",
                pos,
                format!("read returned no bytes before the end of the {len}-byte image"),
            ));
        }
        done = done.saturating_add(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(off: u64, buf: &mut [u8]) -> Result<usize> {
        // Short reads: at most 3 bytes, each byte its own offset.
        let n = buf.len().min(3);
        for (i, b) in buf[..n].iter_mut().enumerate() {
            *b = (off + i as u64) as u8;
        }
        Ok(n)
    }

    #[test]
    fn fills_across_short_reads_and_clips_at_end() {
        let v = read_image(10, 2, 100, image).unwrap();
        assert_eq!(v, (2u8..10).collect::<Vec<_>>());
        assert!(read_image(10, 10, 100, image).unwrap().is_empty());
        assert!(read_image(10, u64::MAX, 100, image).unwrap().is_empty());
        assert_eq!(read_image(10, 0, 4, image).unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_stalled_reader_is_an_error_not_a_loop() {
        let e = read_image(10, 0, 10, |_, _| Ok(0)).unwrap_err();
        assert_eq!(e.errno_class(), crate::error::ErrorClass::Io);
    }
}
