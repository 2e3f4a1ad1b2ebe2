//! Version 1 B-trees (`TREE`, spec "III.A.1"): node type 0 indexes a group's symbol table
//! nodes, node type 1 indexes raw-data chunks.
//!
//! Chunk keys hold the chunk size (4 bytes), the filter mask (4 bytes) and rank+1 offsets of
//! **8 bytes each whatever the size of offsets** (FORMAT-NOTES #7), in element units; the last
//! offset is the element-size dimension and is always 0.

use crate::error::Result;
use crate::io::{Sizes, Storage};

/// A chunk key (node type 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkKey {
    /// Size of the stored (filtered) chunk in bytes.
    pub size: u32,
    /// Filters skipped for this chunk (bit i set = filter i not applied).
    pub filter_mask: u32,
    /// Chunk offset in elements per dimension, plus the trailing element-size offset.
    pub offsets: Vec<u64>,
}

/// Keys of a node, by node type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKeys {
    /// Type 0: offsets into the group's local heap.
    Group(Vec<u64>),
    /// Type 1: chunk keys.
    Chunk(Vec<ChunkKey>),
}

/// One B-tree node: `entries` children separated by `entries + 1` keys.
#[derive(Clone, Debug)]
pub struct BtreeV1Node {
    pub addr: u64,
    pub node_type: u8,
    /// 0 for leaves.
    pub level: u8,
    pub left: u64,
    pub right: u64,
    pub keys: NodeKeys,
    /// Child addresses: sub-nodes, or at level 0 symbol table nodes / chunks.
    pub children: Vec<u64>,
}

impl BtreeV1Node {
    /// Read the node at `addr`. `chunk_dims` is the dataset rank + 1 (for type 1 keys); it is
    /// ignored for type 0 nodes.
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes, chunk_dims: usize) -> Result<BtreeV1Node> {
        let _ = (storage, addr, sizes, chunk_dims);
        Err(crate::error::Error::unsupported("v1 B-tree node", "not implemented yet"))
    }
}

/// Addresses of all symbol table nodes of a group B-tree (type 0), in key order. Depth and
/// node count are bounded and revisits detected.
pub fn group_symbol_nodes(storage: &Storage, root: u64, sizes: Sizes) -> Result<Vec<u64>> {
    let _ = (storage, root, sizes);
    Err(crate::error::Error::unsupported("v1 B-tree", "not implemented yet"))
}
