//! Version-1 B-tree chunk index (layouts v1-3, node type 1). Keys hold chunk offsets in
//! element units, so a lookup converts chunk coordinates to elements
//! (coordinate × chunk dimension) and descends from the root: in an internal node it follows
//! the last child whose left key is ≤ the target (keys compare lexicographically, slowest
//! dimension first); in a leaf the chunk is the child whose key equals the target exactly.
//! Only the nodes on one path are read; decoded nodes are kept by address, the leaves apart
//! from the nodes above them, each read once (the module `node_cache`).
//! On a remote source, [`ChunkIndex::prepare`] names the nodes a range of lookups will read
//! level by level, so that they arrive together.

use std::num::NonZeroUsize;
use std::sync::Arc;

use super::node_cache::NodeCache;
use super::{ChunkIndex, ChunkRecord, IndexParams};
use crate::error::{Error, Result};
use crate::format::btree_v1::{BtreeV1Node, ChunkKey, NodeKeys, NODE_TYPE_CHUNK};
use crate::format::limits::MAX_TREE_DEPTH;
use crate::io::UNDEFINED_ADDR;

const WHAT: &str = "v1 B-tree chunk index";

/// The dataset-dimension offsets of a key (without the trailing element-size offset).
fn key_of(k: &ChunkKey, rank: usize) -> &[u64] {
    k.offsets.get(..rank).unwrap_or(&[])
}

/// A v1 B-tree chunk index with its node cache.
#[derive(Debug)]
pub struct BtreeV1Index {
    params: IndexParams,
    root: u64,
    nodes: NodeCache<BtreeV1Node>,
}

impl BtreeV1Index {
    /// Open the index whose root node is at `root`. Nothing is read until the first lookup.
    pub fn open(params: IndexParams, root: u64) -> Result<BtreeV1Index> {
        Self::with_entries(params, root, None)
    }

    /// Open with a node cache of at most `nodes` leaves and as many nodes above them,
    /// besides the budget (tests of eviction).
    pub fn with_cache(params: IndexParams, root: u64, nodes: NonZeroUsize) -> Result<Self> {
        Self::with_entries(params, root, Some(nodes))
    }

    fn with_entries(params: IndexParams, root: u64, nodes: Option<NonZeroUsize>) -> Result<Self> {
        params.validate(WHAT, root)?;
        Ok(BtreeV1Index {
            nodes: NodeCache::new(params.budget.clone(), nodes),
            params,
            root,
        })
    }

    fn node(&self, addr: u64) -> Result<Arc<BtreeV1Node>> {
        self.nodes.get(
            addr,
            |_| true,
            |n| n.level == 0,
            || {
                let rank = self.params.chunk_dims.len();
                super::log_read("btree-v1-node", addr, 0);
                let n = BtreeV1Node::read(&self.params.storage, addr, self.params.sizes, rank + 1)?;
                if n.node_type != NODE_TYPE_CHUNK {
                    return Err(Error::corrupt(
                        WHAT,
                        addr,
                        format!("node type {} in a chunk tree", n.node_type),
                    ));
                }
                Ok(n)
            },
        )
    }
}

impl BtreeV1Index {
    /// Chunk coordinates as the element offsets the keys hold; `None` on overflow.
    fn target(&self, coords: &[u64]) -> Option<Vec<u64>> {
        coords
            .iter()
            .zip(&self.params.chunk_dims)
            .map(|(&c, &d)| c.checked_mul(d))
            .collect()
    }

    /// Bytes a node takes in the file when it holds the most entries libhdf5's default
    /// allows (2K, K = 32): what is named for a node not read yet. A tree written with a
    /// larger K has the rest of a fuller node read by its lookup.
    fn node_len(&self) -> u64 {
        let entries = 2 * crate::format::superblock::DEFAULT_CHUNK_BTREE_K as u64;
        let o = self.params.sizes.offset as u64;
        let key = crate::format::btree_v1::CHUNK_KEY_PREFIX as u64
            + 8 * (self.params.chunk_dims.len() as u64 + 1);
        8 + 2 * o + (entries + 1) * key + entries * o
    }
}

