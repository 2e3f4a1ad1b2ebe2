//! Fixed-array chunk index (layout v4/v5 chunk indexing type 3), for chunked datasets with no
//! unlimited dimension. Chunk n (row-major over the maximum chunk grid) is
//! element n of the fixed array (`crate::format::fixed_array`). The header is read when the
//! index is opened; the data block prefix (elements, or the page bitmap when paged) on first
//! use; pages on demand, kept within the mount's index budget (the module `node_cache`). On a remote source, [`ChunkIndex::prepare`]
//! names the pages of a range of lookups at once, so that they arrive together.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use super::node_cache::NodeCache;
use super::{linear_index, log_read, max_chunk_grid, ChunkIndex, ChunkRecord, IndexParams};
use crate::error::{Error, Result};
use crate::format::fixed_array::{element_at, FixedArrayDataBlock, FixedArrayHeader};
use crate::io::UNDEFINED_ADDR;
use crate::sync::lock;

const WHAT: &str = "fixed array chunk index";

/// A fixed-array chunk index with its cached blocks.
#[derive(Debug)]
pub struct FixedArrayIndex {
    params: IndexParams,
    grid: Vec<u64>,
    /// `None` when the layout's index address is undefined (nothing written).
    header: Option<FixedArrayHeader>,
    dblock: Mutex<Option<Arc<FixedArrayDataBlock>>>,
    pages: NodeCache<Vec<u8>>,
}

impl FixedArrayIndex {
    /// Open the index whose header (`FAHD`) is at `addr`.
    pub fn open(params: IndexParams, addr: u64) -> Result<FixedArrayIndex> {
        Self::with_entries(params, addr, None)
    }

    /// Open with a page cache of at most `pages` pages besides the budget (tests of
    /// eviction).
    pub fn with_cache(params: IndexParams, addr: u64, pages: NonZeroUsize) -> Result<Self> {
        Self::with_entries(params, addr, Some(pages))
    }

    fn with_entries(params: IndexParams, addr: u64, pages: Option<NonZeroUsize>) -> Result<Self> {
        params.validate(WHAT, addr)?;
        let grid = max_chunk_grid(&params)
            .filter(|g| !g.contains(&u64::MAX))
            .ok_or_else(|| Error::corrupt(WHAT, addr, "unlimited dimension"))?;
        let header = if addr == UNDEFINED_ADDR {
            None
        } else {
            log_read("farray-header", addr, 0);
            Some(FixedArrayHeader::read(&params.storage, addr, params.sizes)?)
        };
        Ok(FixedArrayIndex {
            pages: NodeCache::new(params.budget.clone(), pages),
            params,
            grid,
            header,
            dblock: Mutex::new(None),
        })
    }

    fn data_block(&self, header: &FixedArrayHeader) -> Result<Arc<FixedArrayDataBlock>> {
        let mut slot = lock(&self.dblock);
        if let Some(d) = slot.as_ref() {
            return Ok(d.clone());
        }
        log_read("farray-data-block", header.data_block, 0);
        let d = Arc::new(FixedArrayDataBlock::read(
            &self.params.storage,
            header,
            self.params.sizes,
        )?);
        *slot = Some(d.clone());
        Ok(d)
    }

    fn page(
        &self,
        header: &FixedArrayHeader,
        dblock: &FixedArrayDataBlock,
        page: u64,
    ) -> Result<Arc<Vec<u8>>> {
        self.pages.get(
            page,
            |_| true,
            |_| true,
            || {
                log_read("farray-data-block-page", header.data_block, page);
                dblock.read_page(&self.params.storage, header, page)
            },
        )
    }
}

impl ChunkIndex for FixedArrayIndex {
    fn prepare(&self, lo: &[u64], hi: &[u64]) -> Result<()> {
        let Some(header) = &self.header else {
            return Ok(());
        };
        let storage = &self.params.storage;
        if !storage.wants_hints() || header.data_block == UNDEFINED_ADDR {
            return Ok(());
        }
        // Every lookup reads the data block first (the elements, or the bitmap of pages).
        let dblock = self.data_block(header)?;
        let (Some(first), Some(last)) =
            (linear_index(lo, &self.grid), linear_index(hi, &self.grid))
        else {
            return Ok(());
        };
        if header.npages() == 0 {
            return Ok(());
        }
        let pe = header.page_elements();
        let (p0, p1) = (
            first / pe,
            last.min(header.max_entries.saturating_sub(1)) / pe,
        );
        if p1 < p0 {
            return Ok(());
        }
        // The first pages from `lo`: the lookups reach the rest themselves.
        let p1 = p1.min(p0.saturating_add(super::MAX_PREPARED as u64 - 1));
        let missing: Vec<(u64, u64)> = {
            let cached = &self.pages;
            (p0..=p1)
                .filter(|&p| dblock.page_initialized(p) && !cached.contains(p))
                .filter_map(|p| dblock.page_range(header, p))
                .collect()
        };
        if !missing.is_empty() {
            storage.prefetch(&missing);
        }
        Ok(())
    }

    fn lookup(&self, coords: &[u64]) -> Result<Option<ChunkRecord>> {
        let Some(header) = &self.header else {
            return Ok(None);
        };
        if !self.params.in_grid(coords) || header.data_block == UNDEFINED_ADDR {
            return Ok(None);
        }
        let Some(n) = linear_index(coords, &self.grid).filter(|&n| n < header.max_entries) else {
            return Err(Error::corrupt(
                WHAT,
                header.addr,
                format!(
                    "chunk {coords:?} beyond the array's {} entries",
                    header.max_entries
                ),
            ));
        };
        let dblock = self.data_block(header)?;
        let sizes = self.params.sizes;
        let element = if header.npages() == 0 {
            element_at(header, &dblock.elements, n, sizes)?
        } else {
            let page = n / header.page_elements();
            if !dblock.page_initialized(page) {
                return Ok(None);
            }
            let bytes = self.page(header, &dblock, page)?;
            element_at(header, &bytes, n % header.page_elements(), sizes)?
        };
        Ok(self.params.record(element))
    }
}
