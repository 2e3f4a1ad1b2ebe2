//! Global heap collections (`GCOL`, spec "III.E"): variable-length data and region references.
//!
//! A collection is one contiguous block (at least 4 KiB) whose size is stored in its header;
//! it holds objects, each with a 16-bit index, a reference count, a size and the data padded
//! to a multiple of 8 bytes. Object index 0 is the collection's free space and ends the list.
//! Vlen data refers to an object by (collection address, index): [`GlobalHeapId`].
//!
//! What is read is bounded by what the caller can justify, not by the collection's size:
//! [`GlobalHeapCollection::open`] reads the header and at most the first [`WINDOW`] bytes
//! (all of a collection libhdf5 shares between objects, which it never grows past 64 KiB);
//! [`GlobalHeapCollection::object`] walks the object headers only as far as the wanted index
//! (remembering where each object lies, so a walk is never repeated) and reads that object's
//! bytes only when their recorded size is the size its reference implies (the vlen length
//! times the base type's size), the check libhdf5 makes too. A larger collection is valid (one
//! holding a single large object; JLD2 grows its collections at the end of the file without a
//! limit), so its size is only refused when it cannot hold its own header or does not fit in
//! the file, and it is never read whole by these two. `GlobalHeapCollection::read`, which
//! reads every object, remains for callers that have no expected size.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::io::{Cursor, Sizes, Storage};
use crate::sync::lock;

/// A reference to a global heap object as stored in vlen data: collection address + index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GlobalHeapId {
    pub collection: u64,
    pub index: u32,
}

impl GlobalHeapId {
    /// Decode `address (offset bytes) + index (4 bytes)`.
    pub fn parse(c: &mut Cursor<'_>, sizes: Sizes) -> Result<GlobalHeapId> {
        Ok(GlobalHeapId {
            collection: c.offset(sizes)?,
            index: c.u32()?,
        })
    }
}

/// The most bytes of a collection read at once: its first bytes when it is opened, and each
/// later stretch of object headers walked. 64 KiB is libhdf5's largest collection shared by
/// several objects (H5HG_MAXSIZE), so the collections it writes are read in one piece.
pub const WINDOW: u64 = 64 << 10;

/// Object headers walked in one collection at most: indices are 16 bits and 0 is the free
/// space, so a valid collection has at most 65535 objects.
const MAX_OBJECTS: usize = u16::MAX as usize;

/// A global heap collection (spec "III.E Disk Format: Level 1E - Global Heap").
#[derive(Debug)]
pub struct GlobalHeapCollection {
    pub addr: u64,
    /// Size of the collection as its header records it (checked against the file).
    pub size: u64,
    /// (index, object bytes): every object, filled by `GlobalHeapCollection::read` (tests only).
    pub objects: Vec<(u32, Vec<u8>)>,
    sizes: Sizes,
    /// The first `min(size, WINDOW)` bytes of the collection.
    head: Vec<u8>,
    /// Where the objects found so far lie; behind a lock so a shared collection is walked
    /// once by all its readers.
    walk: Mutex<Walk>,
}

impl Clone for GlobalHeapCollection {
    fn clone(&self) -> Self {
        GlobalHeapCollection {
            addr: self.addr,
            size: self.size,
            objects: self.objects.clone(),
            sizes: self.sizes,
            head: self.head.clone(),
            walk: Mutex::new(lock(&self.walk).clone()),
        }
    }
}

/// The object headers walked so far.
#[derive(Clone, Debug, Default)]
struct Walk {
    /// Index → (offset of the object's data in the collection, its recorded size).
    found: HashMap<u32, (u64, u64)>,
    /// Offset of the next object header; `None` once the walk has reached the free space or
    /// the end of the collection.
    next: Option<u64>,
    /// Headers walked.
    walked: usize,
    /// The stretch of the collection past `head` read last: (offset, bytes).
    window: Option<(u64, Vec<u8>)>,
}

const WHAT: &str = "global heap collection";

/// Round up to a multiple of 8 (objects are padded to it).
fn align8(n: u64) -> u64 {
    n.div_ceil(8).saturating_mul(8)
}

impl GlobalHeapCollection {
    /// Bytes of the collection header (signature, version, reserved, size), padded to a
    /// multiple of 8 as libhdf5 writes it (H5HG_SIZEOF_HDR): 16 with 4- or 8-byte lengths.
    fn header_len(sizes: Sizes) -> u64 {
        align8(8 + sizes.length as u64)
    }

