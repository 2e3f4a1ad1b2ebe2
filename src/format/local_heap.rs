//! Local heap (`HEAP`, spec "III.D"): the names of an old-style group's links and of external
//! storage files.
//!
//! The header holds the size and address of one data segment; the segment is a run of
//! NUL-terminated strings (8-byte aligned by the writer) referenced by byte offset from
//! symbol-table entries and external-file-list messages.
//!
//! The segment's size comes from the header, which a valid file may make far larger than its
//! strings (libhdf5 sizes a group's heap from the group's estimated entries and name length,
//! and never shrinks it below free space left by deleted links), so that size alone cannot
//! justify reading the segment. [`LocalHeap::read_for`] reads it whole only when it is no
//! larger than what the strings its caller will look up can occupy ([`whole_read_bound`]);
//! otherwise [`LocalHeap::string`] reads each string on its own, in bounded pieces up to its
//! NUL, and refuses one longer than [`MAX_STRING`] bytes. Either way a segment that does not
//! lie inside the file is refused when the header is read, before any byte of it is.

use std::borrow::Cow;

use crate::error::{Error, Result};
use crate::io::{Cursor, Sizes, Storage, UNDEFINED_ADDR};

/// A local heap (spec "III.D Disk Format: Level 1D - Local Heaps"), with its data segment
/// loaded (`LocalHeap::read` in tests, [`LocalHeap::read_for`] for a small enough segment) or not
/// ([`LocalHeap::open`]).
#[derive(Clone, Debug)]
pub struct LocalHeap {
    /// Relative address of the heap header.
    pub addr: u64,
    /// Relative address of the data segment.
    pub data_addr: u64,
    /// Size of the data segment, as the header records it (checked against the file).
    pub size: u64,
    /// The data segment, when it is loaded; empty otherwise.
    pub data: Vec<u8>,
    /// Whether `data` holds the whole segment.
    loaded: bool,
}

const WHAT: &str = "local heap";

/// The longest string [`LocalHeap::string`] returns: 64 KiB, sixteen times the longest path
/// an operating system opens (`PATH_MAX`) and 256 times the longest file name, so no name or
/// soft-link value a filesystem can use is refused. It bounds the bytes one lookup reads.
pub const MAX_STRING: u64 = 64 << 10;

/// A data segment this small is read whole, whatever the number of strings looked up: one
/// read of at most 64 KiB, where libhdf5's own heaps for a few dozen links are a few KiB.
const WHOLE_READ_MIN: u64 = 64 << 10;

/// Bytes of data segment each looked-up string justifies reading whole: 1 KiB, far more than
/// the average name (with its NUL and alignment) of any real group, so the heaps libhdf5
/// writes are read in one piece; a larger segment is mostly free space (or corrupt) and its
/// strings are read one by one.
const WHOLE_READ_PER_STRING: u64 = 1 << 10;

/// First piece read of a string looked up on its own; later pieces double.
const FIRST_PIECE: u64 = 256;

/// The largest data segment [`LocalHeap::read_for`] reads whole for `strings` look-ups.
pub fn whole_read_bound(strings: usize) -> u64 {
    (strings as u64)
        .saturating_mul(WHOLE_READ_PER_STRING)
        .max(WHOLE_READ_MIN)
}

impl LocalHeap {
    /// Read the header at `addr`, without the data segment: strings are then read one by one
    /// by [`LocalHeap::string`]. A segment that does not fit in the file is refused.
    pub fn open(storage: &Storage, addr: u64, sizes: Sizes) -> Result<LocalHeap> {
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
        if size != 0 {
            if data_addr == UNDEFINED_ADDR {
                return Err(Error::corrupt(WHAT, addr, "data segment has no address"));
            }
            let there = storage.available(data_addr);
            if size > there {
                return Err(Error::corrupt(
                    WHAT,
                    addr,
                    format!(
                        "data segment of {size} bytes at {data_addr:#x} extends past the end of \
                         the file: at most {there} bytes there"
                    ),
                ));
            }
        }
        Ok(LocalHeap {
            addr,
            data_addr,
            size,
            data: Vec::new(),
            loaded: size == 0,
        })
    }