impl ChunkIndex for BtreeV1Index {
    fn prepare(&self, lo: &[u64], hi: &[u64]) -> Result<()> {
        let storage = &self.params.storage;
        if self.root == UNDEFINED_ADDR || !storage.wants_hints() {
            return Ok(());
        }
        let rank = lo.len();
        let (Some(lo), Some(hi)) = (self.target(lo), self.target(hi)) else {
            return Ok(());
        };
        let mut level = vec![self.root];
        for _ in 0..=MAX_TREE_DEPTH {
            let mut below = Vec::new();
            let mut leaves_below = false;
            for &addr in &level {
                let node = self.node(addr)?;
                let NodeKeys::Chunk(keys) = &node.keys else {
                    return Ok(());
                };
                if node.level == 0 {
                    return Ok(());
                }
                leaves_below |= node.level == 1;
                // The children holding keys from `lo` to `hi`: from the last whose left key
                // is <= lo to the last whose left key is <= hi.
                let child_keys = &keys[..node.children.len()];
                let first = child_keys
                    .partition_point(|k| key_of(k, rank) <= lo.as_slice())
                    .saturating_sub(1);
                let end = child_keys.partition_point(|k| key_of(k, rank) <= hi.as_slice());
                below.extend_from_slice(node.children.get(first..end).unwrap_or_default());
                if below.len() >= super::MAX_PREPARED {
                    // The first ones from `lo`: the lookups reach the rest themselves.
                    below.truncate(super::MAX_PREPARED);
                    break;
                }
            }
            let n = self.node_len();
            let missing: Vec<(u64, u64)> = below
                .iter()
                .filter(|&&a| !self.nodes.contains(a))
                .map(|&a| (a, n))
                .collect();
            if !missing.is_empty() {
                storage.prefetch(&missing);
            }
            if leaves_below {
                return Ok(());
            }
            level = below;
        }
        Ok(())
    }

    fn lookup(&self, coords: &[u64]) -> Result<Option<ChunkRecord>> {
        if self.root == UNDEFINED_ADDR || !self.params.in_grid(coords) {
            return Ok(None);
        }
        let rank = coords.len();
        // In the grid, so coordinate × chunk dimension ≤ dimension + chunk − 1; still checked.
        let target = coords
            .iter()
            .zip(&self.params.chunk_dims)
            .map(|(&c, &d)| c.checked_mul(d))
            .collect::<Option<Vec<u64>>>()
            .ok_or_else(|| Error::corrupt(WHAT, self.root, "chunk offset overflows"))?;
        let mut addr = self.root;
        let mut expect_level = None;
        for _ in 0..=MAX_TREE_DEPTH {
            let node = self.node(addr)?;
            if expect_level.is_some_and(|l| l != node.level) {
                return Err(Error::corrupt(
                    WHAT,
                    addr,
                    format!(
                        "node level {} below a level {:?} node",
                        node.level, expect_level
                    ),
                ));
            }
            let NodeKeys::Chunk(keys) = &node.keys else {
                return Err(Error::corrupt(WHAT, addr, "group keys in a chunk tree"));
            };
            // Keys of the children only (the last key closes the node's range).
            let child_keys = &keys[..node.children.len()];
            if node.level == 0 {
                let found = child_keys.binary_search_by(|k| key_of(k, rank).cmp(&target));
                return Ok(found.ok().map(|i| ChunkRecord {
                    addr: node.children[i],
                    size: child_keys[i].size as u64,
                    filter_mask: child_keys[i].filter_mask,
                }));
            }
            // Number of children whose left key is ≤ target; the one before is the subtree.
            let n = child_keys.partition_point(|k| key_of(k, rank) <= target.as_slice());
            if n == 0 {
                return Ok(None);
            }
            addr = node.children[n - 1];
            expect_level = Some(node.level - 1);
        }
        Err(Error::limit(WHAT, self.root, "tree deeper than the limit"))
    }
}
