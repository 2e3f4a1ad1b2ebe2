//! Global heap collections (`GCOL`, spec "III.E"): variable-length data and region references.
//!
//! A collection is one contiguous block (at least 4 KiB) whose size is stored in its header;
//! it holds objects, each with a 16-bit index, a reference count, a size and the data padded
//! to a multiple of 8 bytes. Object index 0 is the collection's free space and ends the list.
//! Vlen data refers to an object by (collection address, index): [`GlobalHeapId`]. Every
//! object is bounded by the collection size, which is itself checked against the file.

use crate::error::{Error, Result};
use crate::io::{Cursor, Sizes, Storage};

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

/// A global heap collection with its objects (spec "III.E Disk Format: Level 1E - Global
/// Heap").
#[derive(Clone, Debug)]
pub struct GlobalHeapCollection {
    pub addr: u64,
    /// (index, object bytes).
    pub objects: Vec<(u32, Vec<u8>)>,
}

const WHAT: &str = "global heap collection";

impl GlobalHeapCollection {
    /// Read the whole collection at `addr` and split it into objects.
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<GlobalHeapCollection> {
        let hlen = 8 + sizes.length as u64;
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
                format!("collection size {size}"),
            ));
        }
        // read_vec refuses a size larger than the rest of the file before allocating.
        let buf = storage.read_vec(addr, size, WHAT)?;
        let mut c = Cursor::new(&buf, addr, WHAT);
        c.seek(hlen as usize)?;
        let obj_head = 8 + sizes.length as usize;
        let mut objects = Vec::new();
        // Each object consumes at least `obj_head` bytes, so the loop ends within the block.
        while c.remaining() >= obj_head {
            let index = c.u16()?;
            let _refcount = c.u16()?;
            c.skip(4)?;
            let osize = c.length(sizes)?;
            if index == 0 {
                // The free-space object: the rest of the collection is unused.
                break;
            }
            let n = usize::try_from(osize)
                .ok()
                .filter(|&n| n <= c.remaining())
                .ok_or_else(|| {
                    Error::corrupt(
                        WHAT,
                        addr,
                        format!("object {index} of {osize} bytes overruns the collection"),
                    )
                })?;
            objects.push((index as u32, c.bytes(n)?.to_vec()));
            // Data is padded to a multiple of 8; the last object may end flush with the block.
            let pad = (8 - n % 8) % 8;
            if pad > c.remaining() {
                break;
            }
            c.skip(pad)?;
        }
        Ok(GlobalHeapCollection { addr, objects })
    }

    /// The object with `index`, if present.
    pub fn get(&self, index: u32) -> Option<&[u8]> {
        self.objects
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, v)| v.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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

    fn storage_with(bytes: &[u8]) -> (tempfile::NamedTempFile, Storage) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        let s = Storage::open(f.path()).unwrap();
        (f, s)
    }

    #[test]
    fn objects_and_free_space() {
        let img = collection(
            &[obj(1, b"hello"), obj(2, b"0123456789abcdef"), obj(0, &[])],
            128,
        );
        let (_f, s) = storage_with(&img);
        let g = GlobalHeapCollection::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(g.objects.len(), 2);
        assert_eq!(g.get(1).unwrap(), b"hello");
        assert_eq!(g.get(2).unwrap(), b"0123456789abcdef");
        assert!(g.get(3).is_none());
    }

    #[test]
    fn object_overrunning_collection() {
        let mut o = obj(1, b"abc");
        o[8..16].copy_from_slice(&1000u64.to_le_bytes());
        let img = collection(&[o], 64);
        let (_f, s) = storage_with(&img);
        assert!(GlobalHeapCollection::read(&s, 0, Sizes::DEFAULT).is_err());
        // A collection size beyond the file is refused.
        let mut img = collection(&[], 64);
        img[8..16].copy_from_slice(&(1u64 << 50).to_le_bytes());
        let (_f, s) = storage_with(&img);
        assert!(GlobalHeapCollection::read(&s, 0, Sizes::DEFAULT).is_err());
    }
}