    /// Read the header at `addr`, and the data segment too when it is no larger than
    /// [`whole_read_bound`] of `strings`, the number of strings the caller will look up with
    /// [`LocalHeap::string`] (a larger segment is left in the file and its strings read one
    /// by one). Every valid heap is read; a small one in one piece.
    pub fn read_for(
        storage: &Storage,
        addr: u64,
        sizes: Sizes,
        strings: usize,
    ) -> Result<LocalHeap> {
        let mut heap = LocalHeap::open(storage, addr, sizes)?;
        if !heap.loaded && heap.size <= whole_read_bound(strings) {
            heap.data = storage.read_vec(heap.data_addr, heap.size, "local heap data segment")?;
            heap.loaded = true;
        }
        Ok(heap)
    }

    /// Tests only: the header at `addr` and then the whole data segment, whatever its size
    /// (only bounded by the file). Readers use [`LocalHeap::read_for`] with
    /// [`LocalHeap::string`], which bound what they read by the strings looked up.
    #[cfg(test)]
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<LocalHeap> {
        let mut heap = LocalHeap::open(storage, addr, sizes)?;
        if !heap.loaded {
            heap.data = storage.read_vec(heap.data_addr, heap.size, "local heap data segment")?;
            heap.loaded = true;
        }
        Ok(heap)
    }

