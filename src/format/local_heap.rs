//! Local heap (`HEAP`, spec "III.D"): the names of an old-style group's links and of external
//! storage files.
//!
//! The header holds the size and address of one data segment; the segment is a run of
//! NUL-terminated strings (8-byte aligned by the writer) referenced by byte offset from
//! symbol-table entries and external-file-list messages. We read the whole segment once (its
//! size is checked against the file first) and answer [`LocalHeap::string_at`] from memory.

use crate::error::{Error, Result};
use crate::io::{Cursor, Sizes, Storage, UNDEFINED_ADDR};

/// A local heap with its data segment loaded (spec "III.D Disk Format: Level 1D - Local Heaps").
#[derive(Clone, Debug)]
pub struct LocalHeap {
    /// Relative address of the heap header.
    pub addr: u64,
    /// Relative address of the data segment.
    pub data_addr: u64,
    /// The data segment.
    pub data: Vec<u8>,
}

const WHAT: &str = "local heap";

impl LocalHeap {
    /// Read the header at `addr` and then the data segment it points to.
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<LocalHeap> {
        // Signature 4 + version 1 + reserved 3 + two lengths + one address.
        let hlen = 8 + 2 * sizes.length as u64 + sizes.offset as u64;
        let buf = storage.read_vec(addr, hlen, WHAT)?;
        let mut c = Cursor::new(&buf, addr, WHAT);
        c.signature(b"HEAP")?;
        let version = c.u8()?;
        if version != 0 {
            return Err(Error::corrupt(WHAT, addr, format!("version {version}")));
        }
        c.skip(3)?;
        let size = c.length(sizes)?;
        let _free_list = c.length(sizes)?;
        let data_addr = c.offset(sizes)?;
        if size == 0 {
            return Ok(LocalHeap {
                addr,
                data_addr,
                data: Vec::new(),
            });
        }
        if data_addr == UNDEFINED_ADDR {
            return Err(Error::corrupt(WHAT, addr, "data segment has no address"));
        }
        // read_vec checks `size` against the file before allocating.
        let data = storage.read_vec(data_addr, size, "local heap data segment")?;
        Ok(LocalHeap {
            addr,
            data_addr,
            data,
        })
    }

    /// The NUL-terminated string at `offset` in the data segment (without the NUL).
    pub fn string_at(&self, offset: u64) -> Result<&[u8]> {
        let start = usize::try_from(offset)
            .ok()
            .filter(|&s| s < self.data.len())
            .ok_or_else(|| {
                Error::corrupt(
                    WHAT,
                    self.addr,
                    format!(
                        "string offset {offset} outside data segment of {} bytes",
                        self.data.len()
                    ),
                )
            })?;
        let rest = &self.data[start..];
        let n = rest.iter().position(|&b| b == 0).ok_or_else(|| {
            Error::corrupt(
                WHAT,
                self.addr,
                format!("string at offset {offset} has no NUL"),
            )
        })?;
        Ok(&rest[..n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn storage_with(bytes: &[u8]) -> (tempfile::NamedTempFile, Storage) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        f.flush().unwrap();
        let s = Storage::open(f.path()).unwrap();
        (f, s)
    }

    fn image(seg_size: u64, seg: &[u8]) -> Vec<u8> {
        let mut b = b"HEAP\0\0\0\0".to_vec();
        b.extend_from_slice(&seg_size.to_le_bytes());
        b.extend_from_slice(&8u64.to_le_bytes()); // free list offset
        b.extend_from_slice(&32u64.to_le_bytes()); // data segment right after the header
        b.extend_from_slice(seg);
        b
    }

    #[test]
    fn strings_by_offset() {
        let seg = b"\0\0\0\0\0\0\0\0alpha\0\0\0beta\0\0\0\0";
        let (_f, s) = storage_with(&image(seg.len() as u64, seg));
        let h = LocalHeap::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(h.data_addr, 32);
        assert_eq!(h.string_at(0).unwrap(), b"");
        assert_eq!(h.string_at(8).unwrap(), b"alpha");
        assert_eq!(h.string_at(16).unwrap(), b"beta");
        assert!(h.string_at(seg.len() as u64).is_err());
        assert!(h.string_at(u64::MAX).is_err());
    }

    #[test]
    fn unterminated_and_oversized() {
        let (_f, s) = storage_with(&image(4, b"abcd"));
        let h = LocalHeap::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert!(h.string_at(0).is_err());
        // A data segment larger than the file is refused before allocating.
        let (_f, s) = storage_with(&image(1 << 40, b"abcd"));
        assert!(matches!(
            LocalHeap::read(&s, 0, Sizes::DEFAULT),
            Err(Error::Truncated { .. })
        ));
    }
}
