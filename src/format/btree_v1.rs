//! Version 1 B-trees (`TREE`, spec "III.A.1 Disk Format: Level 1A1 - Version 1 B-trees"):
//! node type 0 indexes a group's symbol table nodes, node type 1 indexes raw-data chunks.
//!
//! A node is a small header (signature, type, level, entries used, left and right sibling
//! addresses) followed by `entries + 1` keys interleaved with `entries` child addresses:
//! `key0 child0 key1 child1 ... keyN`. Child i covers the key range `[key i, key i+1)`.
//!
//! Group keys are offsets into the group's local heap ("Size of Lengths" bytes). Chunk keys
//! hold the chunk size (4 bytes), the filter mask (4 bytes) and rank+1 offsets of **8 bytes
//! each whatever the size of offsets**, in element units; the last offset is
//! the element-size dimension and is always 0.
//!
//! The on-disk node is sized for `2K` entries (K from the superblock or the layout), but only
//! the `entries used` are read here: the bytes beyond are never looked at, so the reader does
//! not need K. Entries used is checked against the bytes the file actually holds.

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::format::limits::MAX_TREE_DEPTH;
use crate::io::{Cursor, Sizes, Storage, UNDEFINED_ADDR};

/// Node type 0: group nodes.
pub const NODE_TYPE_GROUP: u8 = 0;
/// Node type 1: raw data chunk nodes.
pub const NODE_TYPE_CHUNK: u8 = 1;

/// Bytes of a chunk key before its offsets: chunk size (4) and filter mask (4).
pub const CHUNK_KEY_PREFIX: usize = 8;
/// Group B-tree nodes visited by [`group_symbol_nodes`] before giving up. A group of a few
/// million links needs a few hundred thousand nodes at the default K of 16.
const MAX_GROUP_NODES: usize = 1 << 20;

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

/// Bytes of one key of a node of type `node_type` (at `addr`, for errors); `chunk_dims` as
/// for [`BtreeV1Node::read`].
fn key_len(node_type: u8, chunk_dims: usize, sizes: Sizes, addr: u64) -> Result<usize> {
    const WHAT: &str = "v1 B-tree node";
    match node_type {
        NODE_TYPE_GROUP => Ok(sizes.length as usize),
        NODE_TYPE_CHUNK => {
            if chunk_dims == 0 || chunk_dims > crate::format::limits::MAX_RANK + 1 {
                return Err(Error::corrupt(
                    WHAT,
                    addr,
                    format!("chunk key with {chunk_dims} dimensions"),
                ));
            }
            Ok(CHUNK_KEY_PREFIX + 8 * chunk_dims)
        }
        t => Err(Error::corrupt(WHAT, addr, format!("unknown node type {t}"))),
    }
}

impl BtreeV1Node {
    /// Read the node at `addr`. `chunk_dims` is the dataset rank + 1 (for type 1 keys); it is
    /// ignored for type 0 nodes.
    pub fn read(
        storage: &Storage,
        addr: u64,
        sizes: Sizes,
        chunk_dims: usize,
    ) -> Result<BtreeV1Node> {
        Self::read_bounded(storage, addr, sizes, chunk_dims, u16::MAX as usize)
    }

