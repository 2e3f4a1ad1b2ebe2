//! Extensible-array chunk index (layout v4/v5 chunk indexing type 4), for chunked datasets
//! with exactly one unlimited dimension. Chunk coordinates are numbered with the unlimited
//! dimension first ([`super::ea_linear_index`]) and the number is an element
//! of the extensible array (`crate::format::extensible_array`), found by arithmetic: a lookup
//! reads at most the index block, one super block and one data block (or data block page).
//! The header is read at open; the index block on first use; super blocks and data blocks or
//! pages through bounded LRUs. On a remote source, [`ChunkIndex::prepare`] names the data
//! blocks (or pages) of a range of lookups at once, so that they arrive together.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::{ea_linear_index, ChunkIndex, ChunkRecord, IndexParams};
use crate::error::{Error, Result};
use crate::format::extensible_array::{
    data_block_len, data_block_page, element_at, read_data_block, read_data_block_page,
    ElementLocation, ExtensibleArrayHeader, ExtensibleArrayIndexBlock, ExtensibleArraySuperBlock,
};
use crate::io::UNDEFINED_ADDR;
use crate::sync::lock;

const WHAT: &str = "extensible array chunk index";

/// An extensible-array chunk index with its cached blocks.
#[derive(Debug)]
pub struct ExtensibleArrayIndex {
    params: IndexParams,
    /// `None` when the layout's index address is undefined (nothing written).
    header: Option<ExtensibleArrayHeader>,
    iblock: Mutex<Option<Arc<ExtensibleArrayIndexBlock>>>,
    /// Super blocks by address.
    sblocks: Mutex<LruCache<u64, Arc<ExtensibleArraySuperBlock>>>,
    /// Element bytes of data blocks (by address) and data block pages (by page address).
    dblocks: Mutex<LruCache<u64, Arc<Vec<u8>>>>,
}

impl ExtensibleArrayIndex {
    /// Open the index whose header (`EAHD`) is at `addr`.
    pub fn open(params: IndexParams, addr: u64) -> Result<ExtensibleArrayIndex> {
        Self::with_cache(params, addr, super::NODE_CACHE_ENTRIES)
    }

    /// Open with an explicit capacity for each block cache.
    pub fn with_cache(params: IndexParams, addr: u64, blocks: NonZeroUsize) -> Result<Self> {
        params.validate(WHAT, addr)?;
        let unlimited = params.max_dims.iter().filter(|&&m| m == u64::MAX).count();
        if unlimited != 1 {
            return Err(Error::corrupt(
                WHAT,
                addr,
                format!("{unlimited} unlimited dimensions, expected 1"),
            ));
        }
        let header = if addr == UNDEFINED_ADDR {
            None
        } else {
            Some(ExtensibleArrayHeader::read(
                &params.storage,
                addr,
                params.sizes,
            )?)
        };
        Ok(ExtensibleArrayIndex {
            params,
            header,
            iblock: Mutex::new(None),
            sblocks: Mutex::new(LruCache::sparse(blocks)),
            dblocks: Mutex::new(LruCache::sparse(blocks)),
        })
    }

    fn index_block(&self, h: &ExtensibleArrayHeader) -> Result<Arc<ExtensibleArrayIndexBlock>> {
        let mut slot = lock(&self.iblock);
        if let Some(b) = slot.as_ref() {
            return Ok(b.clone());
        }
        let b = Arc::new(ExtensibleArrayIndexBlock::read(
            &self.params.storage,
            h,
            self.params.sizes,
        )?);
        *slot = Some(b.clone());
        Ok(b)
    }

    fn super_block(
        &self,
        h: &ExtensibleArrayHeader,
        sblk_idx: usize,
        addr: u64,
    ) -> Result<Arc<ExtensibleArraySuperBlock>> {
        if let Some(b) = lock(&self.sblocks).get(&addr) {
            return Ok(b.clone());
        }
        let b = Arc::new(ExtensibleArraySuperBlock::read(
            &self.params.storage,
            h,
            sblk_idx,
            addr,
            self.params.sizes,
        )?);
        lock(&self.sblocks).put(addr, b.clone());
        Ok(b)
    }

