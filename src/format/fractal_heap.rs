//! Fractal heaps (`FRHP`, `FHDB`, `FHIB`, spec "III.G"): dense link and attribute storage and
//! the shared-message heap. Managed objects through direct and nested indirect blocks; huge
//! objects through v2 B-trees (types 1-4) or inline; tiny objects inline in the heap ID.

use crate::error::Result;
use crate::io::{Sizes, Storage};

/// An open fractal heap (header decoded; blocks read on demand).
#[derive(Clone, Debug)]
pub struct FractalHeap {
    pub addr: u64,
    /// Length of heap IDs in bytes.
    pub id_len: u16,
}

impl FractalHeap {
    pub fn open(storage: &Storage, addr: u64, sizes: Sizes) -> Result<FractalHeap> {
        let _ = (storage, addr, sizes);
        Err(crate::error::Error::unsupported("fractal heap", "not implemented yet"))
    }

    /// The object with this heap ID.
    pub fn get(&self, storage: &Storage, sizes: Sizes, id: &[u8]) -> Result<Vec<u8>> {
        let _ = (storage, sizes, id);
        Err(crate::error::Error::unsupported("fractal heap", "not implemented yet"))
    }
}
