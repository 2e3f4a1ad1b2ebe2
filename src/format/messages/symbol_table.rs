//! Symbol table message (0x0011): an old-style group's B-tree and local heap.

use crate::error::Result;
use crate::io::Sizes;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolTableMessage {
    /// v1 B-tree (node type 0) address.
    pub btree_addr: u64,
    /// Local heap holding the link names.
    pub heap_addr: u64,
}

impl SymbolTableMessage {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<SymbolTableMessage> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("symbol table message", "not implemented yet"))
    }
}
