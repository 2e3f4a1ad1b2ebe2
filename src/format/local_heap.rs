//! Local heap (`HEAP`, spec "III.D"): the names of an old-style group's links and of external
//! storage files.

use crate::error::Result;
use crate::io::{Sizes, Storage};

/// A local heap with its data segment loaded.
#[derive(Clone, Debug)]
pub struct LocalHeap {
    /// Relative address of the heap header.
    pub addr: u64,
    /// Relative address of the data segment.
    pub data_addr: u64,
    /// The data segment.
    pub data: Vec<u8>,
}

impl LocalHeap {
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<LocalHeap> {
        let _ = (storage, addr, sizes);
        Err(crate::error::Error::unsupported("local heap", "not implemented yet"))
    }

    /// The NUL-terminated string at `offset` in the data segment (without the NUL).
    pub fn string_at(&self, offset: u64) -> Result<&[u8]> {
        let _ = offset;
        Err(crate::error::Error::unsupported("local heap", "not implemented yet"))
    }
}