    /// Bytes of an object header (index, reference count, reserved, size), padded to a
    /// multiple of 8 like the collection header (H5HG_SIZEOF_OBJHDR).
    fn object_header_len(sizes: Sizes) -> u64 {
        align8(8 + sizes.length as u64)
    }

    /// Read the header of the collection at `addr` and its first bytes (at most [`WINDOW`]).
    /// A size smaller than the header, or running past the end of the file, is refused
    /// before anything else is read.
    pub fn open(storage: &Storage, addr: u64, sizes: Sizes) -> Result<GlobalHeapCollection> {
        let hlen = Self::header_len(sizes);
        let head = storage.read_vec(addr, hlen, WHAT)?;
        let mut c = Cursor::new(&head, addr, WHAT);
        c.signature(b"GCOL")?;
        let version = c.u8()?;
        if version != 1 {
            return Err(Error::corrupt(WHAT, addr, format!("version {version}")));
        }
        c.skip(3)?;
        let size = c.length(sizes)?;
        if size < hlen {
            return Err(Error::corrupt(
                WHAT,
                addr,
                format!("collection size {size} is smaller than its {hlen}-byte header"),
            ));
        }
        let there = storage.available(addr);
        if size > there {
            return Err(Error::corrupt(
                WHAT,
                addr,
                format!(
                    "collection of {size} bytes extends past the end of the file: at most \
                     {there} bytes there"
                ),
            ));
        }
        let head = storage.read_vec(addr, size.min(WINDOW), WHAT)?;
        Ok(GlobalHeapCollection {
            addr,
            size,
            objects: Vec::new(),
            sizes,
            head,
            walk: Mutex::new(Walk {
                next: Some(hlen),
                ..Walk::default()
            }),
        })
    }

    /// Tests only: the whole collection at `addr`, every object (only bounded by the file).
    /// Readers use [`GlobalHeapCollection::open`] with [`GlobalHeapCollection::object`] or
    /// [`GlobalHeapCollection::object_up_to`], which read only the object wanted, bounded.
    #[cfg(test)]
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<GlobalHeapCollection> {
        let mut col = GlobalHeapCollection::open(storage, addr, sizes)?;
        let mut objects = Vec::new();
        {
            let mut walk = lock(&col.walk);
            while let Some((index, off, len)) = col.step(storage, &mut walk)? {
                objects.push((index, col.bytes(storage, &walk, off, len)?));
            }
        }
        col.objects = objects;
        Ok(col)
    }

