//! Implicit chunk index (layout v4/v5 chunk indexing type 2): no index is stored. libhdf5
//! uses it only for unfiltered datasets with early allocation, so every chunk exists and they
//! lie back to back from the layout's address, numbered row-major over the chunk grid of the
//! *maximum* dimensions: `address = base + number × chunk bytes`.

use super::{linear_index, max_chunk_grid, ChunkIndex, ChunkRecord, IndexParams};
use crate::error::{Error, Result};
use crate::io::UNDEFINED_ADDR;

/// The implicit index: pure arithmetic.
#[derive(Debug)]
pub struct ImplicitIndex {
    params: IndexParams,
    base: u64,
    grid: Vec<u64>,
    chunk_bytes: u64,
}

impl ImplicitIndex {
    /// Build the index for chunks starting at `addr`.
    pub fn open(params: IndexParams, addr: u64) -> Result<ImplicitIndex> {
        const WHAT: &str = "implicit chunk index";
        params.validate(WHAT, addr)?;
        let grid = max_chunk_grid(&params)
            .filter(|g| !g.contains(&u64::MAX))
            .ok_or_else(|| Error::corrupt(WHAT, addr, "unlimited dimension"))?;
        let chunk_bytes = params
            .chunk_bytes()
            .ok_or_else(|| Error::corrupt(WHAT, addr, "chunk size overflows"))?;
        Ok(ImplicitIndex {
            params,
            base: addr,
            grid,
            chunk_bytes,
        })
    }
}

impl ChunkIndex for ImplicitIndex {
    fn lookup(&self, coords: &[u64]) -> Result<Option<ChunkRecord>> {
        if self.base == UNDEFINED_ADDR || !self.params.in_grid(coords) {
            return Ok(None);
        }
        let addr = linear_index(coords, &self.grid)
            .and_then(|n| n.checked_mul(self.chunk_bytes))
            .and_then(|off| off.checked_add(self.base))
            .ok_or_else(|| {
                Error::corrupt("implicit chunk index", self.base, "chunk address overflows")
            })?;
        Ok(Some(ChunkRecord {
            addr,
            size: self.chunk_bytes,
            filter_mask: 0,
        }))
    }
}
