//! Symbol table message (0x0011, spec "IV.A.2.r"): an old-style group's v1 B-tree (node type
//! 0) and local heap addresses.

use crate::error::Result;
use crate::io::{Cursor, Sizes};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolTableMessage {
    /// v1 B-tree (node type 0) address.
    pub btree_addr: u64,
    /// Local heap holding the link names.
    pub heap_addr: u64,
}

impl SymbolTableMessage {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<SymbolTableMessage> {
        let mut c = Cursor::new(data, addr, "symbol table message");
        Ok(SymbolTableMessage {
            btree_addr: c.offset(sizes)?,
            heap_addr: c.offset(sizes)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        let mut d = 0x88u64.to_le_bytes().to_vec();
        d.extend_from_slice(&0x2a8u64.to_le_bytes());
        let m = SymbolTableMessage::parse(&d, 0, Sizes::DEFAULT).unwrap();
        assert_eq!((m.btree_addr, m.heap_addr), (0x88, 0x2a8));
        assert!(SymbolTableMessage::parse(&d[..12], 0, Sizes::DEFAULT).is_err());
    }
}