    /// Whether the whole data segment is in memory.
    pub fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// The NUL-terminated string at `offset` in the data segment (without the NUL), from
    /// memory when the segment is loaded, otherwise read from `storage` in pieces (the first
    /// of 256 bytes, then doubling) up to its NUL. Either way a string longer than
    /// [`MAX_STRING`] bytes is refused, and no more than that plus one piece is read.
    pub fn string(&self, storage: &Storage, offset: u64) -> Result<Cow<'_, [u8]>> {
        self.string_within(storage, offset)?
    }

    /// [`LocalHeap::string`], with a string longer than [`MAX_STRING`] told apart from every
    /// other failure: `Ok(Err(..))` for it alone (a caller that can leave out the one link it
    /// names goes on with the others), `Err(..)` for a heap that cannot be read.
    pub fn string_within(&self, storage: &Storage, offset: u64) -> Result<Result<Cow<'_, [u8]>>> {
        let avail = self.size.checked_sub(offset).filter(|&n| n > 0);
        let Some(avail) = avail else {
            return Err(self.offset_outside(offset));
        };
        // The NUL must be within the segment and within MAX_STRING bytes of the start.
        let limit = avail.min(MAX_STRING + 1);
        if self.loaded {
            let rest = &self.data[offset as usize..][..limit as usize];
            return match rest.iter().position(|&b| b == 0) {
                Some(n) => Ok(Ok(Cow::Borrowed(&rest[..n]))),
                None => self.unterminated(offset, limit),
            };
        }
        let mut out = Vec::new();
        let mut piece = FIRST_PIECE;
        while (out.len() as u64) < limit {
            let n = piece.min(limit - out.len() as u64);
            let at = self.data_addr + offset + out.len() as u64;
            let start = out.len();
            out.resize(start + n as usize, 0);
            storage.read_at(at, &mut out[start..], "local heap data segment")?;
            if let Some(p) = out[start..].iter().position(|&b| b == 0) {
                out.truncate(start + p);
                return Ok(Ok(Cow::Owned(out)));
            }
            piece = piece.saturating_mul(2);
        }
        self.unterminated(offset, limit)
    }

    /// The NUL-terminated string at `offset` in the loaded data segment (without the NUL).
    /// Used with `LocalHeap::read` (tests); [`LocalHeap::string`] also serves a heap not loaded.
    pub fn string_at(&self, offset: u64) -> Result<&[u8]> {
        if !self.loaded {
            return Err(Error::corrupt(
                WHAT,
                self.addr,
                format!("string at offset {offset} looked up in a data segment not read"),
            ));
        }
        let start = usize::try_from(offset)
            .ok()
            .filter(|&s| s < self.data.len())
            .ok_or_else(|| self.offset_outside(offset))?;
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

    fn offset_outside(&self, offset: u64) -> Error {
        Error::corrupt(
            WHAT,
            self.addr,
            format!(
                "string offset {offset} outside data segment of {} bytes",
                self.size
            ),
        )
    }

    /// The failure of a string at `offset` with no NUL in its first `limit` bytes: too long
    /// (that string's alone), or a segment without its NUL (the heap's).
    fn unterminated<T>(&self, offset: u64, limit: u64) -> Result<Result<T>> {
        if limit > MAX_STRING {
            Ok(Err(Error::limit(
                WHAT,
                self.addr,
                format!(
                    "string at offset {offset} is longer than {MAX_STRING} bytes, the most a \
                     name may have"
                ),
            )))
        } else {
            Err(Error::corrupt(
                WHAT,
                self.addr,
                format!(
                    "string at offset {offset} has no NUL before the end of the data segment \
                     of {} bytes",
                    self.size
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::testutil::memory_storage;
    use crate::io::testutil::Sparse;
    use std::sync::Arc;

    /// A heap header at 0 whose data segment (`seg`, claimed `seg_size` bytes) follows it.
    fn image(seg_size: u64, seg: &[u8]) -> Vec<u8> {
        at(0, seg_size, seg)
    }

    /// `pad` zero bytes, then a heap header whose data segment follows it.
    fn at(pad: usize, seg_size: u64, seg: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; pad];
        b.extend_from_slice(b"HEAP\0\0\0\0");
        b.extend_from_slice(&seg_size.to_le_bytes());
        b.extend_from_slice(&8u64.to_le_bytes()); // free list offset
        b.extend_from_slice(&(pad as u64 + 32).to_le_bytes()); // data right after the header
        b.extend_from_slice(seg);
        b
    }

    const SEG: &[u8] = b"\0\0\0\0\0\0\0\0alpha\0\0\0beta\0\0\0\0";

    #[test]
    fn strings_by_offset() {
        let s = memory_storage(&image(SEG.len() as u64, SEG));
        let h = LocalHeap::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(h.data_addr, 32);
        assert_eq!(h.string_at(0).unwrap(), b"");
        assert_eq!(h.string_at(8).unwrap(), b"alpha");
        assert_eq!(h.string_at(16).unwrap(), b"beta");
        assert!(h.string_at(SEG.len() as u64).is_err());
        assert!(h.string_at(u64::MAX).is_err());
    }

    /// Loaded whole or read string by string, a heap answers the same.
    #[test]
    fn loaded_and_unloaded_heaps_answer_alike() {
        let s = memory_storage(&image(SEG.len() as u64, SEG));
        let loaded = LocalHeap::read_for(&s, 0, Sizes::DEFAULT, 2).unwrap();
        assert!(loaded.is_loaded());
        let lazy = LocalHeap::open(&s, 0, Sizes::DEFAULT).unwrap();
        assert!(!lazy.is_loaded());
        assert!(lazy.string_at(8).is_err());
        for h in [&loaded, &lazy] {
            assert_eq!(&*h.string(&s, 0).unwrap(), b"");
            assert_eq!(&*h.string(&s, 8).unwrap(), b"alpha");
            assert_eq!(&*h.string(&s, 10).unwrap(), b"pha");
            assert_eq!(&*h.string(&s, 16).unwrap(), b"beta");
            for bad in [SEG.len() as u64, u64::MAX] {
                let e = h.string(&s, bad).unwrap_err().to_string();
                assert!(e.contains("outside data segment"), "{e}");
            }
        }
        // A string running to the end of the segment without a NUL.
        let s = memory_storage(&image(4, b"abcd"));
        for h in [
            LocalHeap::read(&s, 0, Sizes::DEFAULT).unwrap(),
            LocalHeap::open(&s, 0, Sizes::DEFAULT).unwrap(),
        ] {
            let e = h.string(&s, 1).unwrap_err().to_string();
            assert!(
                e.contains("no NUL before the end of the data segment of 4"),
                "{e}"
            );
            assert!(h.string_at(0).is_err());
        }
    }

    /// A header claiming a 1 TiB data segment in a small file is refused when read, naming
    /// the heap, its address and the bytes the file has there, before any byte of the
    /// segment is read.
    #[test]
    fn a_segment_larger_than_the_file_is_refused_naming_heap_address_and_bound() {
        let img = at(0x40, 1 << 40, b"abcd\0");
        let src = Arc::new(Sparse::new(img.clone(), img.len() as u64));
        let s = Storage::from_source(src.clone());
        for r in [
            LocalHeap::open(&s, 0x40, Sizes::DEFAULT),
            LocalHeap::read_for(&s, 0x40, Sizes::DEFAULT, 1000),
            LocalHeap::read(&s, 0x40, Sizes::DEFAULT),
        ] {
            let e = r.unwrap_err();
            assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
            let text = e.to_string();
            assert!(text.starts_with("corrupt local heap at 0x40:"), "{text}");
            assert!(text.contains("1099511627776 bytes at 0x60"), "{text}");
            assert!(text.contains("at most 5 bytes there"), "{text}");
        }
        assert!(src.largest_read() <= 32, "{}", src.largest_read());
    }

    /// A heap claiming a 4 GiB data segment in a file that long (the claim is within the
    /// file, so the file length bounds nothing) is not read whole: two strings justify 64 KiB
    /// at most, so they are read on their own, in pieces, and a string with no NUL within
    /// MAX_STRING bytes is refused naming the heap, its address and that bound.
    #[test]
    fn a_huge_segment_is_read_by_the_strings_looked_up() {
        let mut seg = b"\0\0\0\0\0\0\0\0alpha\0\0\0".to_vec();
        seg.extend(std::iter::repeat_n(b'x', 200_000));
        let img = at(0x100, 4 << 30, &seg);
        let src = Arc::new(Sparse::new(img, (4 << 30) + 0x1000));
        let s = Storage::from_source(src.clone());
        let h = LocalHeap::read_for(&s, 0x100, Sizes::DEFAULT, 2).unwrap();
        assert!(!h.is_loaded());
        assert_eq!(h.size, 4 << 30);
        assert_eq!(&*h.string(&s, 8).unwrap(), b"alpha");
        // Zeros far into the segment: an empty string, one small read.
        assert_eq!(&*h.string(&s, 3 << 30).unwrap(), b"");
        assert!(src.largest_read() <= FIRST_PIECE, "{}", src.largest_read());
        let e = h.string(&s, 16).unwrap_err();
        assert!(matches!(e, Error::Limit { .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("local heap at 0x100"), "{text}");
        assert!(
            text.contains(&format!("longer than {MAX_STRING} bytes")),
            "{text}"
        );
        assert!(src.largest_read() <= MAX_STRING, "{}", src.largest_read());
        // A string of exactly MAX_STRING bytes is returned.
        let mut seg = vec![b'y'; MAX_STRING as usize];
        seg.push(0);
        let img = at(0x100, 4 << 30, &seg);
        let s = Storage::from_source(Arc::new(Sparse::new(img, (4 << 30) + 0x1000)));
        let h = LocalHeap::read_for(&s, 0x100, Sizes::DEFAULT, 2).unwrap();
        assert_eq!(h.string(&s, 0).unwrap().len() as u64, MAX_STRING);
    }

    /// The whole-read bound grows with the strings looked up, from 64 KiB.
    #[test]
    fn whole_read_bound_follows_the_strings() {
        assert_eq!(whole_read_bound(0), 64 << 10);
        assert_eq!(whole_read_bound(64), 64 << 10);
        assert_eq!(whole_read_bound(1000), 1000 << 10);
        assert_eq!(whole_read_bound(usize::MAX), u64::MAX);
        // A segment just over the bound is left in the file.
        let seg = vec![0u8; (64 << 10) + 8];
        let s = memory_storage(&image(seg.len() as u64, &seg));
        assert!(!LocalHeap::read_for(&s, 0, Sizes::DEFAULT, 3)
            .unwrap()
            .is_loaded());
        assert!(LocalHeap::read_for(&s, 0, Sizes::DEFAULT, 65)
            .unwrap()
            .is_loaded());
    }
}
