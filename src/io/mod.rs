//! The lowest layer: byte sources (a file on disk, memory; see [`source`]), positioned reads
//! of the HDF5 file over them, a little-endian byte cursor that knows the file's offset and
//! length widths, and the two checksums the format uses.

pub mod aws_profile;
pub mod checksum;
pub mod cursor;
pub mod pages;
#[cfg(feature = "remote")]
pub mod remote;
pub mod source;
pub mod storage;

pub use cursor::{Cursor, Sizes, UNDEFINED_ADDR};
pub use source::{ByteSource, DataHint, LocalFile, Memory, Opener, OriginEntry, RequestCounts};
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
    let len =
        usize::try_from(len).map_err(|_| Error::limit(what, 0, "image larger than memory"))?;
    let mut buf = vec![0u8; len];
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
    /// Bytes from a hex string (`"0a1b"` → `[0x0a, 0x1b]`), for byte images in tests.
    pub fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
