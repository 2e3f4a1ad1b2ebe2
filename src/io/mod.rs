//! The lowest layer: byte sources (a file on disk, memory; see [`source`]), positioned reads
//! of the HDF5 file over them, a little-endian byte cursor that knows the file's offset and
//! length widths, and the two checksums the format uses.

#[cfg(feature = "remote")]
pub mod aws_credential_process;
#[cfg(feature = "remote")]
pub mod aws_credentials;
pub mod aws_profile;
#[cfg(feature = "remote")]
pub mod aws_source;
#[cfg(feature = "remote")]
pub mod aws_sts;
#[cfg(all(test, feature = "remote"))]
mod aws_sts_fake;
#[cfg(feature = "remote")]
pub mod byteranges;
pub mod checksum;
pub mod cursor;
pub mod pages;
#[cfg(feature = "remote")]
pub mod remote;
pub mod source;
pub mod storage;

pub use cursor::{Cursor, Sizes, UNDEFINED_ADDR};
pub use source::{
    ByteSource, Counting, DataHint, LocalFile, Memory, Opener, OriginEntry, ReadCtx, RemoteSource,
    RequestCounts,
};
pub use storage::Storage;

use crate::error::{Error, Result};

/// Read a whole `len`-byte image through a positioned reader (`read_at(offset, buf)` returning
/// the bytes written, short only at the end). A reader that stops early is an error naming
/// `what`, not a short image.
pub fn read_fully(
    len: u64,
    what: &'static str,
    mut read_at: impl FnMut(u64, &mut [u8]) -> Result<usize>,
) -> Result<Vec<u8>> {
    // The image has no file address (it is assembled from many places), so the refusal names
    // what it is and its size. Reserving first turns an allocation this machine cannot make
    // into that error instead of an abort.
    let too_large = || {
        Error::unsupported(
            what,
            format!("an image of {len} bytes is more than this machine can hold in memory"),
        )
    };
    let len = usize::try_from(len).map_err(|_| too_large())?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(len).map_err(|_| too_large())?;
    buf.resize(len, 0);
    let mut done = 0;
    while done < len {
        match read_at(done as u64, &mut buf[done..])? {
            0 => {
                return Err(Error::ShortImage {
                    what,
                    got: done as u64,
                    want: len as u64,
                })
            }
            n => done += n,
        }
    }
    Ok(buf)
}

/// Helpers for unit tests across the crate.
#[cfg(test)]
pub(crate) mod testutil {
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A byte source of `len` bytes, `head` then zeros, that holds only `head` in memory and
    /// remembers the largest read it was asked for. A read of more than 1 MiB fails (so a
    /// test of a bounded read fails cleanly, without the memory, when the bound is missing).
    #[derive(Debug)]
    pub struct Sparse {
        head: Vec<u8>,
        len: u64,
        largest: AtomicU64,
    }

    impl Sparse {
        /// The largest read served or refused so far, in bytes.
        pub fn largest_read(&self) -> u64 {
            self.largest.load(Ordering::Relaxed)
        }

        /// `head`, then zeros up to `len` bytes.
        pub fn new(head: Vec<u8>, len: u64) -> Sparse {
            Sparse {
                head,
                len,
                largest: AtomicU64::new(0),
            }
        }
    }

    impl super::ByteSource for Sparse {
        fn len(&self) -> u64 {
            self.len
        }

        fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
            self.largest.fetch_max(buf.len() as u64, Ordering::Relaxed);
            if buf.len() > 1 << 20 {
                return Err(std::io::Error::other("test source: read larger than 1 MiB"));
            }
            let n = (self.len.saturating_sub(offset)).min(buf.len() as u64) as usize;
            for (i, b) in buf[..n].iter_mut().enumerate() {
                let at = offset + i as u64;
                *b = usize::try_from(at)
                    .ok()
                    .and_then(|a| self.head.get(a))
                    .copied()
                    .unwrap_or(0);
            }
            Ok(n)
        }

        fn identity(&self) -> String {
            format!("sparse:{}", self.len)
        }

        fn name(&self) -> String {
            "sparse test source".into()
        }
    }

    /// Storage over a byte image held in memory ([`super::Memory`]): what a unit test of a
    /// reader needs, without a temporary file.
    pub fn memory_storage(image: &[u8]) -> super::Storage {
        super::Storage::from_source(std::sync::Arc::new(super::Memory::new(
            image.to_vec(),
            "test image",
        )))
    }

    /// Bytes from a hex string (`"0a1b"` → `[0x0a, 0x1b]`), for byte images in tests.
    pub fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An image too large to hold is refused with its name and size, and no file address
    /// (it has none: the placeholder 0x0 used to stand in), instead of aborting.
    #[test]
    fn an_image_larger_than_memory_is_refused_by_name_and_size() {
        for len in [u64::MAX, 1 << 62] {
            let e = read_fully(len, "dataset image", |_, _| Ok(0)).unwrap_err();
            let text = e.to_string();
            assert!(text.contains("dataset image"), "{text}");
            assert!(text.contains(&len.to_string()), "{text}");
            assert!(!text.contains("0x"), "{text}");
        }
        // Within memory the reader fills the image.
        let got = read_fully(5, "view", |off, buf| {
            buf[0] = off as u8;
            Ok(1)
        })
        .unwrap();
        assert_eq!(got, [0, 1, 2, 3, 4]);
    }
}