    /// [`Self::read`], rejecting a node that claims more than `max_entries` entries (2K, with
    /// K from the superblock: group internal node K, or indexed storage K, default 32).
    pub fn read_bounded(
        storage: &Storage,
        addr: u64,
        sizes: Sizes,
        chunk_dims: usize,
        max_entries: usize,
    ) -> Result<BtreeV1Node> {
        const WHAT: &str = "v1 B-tree node";
        let o = sizes.offset as usize;
        let head_len = 8 + 2 * o;
        let head = storage.read_vec(addr, head_len as u64, WHAT)?;
        let mut c = Cursor::new(&head, addr, WHAT);
        c.signature(b"TREE")?;
        let node_type = c.u8()?;
        let level = c.u8()?;
        let entries = c.u16()? as usize;
        let left = c.offset(sizes)?;
        let right = c.offset(sizes)?;
        if entries > max_entries {
            return Err(Error::corrupt(
                WHAT,
                addr,
                format!("{entries} entries used, more than the node's {max_entries}"),
            ));
        }

        let key_len = key_len(node_type, chunk_dims, sizes, addr)?;
        // entries ≤ 65535 and key_len ≤ 8 + 8·33, so this cannot overflow; read_vec checks
        // the length against the file before allocating.
        let body_len = (entries + 1) * key_len + entries * o;
        let body_addr = addr
            .checked_add(head_len as u64)
            .ok_or_else(|| Error::corrupt(WHAT, addr, "address overflow"))?;
        if body_len as u64 > storage.available(body_addr) {
            return Err(Error::corrupt(
                WHAT,
                addr,
                format!("{entries} entries used do not fit in the file"),
            ));
        }
        let body = storage.read_vec(body_addr, body_len as u64, WHAT)?;
        let mut c = Cursor::new(&body, body_addr, WHAT);
        let mut children = Vec::with_capacity(entries);
        let keys = if node_type == NODE_TYPE_GROUP {
            let mut keys = Vec::with_capacity(entries + 1);
            for i in 0..=entries {
                keys.push(c.length(sizes)?);
                if i < entries {
                    children.push(c.offset(sizes)?);
                }
            }
            NodeKeys::Group(keys)
        } else {
            let mut keys = Vec::with_capacity(entries + 1);
            for i in 0..=entries {
                let size = c.u32()?;
                let filter_mask = c.u32()?;
                let offsets = (0..chunk_dims)
                    .map(|_| c.u64())
                    .collect::<Result<Vec<u64>>>()?;
                keys.push(ChunkKey {
                    size,
                    filter_mask,
                    offsets,
                });
                if i < entries {
                    children.push(c.offset(sizes)?);
                }
            }
            NodeKeys::Chunk(keys)
        };
        Ok(BtreeV1Node {
            addr,
            node_type,
            level,
            left,
            right,
            keys,
            children,
        })
    }

    /// The bytes the node at `addr` takes that [`Self::read`] reads (its head and the
    /// entries used), from its head alone; `chunk_dims` as for [`Self::read`].
    pub fn extent(storage: &Storage, addr: u64, sizes: Sizes, chunk_dims: usize) -> Result<u64> {
        const WHAT: &str = "v1 B-tree node";
        let o = sizes.offset as u64;
        let head = storage.read_vec(addr, 8, WHAT)?;
        let mut c = Cursor::new(&head, addr, WHAT);
        c.signature(b"TREE")?;
        let node_type = c.u8()?;
        let _level = c.u8()?;
        let entries = c.u16()? as u64;
        let key_len = key_len(node_type, chunk_dims, sizes, addr)? as u64;
        // entries ≤ 65535 and key_len ≤ 8 + 8·33: no overflow.
        Ok(8 + 2 * o + (entries + 1) * key_len + entries * o)
    }

    /// Number of entries (children) in the node.
    pub fn entries(&self) -> usize {
        self.children.len()
    }
}

