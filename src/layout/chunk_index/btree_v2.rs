//! Chunk index type 5: a version-2 B-tree with record type 10 (unfiltered chunks: address and
//! scaled offsets) or 11 (filtered: address, stored size, filter mask, scaled offsets).
//!
//! Records are sorted by their scaled offsets (chunk coordinates in chunk units), compared
//! dimension by dimension from the first, so a lookup descends one node per level comparing
//! coordinates. Decoded nodes are kept by address within the mount's index budget (the
//! module `node_cache`), so repeated lookups cost memory reads only; nothing else of the
//! tree is loaded. On a remote
//! source, [`ChunkIndex::prepare`] names the nodes a range of lookups will read, level by
//! level, so that they arrive together.

use std::sync::Arc;

use super::node_cache::NodeCache;
use super::{ChunkIndex, ChunkRecord, IndexParams};
use crate::error::{Error, Result};
use crate::format::btree_v2::records::ChunkBtRecord;
use crate::format::btree_v2::{read_node, BtreeV2Header, Node};
use crate::io::UNDEFINED_ADDR;

/// A v2 B-tree chunk index.
#[derive(Debug)]
pub struct BtreeV2Index {
    params: IndexParams,
    header: BtreeV2Header,
    rank: usize,
    /// Full uncompressed chunk size: the stored size of every unfiltered chunk.
    chunk_bytes: u64,
    nodes: NodeCache<Node>,
}

const WHAT: &str = "v2 B-tree chunk index";

impl BtreeV2Index {
    /// Open the index whose B-tree header is at `addr`.
    pub fn open(params: &IndexParams, addr: u64) -> Result<BtreeV2Index> {
        super::log_read("btree-v2-header", addr, 0);
        let header = BtreeV2Header::read(&params.storage, addr, params.sizes)?;
        let rank = params.dims.len();
        let rs = header.record_size as usize;
        let o = params.sizes.offset as usize;
        match header.record_type {
            10 if rs == o + 8 * rank => {}
            11 => {
                ChunkBtRecord::size_width(rs, rank, params.sizes).map_err(|_| {
                    Error::corrupt(WHAT, addr, format!("record size {rs} for rank {rank}"))
                })?;
            }
            10 => {
                return Err(Error::corrupt(
                    WHAT,
                    addr,
                    format!("record size {rs} for rank {rank}"),
                ))
            }
            t => {
                return Err(Error::corrupt(
                    WHAT,
                    addr,
                    format!("record type {t}, expected 10 or 11"),
                ))
            }
        }
        let chunk_bytes = params
            .chunk_bytes()
            .ok_or_else(|| Error::corrupt(WHAT, addr, "chunk size overflows"))?;
        Ok(BtreeV2Index {
            params: params.clone(),
            header,
            rank,
            chunk_bytes,
            nodes: NodeCache::new(params.budget.clone(), None),
        })
    }

    /// The node at `addr` (depth and record count from its parent), from the cache or the file.
    fn node(&self, addr: u64, depth: u16, records: u64) -> Result<Arc<Node>> {
        let p = &self.params;
        self.nodes.get(
            addr,
            |n| n.depth == depth && n.len() as u64 == records,
            |n| n.depth == 0,
            || {
                super::log_read("btree-v2-node", addr, 0);
                read_node(&p.storage, &self.header, p.sizes, addr, depth, records)
            },
        )
    }
}