    /// Tests only: the object with `index`, if [`GlobalHeapCollection::read`] read it.
    #[cfg(test)]
    pub fn get(&self, index: u32) -> Option<&[u8]> {
        self.objects
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, v)| v.as_slice())
    }

    /// The bytes of object `index`, which its reference says has `expected` bytes (a vlen
    /// element's length times its base type's size; a string's length). Object headers are
    /// walked only as far as `index`, and the object is read only when its recorded size is
    /// `expected`: otherwise it is refused naming the collection, the object and both sizes.
    pub fn object(&self, storage: &Storage, index: u32, expected: u64) -> Result<Vec<u8>> {
        let mut walk = lock(&self.walk);
        let (off, len) = self.locate(storage, &mut walk, index)?;
        if len != expected {
            return Err(Error::corrupt(
                WHAT,
                self.addr,
                format!(
                    "object {index} has {len} bytes where its reference expects {expected} \
                     (the bound on what is read)"
                ),
            ));
        }
        self.bytes(storage, &walk, off, len)
    }

    /// The bytes of object `index`, for a caller whose reference does not record the
    /// object's size but can bound it: an object of more than `max` bytes is refused naming
    /// the collection, the object and `max`, before it is read. Object headers are walked
    /// only as far as `index`.
    pub fn object_up_to(&self, storage: &Storage, index: u32, max: u64) -> Result<Vec<u8>> {
        let mut walk = lock(&self.walk);
        let (off, len) = self.locate(storage, &mut walk, index)?;
        if len > max {
            return Err(Error::limit(
                WHAT,
                self.addr,
                format!("object {index} has {len} bytes, more than the {max} its reader allows"),
            ));
        }
        self.bytes(storage, &walk, off, len)
    }

    /// Where object `index` lies: (data offset in the collection, recorded size), walking
    /// the object headers from where the last walk stopped until it is found.
    fn locate(&self, storage: &Storage, walk: &mut Walk, index: u32) -> Result<(u64, u64)> {
        if let Some(&at) = walk.found.get(&index) {
            return Ok(at);
        }
        loop {
            match self.step(storage, walk)? {
                Some((i, off, len)) if i == index => return Ok((off, len)),
                Some(_) => {}
                None => {
                    return Err(Error::corrupt(
                        WHAT,
                        self.addr,
                        format!("no object {index}"),
                    ))
                }
            }
        }
    }

    /// Walk one more object header: `Some((index, data offset, size))`, or `None` at the
    /// free space or the end of the collection.
    fn step(&self, storage: &Storage, walk: &mut Walk) -> Result<Option<(u32, u64, u64)>> {
        let Some(pos) = walk.next else {
            return Ok(None);
        };
        let ohlen = Self::object_header_len(self.sizes);
        // Free space too small for a header is not given one (libhdf5's H5HG_alloc).
        if self.size - pos < ohlen {
            walk.next = None;
            return Ok(None);
        }
        if walk.walked >= MAX_OBJECTS {
            return Err(Error::limit(
                WHAT,
                self.addr,
                format!("more than {MAX_OBJECTS} objects"),
            ));
        }
        walk.walked += 1;
        let header = self.header_at(storage, walk, pos, ohlen)?;
        let mut c = Cursor::new(&header, self.addr + pos, WHAT);
        let index = c.u16()?;
        let _refcount = c.u16()?;
        c.skip(4)?;
        let len = c.length(self.sizes)?;
        if index == 0 {
            // The free-space object: the rest of the collection is unused.
            walk.next = None;
            return Ok(None);
        }
        let data = pos + ohlen;
        if len > self.size - data {
            return Err(Error::corrupt(
                WHAT,
                self.addr,
                format!(
                    "object {index} of {len} bytes overruns the collection of {} bytes",
                    self.size
                ),
            ));
        }
        // Data is padded to a multiple of 8; the last object may end flush with the block.
        walk.next = Some((data + align8(len)).min(self.size));
        walk.found.entry(index as u32).or_insert((data, len));
        Ok(Some((index as u32, data, len)))
    }

    /// The `n`-byte object header at offset `pos`, from the bytes already read or from a new
    /// window of at most [`WINDOW`] bytes there.
    fn header_at(&self, storage: &Storage, walk: &mut Walk, pos: u64, n: u64) -> Result<Vec<u8>> {
        if let Some(b) = slice(&self.head, 0, pos, n) {
            return Ok(b.to_vec());
        }
        if let Some((start, w)) = &walk.window {
            if let Some(b) = slice(w, *start, pos, n) {
                return Ok(b.to_vec());
            }
        }
        let len = (self.size - pos).min(WINDOW);
        let w = storage.read_vec(self.addr + pos, len, WHAT)?;
        let b = w[..n as usize].to_vec();
        walk.window = Some((pos, w));
        Ok(b)
    }

    /// The `len` bytes at offset `off` of the collection (within it, as walked).
    fn bytes(&self, storage: &Storage, walk: &Walk, off: u64, len: u64) -> Result<Vec<u8>> {
        if let Some(b) = slice(&self.head, 0, off, len) {
            return Ok(b.to_vec());
        }
        if let Some((start, w)) = &walk.window {
            if let Some(b) = slice(w, *start, off, len) {
                return Ok(b.to_vec());
            }
        }
        storage.read_vec(self.addr + off, len, WHAT)
    }
}