    /// Element bytes of the block or page at `key`, read by `read` on a miss.
    fn elements(&self, key: u64, read: impl FnOnce() -> Result<Vec<u8>>) -> Result<Arc<Vec<u8>>> {
        if let Some(b) = lock(&self.dblocks).get(&key) {
            return Ok(b.clone());
        }
        let b = Arc::new(read()?);
        lock(&self.dblocks).put(key, b.clone());
        Ok(b)
    }

    /// Look up element `n` of the array.
    fn element(&self, h: &ExtensibleArrayHeader, n: u64) -> Result<Option<ChunkRecord>> {
        let (storage, sizes) = (&self.params.storage, self.params.sizes);
        let iblock = self.index_block(h)?;
        let e = match h.locate(n)? {
            ElementLocation::IndexBlock { index } => element_at(h, &iblock.elements, index, sizes)?,
            ElementLocation::DirectDataBlock { dblk, nelmts, elmt } => {
                let addr = *iblock.dblk_addrs.get(dblk).ok_or_else(|| {
                    Error::corrupt(
                        WHAT,
                        h.addr,
                        format!("data block {dblk} of the index block"),
                    )
                })?;
                if addr == UNDEFINED_ADDR {
                    return Ok(None);
                }
                if h.dblk_npages(nelmts) != 0 {
                    // libhdf5 never pages these with its default parameters (the index
                    // block's data blocks hold at most 64 elements), and there is no bitmap
                    // to say which pages exist.
                    return Err(Error::unsupported(
                        WHAT,
                        "paged data block addressed from the index block",
                    ));
                }
                let bytes =
                    self.elements(addr, || read_data_block(storage, h, addr, nelmts, sizes))?;
                element_at(h, &bytes, elmt, sizes)?
            }
            ElementLocation::SuperBlock {
                sblk_idx,
                sblk_off,
                dblk,
                nelmts,
                elmt,
            } => {
                let sblk_addr = *iblock.sblk_addrs.get(sblk_off).ok_or_else(|| {
                    Error::corrupt(WHAT, h.addr, format!("super block {sblk_idx}"))
                })?;
                if sblk_addr == UNDEFINED_ADDR {
                    return Ok(None);
                }
                let sblock = self.super_block(h, sblk_idx, sblk_addr)?;
                let addr = usize::try_from(dblk)
                    .ok()
                    .and_then(|d| sblock.dblk_addrs.get(d))
                    .copied()
                    .ok_or_else(|| Error::corrupt(WHAT, sblk_addr, format!("data block {dblk}")))?;
                if addr == UNDEFINED_ADDR {
                    return Ok(None);
                }
                if sblock.dblk_npages == 0 {
                    let bytes =
                        self.elements(addr, || read_data_block(storage, h, addr, nelmts, sizes))?;
                    element_at(h, &bytes, elmt, sizes)?
                } else {
                    let page = elmt / h.page_elements();
                    if !sblock.page_initialized(dblk, page) {
                        return Ok(None);
                    }
                    // Page keys (block address + 1 + page) fall inside the paged block's own
                    // bytes, so they never collide with another block's address.
                    let key = addr.saturating_add(1).saturating_add(page);
                    let bytes =
                        self.elements(key, || read_data_block_page(storage, h, addr, page, sizes))?;
                    element_at(h, &bytes, elmt % h.page_elements(), sizes)?
                }
            }
        };
        Ok(self.params.record(e))
    }
}

