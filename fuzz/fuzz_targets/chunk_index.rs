//! Arbitrary bytes as each chunk index type: the input starts with the index parameters
//! (type, rank, dims, max dims, chunk dims, element size, filtered, layout version and the
//! array/B-tree creation parameters), the rest is the file the index is read from, with the
//! index at a fuzzed address. Every chunk of a small grid is looked up.
//!
//! The header is 1 + 1 + 3·rank·2 + 2 + 1 + 1 + 1 + 8 + 2 + 5 + 4 bytes (u16 dimensions keep
//! grids small); anything shorter is padded with zeros.
#![no_main]

use h5mount::format::messages::layout::ChunkIndexSpec;
use h5mount::io::Sizes;
use h5mount::layout::chunk_index::{self, IndexParams};
use h5mount_fuzz::Bytes;
use libfuzzer_sys::fuzz_target;

/// Lookups per input at most.
const MAX_LOOKUPS: u64 = 256;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let kind = b.u8() % 6;
    let rank = 1 + (b.u8() % 3) as usize;
    let dims: Vec<u64> = (0..rank).map(|_| b.u16() as u64).collect();
    let max_dims: Vec<u64> = (0..rank)
        .map(|_| match b.u16() as u64 {
            0xffff => u64::MAX,
            v => v,
        })
        .collect();
    let chunk_dims: Vec<u64> = (0..rank).map(|_| b.u16() as u64).collect();
    let element_size = b.u16() as u32;
    let filtered = b.u8() & 1 == 1;
    let layout_version = 3 + b.u8() % 3;
    let layout_flags = b.u8();
    let addr = match b.u64() {
        a if a >= 1 << 20 => u64::MAX,
        a => a,
    };
    let sizes = match b.u8() % 4 {
        0 => Sizes {
            offset: 4,
            length: 4,
        },
        1 => Sizes {
            offset: 4,
            length: 8,
        },
        2 => Sizes {
            offset: 8,
            length: 4,
        },
        _ => Sizes::DEFAULT,
    };
    let p = [b.u8(), b.u8(), b.u8(), b.u8(), b.u8()];
    let node_size = b.u32();
    let filtered_size = if filtered {
        Some(b.u64() % (1 << 24))
    } else {
        None
    };
    let spec = match kind {
        0 => ChunkIndexSpec::BtreeV1 { addr },
        1 => ChunkIndexSpec::SingleChunk {
            addr,
            filtered_size,
            filter_mask: p[0] as u32,
        },
        2 => ChunkIndexSpec::Implicit { addr },
        3 => ChunkIndexSpec::FixedArray {
            addr,
            page_bits: p[0],
        },
        4 => ChunkIndexSpec::ExtensibleArray {
            addr,
            max_bits: p[0],
            index_elements: p[1],
            min_pointers: p[2],
            min_elements: p[3],
            page_bits: p[4],
        },
        _ => ChunkIndexSpec::BtreeV2 {
            addr,
            node_size,
            split_percent: p[0],
            merge_percent: p[1],
        },
    };
    let storage = h5mount_fuzz::storage(b.rest());
    let params = IndexParams {
        storage,
        sizes,
        dims: dims.clone(),
        max_dims,
        chunk_dims: chunk_dims.clone(),
        element_size,
        filtered,
        layout_version,
        layout_flags,
        // The index budget of a mount with the default `--cache-size` (256 MiB).
        budget: std::sync::Arc::new(h5mount::cache::budget::IndexBudget::for_cache(256 << 20)),
    };
    let Ok(index) = chunk_index::open(&spec, params) else {
        return;
    };
    // Every chunk of the current grid, row-major, up to MAX_LOOKUPS, then a few outside it.
    let grid: Vec<u64> = dims
        .iter()
        .zip(&chunk_dims)
        .map(|(&d, &c)| if c == 0 { 0 } else { d.div_ceil(c) })
        .collect();
    let total = grid
        .iter()
        .try_fold(1u64, |a, &g| a.checked_mul(g))
        .unwrap_or(u64::MAX);
    for i in 0..total.min(MAX_LOOKUPS) {
        let mut rem = i;
        let mut coords = vec![0; rank];
        for d in (0..rank).rev() {
            coords[d] = rem % grid[d];
            rem /= grid[d];
        }
        let _ = index.lookup(&coords);
    }
    let _ = index.lookup(&grid);
    let _ = index.lookup(&vec![u64::MAX; rank]);
    let _ = index.lookup(&[0]);
});