/// Addresses of all symbol table nodes of a group B-tree (type 0), in key order. Depth and
/// node count are bounded and revisits detected.
pub fn group_symbol_nodes(storage: &Storage, root: u64, sizes: Sizes) -> Result<Vec<u64>> {
    const WHAT: &str = "group v1 B-tree";
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    // Depth-first, children pushed in reverse so they pop in key order. Each entry carries the
    // level its parent expects, so a child claiming a level that does not decrease is caught.
    let mut stack: Vec<(u64, Option<u8>)> = vec![(root, None)];
    while let Some((addr, expect_level)) = stack.pop() {
        if !seen.insert(addr) {
            return Err(Error::corrupt(WHAT, addr, "node visited twice (cycle)"));
        }
        if seen.len() > MAX_GROUP_NODES {
            return Err(Error::limit(WHAT, root, "too many nodes"));
        }
        let node = BtreeV1Node::read(storage, addr, sizes, 0)?;
        if node.node_type != NODE_TYPE_GROUP {
            return Err(Error::corrupt(
                WHAT,
                addr,
                format!("node type {} in a group tree", node.node_type),
            ));
        }
        match expect_level {
            None if node.level as usize > MAX_TREE_DEPTH => {
                return Err(Error::limit(WHAT, addr, "tree too deep"));
            }
            Some(l) if node.level != l => {
                return Err(Error::corrupt(
                    WHAT,
                    addr,
                    format!("node level {} where {l} was expected", node.level),
                ));
            }
            _ => {}
        }
        if node.level == 0 {
            out.extend(node.children.iter().copied());
        } else {
            for &child in node.children.iter().rev() {
                if child == UNDEFINED_ADDR {
                    return Err(Error::corrupt(WHAT, addr, "undefined child address"));
                }
                stack.push((child, Some(node.level - 1)));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::testutil::memory_storage;

    fn node_head(ntype: u8, level: u8, entries: u16) -> Vec<u8> {
        let mut v = b"TREE".to_vec();
        v.extend([ntype, level]);
        v.extend(entries.to_le_bytes());
        v.extend(u64::MAX.to_le_bytes());
        v.extend(u64::MAX.to_le_bytes());
        v
    }

    fn chunk_key(v: &mut Vec<u8>, size: u32, mask: u32, offs: &[u64]) {
        v.extend(size.to_le_bytes());
        v.extend(mask.to_le_bytes());
        for o in offs {
            v.extend(o.to_le_bytes());
        }
    }

    #[test]
    fn chunk_leaf_2d() {
        let mut v = node_head(1, 0, 2);
        chunk_key(&mut v, 100, 0, &[0, 0, 0]);
        v.extend(0x1000u64.to_le_bytes());
        chunk_key(&mut v, 90, 1, &[0, 5, 0]);
        v.extend(0x2000u64.to_le_bytes());
        chunk_key(&mut v, 0, 0, &[4, 10, 0]);
        let s = memory_storage(&v);
        let n = BtreeV1Node::read(&s, 0, Sizes::DEFAULT, 3).unwrap();
        assert_eq!(n.level, 0);
        assert_eq!(n.children, vec![0x1000, 0x2000]);
        assert_eq!(n.left, UNDEFINED_ADDR);
        let NodeKeys::Chunk(k) = n.keys else {
            panic!("chunk keys expected")
        };
        assert_eq!(k.len(), 3);
        assert_eq!(k[1].size, 90);
        assert_eq!(k[1].filter_mask, 1);
        assert_eq!(k[1].offsets, vec![0, 5, 0]);
        assert!(BtreeV1Node::read_bounded(&s, 0, Sizes::DEFAULT, 3, 1).is_err());
        // One entry too many for the bytes present.
        v[6] = 3;
        let s = memory_storage(&v);
        assert!(BtreeV1Node::read(&s, 0, Sizes::DEFAULT, 3).is_err());
    }

    #[test]
    fn chunk_keys_are_8_bytes_with_4_byte_offsets() {
        let s4 = Sizes {
            offset: 4,
            length: 4,
        };
        let mut v = b"TREE".to_vec();
        v.extend([1, 0, 1, 0]);
        v.extend([0xff; 8]); // siblings: undefined 4-byte addresses
        chunk_key(&mut v, 7, 0, &[8, 0]);
        v.extend(0x40u32.to_le_bytes());
        chunk_key(&mut v, 0, 0, &[16, 0]);
        let s = memory_storage(&v);
        let n = BtreeV1Node::read(&s, 0, s4, 2).unwrap();
        assert_eq!((n.left, n.right), (UNDEFINED_ADDR, UNDEFINED_ADDR));
        assert_eq!(n.children, vec![0x40]);
        let NodeKeys::Chunk(k) = n.keys else {
            panic!("chunk keys expected")
        };
        assert_eq!(k[1].offsets, vec![16, 0]);
    }

    #[test]
    fn group_tree_two_levels_and_cycle() {
        // Root at 0 (level 1) with children at 100 and 200 (level 0).
        let mut img = vec![0u8; 300];
        let mut root = node_head(0, 1, 2);
        for (k, c) in [(0u64, 100u64), (5, 200)] {
            root.extend(k.to_le_bytes());
            root.extend(c.to_le_bytes());
        }
        root.extend(9u64.to_le_bytes());
        img[..root.len()].copy_from_slice(&root);
        for (at, snod) in [(100usize, 0x500u64), (200, 0x600)] {
            let mut leaf = node_head(0, 0, 1);
            leaf.extend(0u64.to_le_bytes());
            leaf.extend(snod.to_le_bytes());
            leaf.extend(3u64.to_le_bytes());
            img[at..at + leaf.len()].copy_from_slice(&leaf);
        }
        let s = memory_storage(&img);
        assert_eq!(
            group_symbol_nodes(&s, 0, Sizes::DEFAULT).unwrap(),
            vec![0x500, 0x600]
        );
        // Second child points back at the first: a revisit.
        img[24 + 24..24 + 32].copy_from_slice(&100u64.to_le_bytes());
        let s = memory_storage(&img);
        assert!(group_symbol_nodes(&s, 0, Sizes::DEFAULT).is_err());
    }
}