impl ChunkIndex for BtreeV2Index {
    fn prepare(&self, lo: &[u64], hi: &[u64]) -> Result<()> {
        let h = &self.header;
        let storage = &self.params.storage;
        if h.root_addr == UNDEFINED_ADDR || !storage.wants_hints() {
            return Ok(());
        }
        if lo.len() != self.rank || hi.len() != self.rank {
            return Ok(());
        }
        if h.depth == 0 {
            // One node: the root, which every lookup reads.
            if !self.nodes.contains(h.root_addr) {
                storage.prefetch(&[(h.root_addr, h.node_size as u64)]);
            }
            return Ok(());
        }
        let (ty, sizes) = (h.record_type, self.params.sizes);
        let mut level = vec![(h.root_addr, h.depth, h.root_records as u64)];
        // Depth strictly decreases: at most depth levels.
        loop {
            let mut below = Vec::new();
            let mut depth = 0;
            for &(addr, d, records) in &level {
                let node = self.node(addr, d, records)?;
                if node.depth == 0 {
                    return Ok(());
                }
                depth = node.depth - 1;
                // The children between where `lo` and `hi` fall (a record equal to either is
                // in this node; its neighbours' children are taken, a little more than needed).
                let at = |c: &[u64]| -> Result<usize> {
                    Ok(
                        match node.search(&mut |r| ChunkBtRecord::compare(ty, r, sizes, c))? {
                            Ok(i) | Err(i) => i,
                        },
                    )
                };
                let (a, b) = (at(lo)?, at(hi)?);
                let last = node.children.len().saturating_sub(1);
                let take = node
                    .children
                    .get(a.min(last)..=b.min(last))
                    .unwrap_or_default();
                below.extend(take.iter().map(|c| (c.addr, depth, c.records)));
                if below.len() >= super::MAX_PREPARED {
                    // The first ones from `lo`: the lookups reach the rest themselves.
                    below.truncate(super::MAX_PREPARED);
                    break;
                }
            }
            let n = h.node_size as u64;
            let missing: Vec<(u64, u64)> = below
                .iter()
                .filter(|(a, _, _)| !self.nodes.contains(*a))
                .map(|&(a, _, _)| (a, n))
                .collect();
            if !missing.is_empty() {
                storage.prefetch(&missing);
            }
            if depth == 0 {
                return Ok(());
            }
            level = below;
        }
    }