/// Bytes `off..off + len` of the collection from `buf`, which holds its bytes from `start`,
/// if they are all there.
fn slice(buf: &[u8], start: u64, off: u64, len: u64) -> Option<&[u8]> {
    let from = usize::try_from(off.checked_sub(start)?).ok()?;
    let to = from.checked_add(usize::try_from(len).ok()?)?;
    buf.get(from..to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::testutil::memory_storage;
    use crate::io::testutil::Sparse;
    use std::sync::Arc;

    fn obj(index: u16, data: &[u8]) -> Vec<u8> {
        let mut b = index.to_le_bytes().to_vec();
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&(data.len() as u64).to_le_bytes());
        b.extend_from_slice(data);
        b.resize(b.len().div_ceil(8) * 8, 0);
        b
    }

    fn collection(objs: &[Vec<u8>], size: u64) -> Vec<u8> {
        let mut b = b"GCOL\x01\0\0\0".to_vec();
        b.extend_from_slice(&size.to_le_bytes());
        for o in objs {
            b.extend_from_slice(o);
        }
        b.resize(size as usize, 0);
        b
    }

    #[test]
    fn objects_and_free_space() {
        let img = collection(
            &[obj(1, b"hello"), obj(2, b"0123456789abcdef"), obj(0, &[])],
            128,
        );
        let s = memory_storage(&img);
        let g = GlobalHeapCollection::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(g.objects.len(), 2);
        assert_eq!(g.get(1).unwrap(), b"hello");
        assert_eq!(g.get(2).unwrap(), b"0123456789abcdef");
        assert!(g.get(3).is_none());
        let g = GlobalHeapCollection::open(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(g.object(&s, 2, 16).unwrap(), b"0123456789abcdef");
        assert_eq!(g.object(&s, 1, 5).unwrap(), b"hello");
        let e = g.object(&s, 3, 1).unwrap_err().to_string();
        assert!(e.contains("no object 3"), "{e}");
        // Out of order, and an object ending flush with the collection (no padding left).
        let img = collection(&[obj(7, b"seven"), obj(3, b"abc")], 16 + 24 + 19);
        let s = memory_storage(&img);
        let g = GlobalHeapCollection::open(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(g.object(&s, 3, 3).unwrap(), b"abc");
        assert_eq!(g.object(&s, 7, 5).unwrap(), b"seven");
        assert_eq!(
            GlobalHeapCollection::read(&s, 0, Sizes::DEFAULT)
                .unwrap()
                .objects,
            [(7, b"seven".to_vec()), (3, b"abc".to_vec())]
        );
    }

    #[test]
    fn object_overrunning_collection() {
        let mut o = obj(1, b"abc");
        o[8..16].copy_from_slice(&1000u64.to_le_bytes());
        let img = collection(&[o], 64);
        let s = memory_storage(&img);
        assert!(GlobalHeapCollection::read(&s, 0, Sizes::DEFAULT).is_err());
        let g = GlobalHeapCollection::open(&s, 0, Sizes::DEFAULT).unwrap();
        let e = g.object(&s, 1, 1000).unwrap_err().to_string();
        assert!(e.contains("overruns the collection of 64 bytes"), "{e}");
        // A collection size beyond the file is refused.
        let mut img = collection(&[], 64);
        img[8..16].copy_from_slice(&(1u64 << 50).to_le_bytes());
        let s = memory_storage(&img);
        assert!(GlobalHeapCollection::read(&s, 0, Sizes::DEFAULT).is_err());
    }

    /// A collection whose header claims 1 TiB in a small file, or less than its own header,
    /// is refused naming the collection, its address and the bound, with nothing but the
    /// header read.
    #[test]
    fn an_absurd_collection_size_is_refused_naming_address_and_bound() {
        let mut img = vec![0u8; 0x80];
        img.extend(collection(&[obj(1, b"abc")], 64));
        img[0x88..0x90].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let src = Arc::new(Sparse::new(img.clone(), img.len() as u64));
        let s = Storage::from_source(src.clone());
        for e in [
            GlobalHeapCollection::open(&s, 0x80, Sizes::DEFAULT).unwrap_err(),
            GlobalHeapCollection::read(&s, 0x80, Sizes::DEFAULT).unwrap_err(),
        ] {
            let text = e.to_string();
            assert!(
                text.starts_with("corrupt global heap collection at 0x80:"),
                "{text}"
            );
            assert!(text.contains("collection of 1099511627776 bytes"), "{text}");
            assert!(text.contains("at most 64 bytes there"), "{text}");
        }
        assert_eq!(src.largest_read(), 16);
        img[0x88..0x90].copy_from_slice(&8u64.to_le_bytes());
        let s = Storage::from_source(Arc::new(Sparse::new(img.clone(), img.len() as u64)));
        let text = GlobalHeapCollection::open(&s, 0x80, Sizes::DEFAULT)
            .unwrap_err()
            .to_string();
        assert!(text.contains("at 0x80"), "{text}");
        assert!(
            text.contains("collection size 8 is smaller than its 16-byte header"),
            "{text}"
        );
    }

    /// An object whose recorded size is not what its reference expects is refused, naming the
    /// collection, its address, the object and the expected size, before its bytes are read:
    /// a 4 GiB object in a (sparse) 4 GiB collection wanted as a 5-byte string.
    #[test]
    fn an_object_of_another_size_than_expected_is_refused_before_reading() {
        let mut img = vec![0u8; 0x1000];
        let mut big = obj(1, b"");
        big[8..16].copy_from_slice(&(4u64 << 30).to_le_bytes());
        img.extend(collection(&[obj(2, b"small"), big], 64));
        let size = 16 + 24 + 16 + (4u64 << 30);
        img[0x1008..0x1010].copy_from_slice(&size.to_le_bytes());
        let src = Arc::new(Sparse::new(img, 0x1000 + size));
        let s = Storage::from_source(src.clone());
        let g = GlobalHeapCollection::open(&s, 0x1000, Sizes::DEFAULT).unwrap();
        assert_eq!(g.size, size);
        let e = g.object(&s, 1, 5).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("corrupt global heap collection at 0x1000:"),
            "{text}"
        );
        assert!(
            text.contains("object 1 has 4294967296 bytes where its reference expects 5"),
            "{text}"
        );
        assert!(src.largest_read() <= WINDOW, "{}", src.largest_read());
        // A caller that can only bound the size: refused above the bound, naming it.
        let e = g.object_up_to(&s, 1, 1 << 20).unwrap_err();
        assert!(matches!(e, Error::Limit { .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("global heap collection at 0x1000"), "{text}");
        assert!(
            text.contains("object 1 has 4294967296 bytes, more than the 1048576"),
            "{text}"
        );
        assert_eq!(g.object_up_to(&s, 2, 5).unwrap(), b"small");
        assert!(g.object_up_to(&s, 2, 4).is_err());
        // Smaller than expected is refused too; the right size is read.
        let text = g.object(&s, 2, 6).unwrap_err().to_string();
        assert!(text.contains("object 2 has 5 bytes where its reference expects 6"));
        assert_eq!(g.object(&s, 2, 5).unwrap(), b"small");
        assert!(src.largest_read() <= WINDOW, "{}", src.largest_read());
    }

    /// With 4-byte lengths the collection and object headers are padded to 16 bytes, as
    /// libhdf5 writes them (bytes of a file made by h5py with `set_sizes(4, 4)`).
    #[test]
    fn four_byte_lengths_pad_the_headers() {
        let mut img = b"GCOL\x01\0\0\0".to_vec();
        img.extend_from_slice(&64u32.to_le_bytes());
        img.extend_from_slice(&[0; 4]);
        for (index, data) in [(1u16, &b""[..]), (2, b"hello world")] {
            img.extend_from_slice(&index.to_le_bytes());
            img.extend_from_slice(&[0; 6]);
            img.extend_from_slice(&(data.len() as u32).to_le_bytes());
            img.extend_from_slice(&[0; 4]);
            img.extend_from_slice(data);
            img.resize(img.len().div_ceil(8) * 8, 0);
        }
        img.resize(64, 0);
        let s = memory_storage(&img);
        let sizes = Sizes {
            offset: 4,
            length: 4,
        };
        let g = GlobalHeapCollection::open(&s, 0, sizes).unwrap();
        assert_eq!(g.object(&s, 2, 11).unwrap(), b"hello world");
        assert_eq!(g.object(&s, 1, 0).unwrap(), b"");
        let all = GlobalHeapCollection::read(&s, 0, sizes).unwrap();
        assert_eq!(all.get(2).unwrap(), b"hello world");
        assert_eq!(all.objects.len(), 2);
    }

    /// Past the first window the walk reads further windows, never the collection whole,
    /// and finds objects wherever they are; each header is walked once.
    #[test]
    fn a_large_collection_is_walked_in_windows() {
        let objs: Vec<Vec<u8>> = (1..=5000u16)
            .map(|i| obj(i, format!("object {i:05}").as_bytes()))
            .collect();
        let size = 16 + objs.iter().map(|o| o.len() as u64).sum::<u64>() + 16;
        assert!(size > 2 * WINDOW);
        let mut img = vec![0u8; 8];
        img.extend(collection(&objs, size));
        let src = Arc::new(Sparse::new(img.clone(), img.len() as u64));
        let s = Storage::from_source(src.clone());
        let g = GlobalHeapCollection::open(&s, 8, Sizes::DEFAULT).unwrap();
        for i in [4999u16, 1, 2500, 5000, 2] {
            let want = format!("object {i:05}");
            assert_eq!(g.object(&s, i as u32, 12).unwrap(), want.as_bytes());
        }
        assert_eq!(lock(&g.walk).walked, 5000);
        assert!(src.largest_read() <= WINDOW);
        let all = GlobalHeapCollection::read(&s, 8, Sizes::DEFAULT).unwrap();
        assert_eq!(all.objects.len(), 5000);
        assert_eq!(all.get(5000).unwrap(), b"object 05000");
        // A cloned collection keeps what was walked.
        assert_eq!(lock(&g.clone().walk).found.len(), 5000);
    }
}
