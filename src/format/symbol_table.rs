//! Symbol table nodes (`SNOD`) and symbol table entries (spec "III.C", "III.B").

use crate::error::Result;
use crate::io::{Cursor, Sizes, Storage};

/// The scratch-pad of a symbol table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scratch {
    /// Cache type 0.
    None,
    /// Cache type 1: the object is a group with this B-tree and local heap.
    Group { btree_addr: u64, heap_addr: u64 },
    /// Cache type 2: the entry is a soft link; the value is at this local-heap offset.
    SoftLink { value_offset: u32 },
}

/// A symbol table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolTableEntry {
    /// Offset of the link name in the group's local heap.
    pub name_offset: u64,
    /// Object header address (undefined for soft links).
    pub header_addr: u64,
    pub scratch: Scratch,
}

impl SymbolTableEntry {
    /// Decode one entry (size: 2 × offset + 4 + 4 + 16 bytes).
    pub fn parse(c: &mut Cursor<'_>, sizes: Sizes) -> Result<SymbolTableEntry> {
        let _ = (c, sizes);
        Err(crate::error::Error::unsupported("symbol table entry", "not implemented yet"))
    }
}

/// A symbol table node: up to 2K entries, sorted by name.
#[derive(Clone, Debug)]
pub struct SymbolTableNode {
    pub entries: Vec<SymbolTableEntry>,
}

impl SymbolTableNode {
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<SymbolTableNode> {
        let _ = (storage, addr, sizes);
        Err(crate::error::Error::unsupported("symbol table node", "not implemented yet"))
    }
}