impl ChunkIndex for ExtensibleArrayIndex {
    fn prepare(&self, lo: &[u64], hi: &[u64]) -> Result<()> {
        let Some(h) = &self.header else {
            return Ok(());
        };
        let (storage, sizes) = (&self.params.storage, self.params.sizes);
        if !storage.wants_hints() || h.index_block == UNDEFINED_ADDR {
            return Ok(());
        }
        let (Some(first), Some(last)) = (
            ea_linear_index(lo, &self.params),
            ea_linear_index(hi, &self.params),
        ) else {
            return Ok(());
        };
        let last = last.min(h.max_index_set.saturating_sub(1));
        let iblock = self.index_block(h)?;
        // The data blocks (or their pages) holding elements `first..=last`, one after the
        // other; the super blocks that list them are read on the way (few, and cached).
        let mut want = Vec::new();
        let mut n = first;
        while n <= last && want.len() <= super::MAX_PREPARED {
            let next = match h.locate(n)? {
                ElementLocation::IndexBlock { .. } => h.index_elements as u64,
                ElementLocation::DirectDataBlock { dblk, nelmts, elmt } => {
                    let addr = iblock.dblk_addrs.get(dblk).copied();
                    if let (Some(addr), 0) = (addr, h.dblk_npages(nelmts)) {
                        if addr != UNDEFINED_ADDR {
                            want.extend(data_block_len(h, nelmts, sizes).map(|l| (addr, addr, l)));
                        }
                    }
                    n - elmt + nelmts
                }
                ElementLocation::SuperBlock {
                    sblk_idx,
                    sblk_off,
                    dblk,
                    nelmts,
                    elmt,
                } => {
                    let sblk = iblock.sblk_addrs.get(sblk_off).copied();
                    let sblock = match sblk.filter(|&a| a != UNDEFINED_ADDR) {
                        Some(a) => Some(self.super_block(h, sblk_idx, a)?),
                        None => None,
                    };
                    let addr = sblock.as_ref().and_then(|sb| {
                        usize::try_from(dblk)
                            .ok()
                            .and_then(|d| sb.dblk_addrs.get(d))
                            .copied()
                            .filter(|&a| a != UNDEFINED_ADDR)
                            .map(|a| (sb, a))
                    });
                    if let Some((sblock, addr)) = addr {
                        if sblock.dblk_npages == 0 {
                            want.extend(data_block_len(h, nelmts, sizes).map(|l| (addr, addr, l)));
                        } else {
                            // The pages from the one holding `n` to the one holding `last`
                            // (or the block's end).
                            let pe = h.page_elements();
                            let end = (last - (n - elmt)).min(nelmts - 1);
                            for page in elmt / pe..=end / pe {
                                if sblock.page_initialized(dblk, page) {
                                    let key = addr.saturating_add(1).saturating_add(page);
                                    want.extend(
                                        data_block_page(h, addr, page, sizes)
                                            .map(|(a, l)| (key, a, l)),
                                    );
                                }
                            }
                        }
                    }
                    n - elmt + nelmts
                }
            };
            if next <= n {
                break;
            }
            n = next;
        }
        if want.len() > super::MAX_PREPARED {
            return Ok(());
        }
        let missing: Vec<(u64, u64)> = {
            let cached = lock(&self.dblocks);
            want.iter()
                .filter(|(key, _, _)| !cached.contains(key))
                .map(|&(_, a, l)| (a, l))
                .collect()
        };
        if !missing.is_empty() {
            storage.prefetch(&missing);
        }
        Ok(())
    }

    fn lookup(&self, coords: &[u64]) -> Result<Option<ChunkRecord>> {
        let Some(h) = &self.header else {
            return Ok(None);
        };
        if !self.params.in_grid(coords) || h.index_block == UNDEFINED_ADDR {
            return Ok(None);
        }
        let n = ea_linear_index(coords, &self.params).ok_or_else(|| {
            Error::corrupt(
                WHAT,
                h.addr,
                format!("chunk {coords:?} outside the chunk grid"),
            )
        })?;
        // Elements at or past "max index set" were never written (libhdf5 returns the fill).
        if n >= h.max_index_set {
            return Ok(None);
        }
        self.element(h, n)
    }
}
