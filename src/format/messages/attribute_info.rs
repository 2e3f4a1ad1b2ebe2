//! Attribute info message (0x0015): where an object keeps dense attributes.

use crate::error::Result;
use crate::io::Sizes;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttributeInfo {
    pub track_order: bool,
    pub index_order: bool,
    pub max_creation_index: Option<u16>,
    /// Fractal heap address, undefined when attributes are compact.
    pub heap_addr: u64,
    /// v2 B-tree (type 8) over attribute name hashes.
    pub name_btree_addr: u64,
    /// v2 B-tree (type 9) over creation order, when indexed.
    pub order_btree_addr: Option<u64>,
}

impl AttributeInfo {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<AttributeInfo> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("attribute info", "not implemented yet"))
    }
}