    fn lookup(&self, coords: &[u64]) -> Result<Option<ChunkRecord>> {
        if coords.len() != self.rank {
            return Err(Error::Invalid(format!(
                "{} chunk coordinates for a rank-{} dataset",
                coords.len(),
                self.rank
            )));
        }
        let h = &self.header;
        if h.root_addr == UNDEFINED_ADDR || (h.depth == 0 && h.root_records == 0) {
            return Ok(None);
        }
        let (ty, sizes) = (h.record_type, self.params.sizes);
        let mut node = self.node(h.root_addr, h.depth, h.root_records as u64)?;
        // Depth strictly decreases: at most depth + 1 nodes per lookup.
        loop {
            match node.search(&mut |r| ChunkBtRecord::compare(ty, r, sizes, coords))? {
                Ok(i) => {
                    let raw = node.record(i).unwrap_or_default();
                    let rec = ChunkBtRecord::parse(ty, raw, sizes, self.rank)?;
                    if rec.addr == UNDEFINED_ADDR {
                        return Ok(None);
                    }
                    return Ok(Some(ChunkRecord {
                        addr: rec.addr,
                        size: rec.size.unwrap_or(self.chunk_bytes),
                        filter_mask: rec.filter_mask,
                    }));
                }
                Err(i) => {
                    let Some(child) = node.children.get(i).copied() else {
                        return Ok(None);
                    };
                    node = self.node(child.addr, node.depth - 1, child.records)?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::btree_v2::for_each_record;
    use crate::io::{Sizes, Storage};
    use std::collections::HashSet;

    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/format/testdata/heaps/");

    fn nums(v: &serde_json::Value) -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    }

    /// Every chunk h5py lists (`get_chunk_info`) is found with the same address, size and
    /// filter mask; coordinates h5py does not list are absent.
    fn check_file(name: &str, layout_version: u8, sizes: Sizes) {
        let exp: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(format!("{DIR}expected.json")).unwrap())
                .unwrap();
        let path = format!("{DIR}{name}");
        let bytes = std::fs::read(&path).unwrap();
        let storage = Storage::open(std::path::Path::new(&path)).unwrap();
        let headers: Vec<BtreeV2Header> = (0..bytes.len().saturating_sub(4))
            .filter(|&i| &bytes[i..i + 4] == b"BTHD")
            .filter_map(|i| BtreeV2Header::read(&storage, i as u64, sizes).ok())
            .collect();
        let datasets = exp[name]["datasets"].as_object().unwrap();
        assert!(!datasets.is_empty());
        let mut deep = false;
        for (ds, d) in datasets {
            let dims = nums(&d["dims"]);
            let records = d["records"].as_array().unwrap();
            let addrs: HashSet<u64> = records.iter().map(|r| r[1].as_u64().unwrap()).collect();
            // The tree whose first record points at one of this dataset's chunks.
            let header = headers
                .iter()
                .find(|h| {
                    let mut first = None;
                    for_each_record(&storage, h, sizes, &mut |r| {
                        first = ChunkBtRecord::parse(h.record_type, r, sizes, dims.len()).ok();
                        Ok(false)
                    })
                    .unwrap();
                    first.is_some_and(|f| addrs.contains(&f.addr))
                })
                .unwrap();
            let params = IndexParams {
                storage: storage.clone(),
                sizes,
                dims: dims.clone(),
                max_dims: vec![u64::MAX; dims.len()],
                chunk_dims: nums(&d["chunks"]),
                element_size: d["esize"].as_u64().unwrap() as u32,
                filtered: d["filtered"].as_bool().unwrap(),
                layout_version,
                layout_flags: 0,
                budget: Default::default(),
            };
            let index = BtreeV2Index::open(&params, header.addr).unwrap();
            let mut present = HashSet::new();
            for r in records {
                let coords = nums(&r[0]);
                let got = index.lookup(&coords).unwrap().unwrap();
                let want = (
                    r[1].as_u64().unwrap(),
                    r[2].as_u64().unwrap(),
                    r[3].as_u64().unwrap(),
                );
                assert_eq!(
                    (got.addr, got.size, got.filter_mask as u64),
                    want,
                    "{name} {ds} {coords:?}"
                );
                present.insert(coords);
            }
            let grid: Vec<u64> = dims
                .iter()
                .zip(nums(&d["chunks"]))
                .map(|(d, c)| d.div_ceil(c) + 1)
                .collect();
            for i in 0..grid[0] {
                for j in 0..grid[1] {
                    let got = index.lookup(&[i, j]).unwrap();
                    assert_eq!(
                        got.is_some(),
                        present.contains(&vec![i, j]),
                        "{name} {ds} [{i}, {j}]"
                    );
                }
            }
            assert!(index.lookup(&[0]).is_err());
            // Over a source that asks for hints: prepare names what a range of lookups reads.
            let (rstorage, rec) = super::super::tests::recording(std::path::Path::new(&path));
            let rparams = IndexParams {
                storage: rstorage,
                ..params.clone()
            };
            let open_cold = || -> Box<dyn ChunkIndex> {
                Box::new(BtreeV2Index::open(&rparams, header.addr).unwrap())
            };
            for window in [1, 5, 40] {
                let n = super::super::tests::check_prepare(&grid, &rec, window, &open_cold);
                if header.depth > 0 {
                    assert!(n > 0, "{name} {ds}: no lookup read anything after prepare");
                }
            }
            deep |= header.depth > 0;
        }
        assert!(deep, "{name}: no tree of more than one level");
    }

    #[test]
    fn layout_v4_file() {
        check_file("chunks_v114.h5", 4, Sizes::DEFAULT);
    }

    #[test]
    fn layout_v5_file() {
        check_file("chunks_latest.h5", 5, Sizes::DEFAULT);
    }

    #[test]
    fn four_byte_addresses_and_lengths() {
        let sizes = Sizes {
            offset: 4,
            length: 4,
        };
        check_file("small_sizes.h5", 5, sizes);
    }
}
