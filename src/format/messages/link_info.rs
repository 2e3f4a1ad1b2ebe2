//! Link info message (0x0002): where a new-style group keeps dense links.

use crate::error::Result;
use crate::io::Sizes;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkInfo {
    /// Creation order is tracked.
    pub track_order: bool,
    /// Creation order is indexed (a type-6 B-tree exists).
    pub index_order: bool,
    pub max_creation_index: Option<u64>,
    /// Fractal heap address, undefined when links are compact.
    pub heap_addr: u64,
    /// v2 B-tree (type 5) over link name hashes.
    pub name_btree_addr: u64,
    /// v2 B-tree (type 6) over creation order, when indexed.
    pub order_btree_addr: Option<u64>,
}

impl LinkInfo {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<LinkInfo> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("link info", "not implemented yet"))
    }
}
