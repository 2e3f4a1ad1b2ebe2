//! Global heap collections (`GCOL`, spec "III.E"): variable-length data and region references.

use crate::error::Result;
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

/// A global heap collection with its objects.
#[derive(Clone, Debug)]
pub struct GlobalHeapCollection {
    pub addr: u64,
    /// (index, object bytes).
    pub objects: Vec<(u32, Vec<u8>)>,
}

impl GlobalHeapCollection {
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<GlobalHeapCollection> {
        let _ = (storage, addr, sizes);
        Err(crate::error::Error::unsupported("global heap", "not implemented yet"))
    }

    /// The object with `index`, if present.
    pub fn get(&self, index: u32) -> Option<&[u8]> {
        self.objects
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, v)| v.as_slice())
    }
}
