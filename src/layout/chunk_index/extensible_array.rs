//! Extensible-array chunk index (layout v4/v5 chunk indexing type 4), for chunked datasets
//! with exactly one unlimited dimension. Chunk coordinates are numbered with the unlimited
//! dimension first ([`super::ea_linear_index`]) and the number is an element
//! of the extensible array (`crate::format::extensible_array`), found by arithmetic: a lookup
//! reads at most the index block, one super block and one data block (or data block page).
//! The header is read at open; the index block on first use; super blocks and data blocks or
//! pages kept within the mount's index budget (the module `node_cache`). On a remote source, [`ChunkIndex::prepare`] names the data
//! blocks (or pages) of a range of lookups at once, so that they arrive together.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use super::node_cache::NodeCache;
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
    sblocks: NodeCache<ExtensibleArraySuperBlock>,
    /// Element bytes of data blocks (by address) and data block pages (by page address).
    dblocks: NodeCache<Vec<u8>>,
}

impl ExtensibleArrayIndex {
    /// Open the index whose header (`EAHD`) is at `addr`.
    pub fn open(params: IndexParams, addr: u64) -> Result<ExtensibleArrayIndex> {
        Self::with_entries(params, addr, None)
    }

    /// Open with block caches of at most `blocks` entries each besides the budget (tests
    /// of eviction).
    pub fn with_cache(params: IndexParams, addr: u64, blocks: NonZeroUsize) -> Result<Self> {
        Self::with_entries(params, addr, Some(blocks))
    }

    fn with_entries(params: IndexParams, addr: u64, blocks: Option<NonZeroUsize>) -> Result<Self> {
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
            super::log_read("earray-header", addr, 0);
            Some(ExtensibleArrayHeader::read(
                &params.storage,
                addr,
                params.sizes,
            )?)
        };
        Ok(ExtensibleArrayIndex {
            sblocks: NodeCache::new(params.budget.clone(), blocks),
            dblocks: NodeCache::new(params.budget.clone(), blocks),
            params,
            header,
            iblock: Mutex::new(None),
        })
    }

    fn index_block(&self, h: &ExtensibleArrayHeader) -> Result<Arc<ExtensibleArrayIndexBlock>> {
        let mut slot = lock(&self.iblock);
        if let Some(b) = slot.as_ref() {
            return Ok(b.clone());
        }
        super::log_read("earray-index-block", h.index_block, 0);
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
        self.sblocks.get(
            addr,
            |_| true,
            |_| false,
            || {
                super::log_read("earray-super-block", addr, 0);
                ExtensibleArraySuperBlock::read(
                    &self.params.storage,
                    h,
                    sblk_idx,
                    addr,
                    self.params.sizes,
                )
            },
        )
    }

    /// Element bytes of the block or page at `key`, read by `read` on a miss.
    fn elements(&self, key: u64, read: impl FnOnce() -> Result<Vec<u8>>) -> Result<Arc<Vec<u8>>> {
        self.dblocks.get(key, |_| true, |_| true, read)
    }

    /// The address of data block `dblk` listed in the index block (`None`: never written).
    fn direct_block(
        h: &ExtensibleArrayHeader,
        iblock: &ExtensibleArrayIndexBlock,
        dblk: usize,
    ) -> Result<Option<u64>> {
        let addr = *iblock.dblk_addrs.get(dblk).ok_or_else(|| {
            Error::corrupt(
                WHAT,
                h.addr,
                format!("data block {dblk} of the index block"),
            )
        })?;
        Ok((addr != UNDEFINED_ADDR).then_some(addr))
    }

    /// Super block number `sblk_idx`, the `sblk_off`th listed in the index block (`None`:
    /// never written).
    fn written_super_block(
        &self,
        h: &ExtensibleArrayHeader,
        iblock: &ExtensibleArrayIndexBlock,
        sblk_idx: usize,
        sblk_off: usize,
    ) -> Result<Option<Arc<ExtensibleArraySuperBlock>>> {
        let addr = *iblock
            .sblk_addrs
            .get(sblk_off)
            .ok_or_else(|| Error::corrupt(WHAT, h.addr, format!("super block {sblk_idx}")))?;
        if addr == UNDEFINED_ADDR {
            return Ok(None);
        }
        self.super_block(h, sblk_idx, addr).map(Some)
    }

    /// The address of data block `dblk` of `sblock` (`None`: never written).
    fn block_of(sblock: &ExtensibleArraySuperBlock, dblk: u64) -> Result<Option<u64>> {
        let addr = usize::try_from(dblk)
            .ok()
            .and_then(|d| sblock.dblk_addrs.get(d))
            .copied()
            .ok_or_else(|| Error::corrupt(WHAT, sblock.addr, format!("data block {dblk}")))?;
        Ok((addr != UNDEFINED_ADDR).then_some(addr))
    }

    /// The key of page `page` of the paged data block at `addr` in the block cache: block
    /// address + 1 + page falls inside the paged block's own bytes, so it never collides
    /// with another block's address.
    fn page_key(addr: u64, page: u64) -> u64 {
        addr.saturating_add(1).saturating_add(page)
    }

    /// Look up element `n` of the array.
    fn element(&self, h: &ExtensibleArrayHeader, n: u64) -> Result<Option<ChunkRecord>> {
        let (storage, sizes) = (&self.params.storage, self.params.sizes);
        let iblock = self.index_block(h)?;
        let e = match h.locate(n)? {
            ElementLocation::IndexBlock { index } => element_at(h, &iblock.elements, index, sizes)?,
            ElementLocation::DirectDataBlock { dblk, nelmts, elmt } => {
                let Some(addr) = Self::direct_block(h, &iblock, dblk)? else {
                    return Ok(None);
                };
                if h.dblk_npages(nelmts) != 0 {
                    // libhdf5 never pages these with its default parameters (the index
                    // block's data blocks hold at most 64 elements), and there is no bitmap
                    // to say which pages exist.
                    return Err(Error::unsupported(
                        WHAT,
                        "paged data block addressed from the index block",
                    ));
                }
                let bytes = self.elements(addr, || {
                    super::log_read("earray-data-block", addr, 0);
                    read_data_block(storage, h, addr, nelmts, sizes)
                })?;
                element_at(h, &bytes, elmt, sizes)?
            }
            ElementLocation::SuperBlock {
                sblk_idx,
                sblk_off,
                dblk,
                nelmts,
                elmt,
            } => {
                let Some(sblock) = self.written_super_block(h, &iblock, sblk_idx, sblk_off)? else {
                    return Ok(None);
                };
                let Some(addr) = Self::block_of(&sblock, dblk)? else {
                    return Ok(None);
                };
                if sblock.dblk_npages == 0 {
                    let bytes = self.elements(addr, || {
                        super::log_read("earray-data-block", addr, 0);
                        read_data_block(storage, h, addr, nelmts, sizes)
                    })?;
                    element_at(h, &bytes, elmt, sizes)?
                } else {
                    let page = elmt / h.page_elements();
                    if !sblock.page_initialized(dblk, page) {
                        return Ok(None);
                    }
                    let key = Self::page_key(addr, page);
                    let bytes = self.elements(key, || {
                        super::log_read("earray-data-block-page", addr, page);
                        read_data_block_page(storage, h, addr, page, sizes)
                    })?;
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
        if !storage.wants_hints() || h.index_block == UNDEFINED_ADDR || h.max_index_set == 0 {
            return Ok(());
        }
        let (Some(first), Some(last)) = (
            ea_linear_index(lo, &self.params),
            ea_linear_index(hi, &self.params),
        ) else {
            return Ok(());
        };
        let last = last.min(h.max_index_set - 1);
        if first > last {
            return Ok(());
        }
        let iblock = self.index_block(h)?;
        // The super blocks listing the data blocks of `first..=last`, named together, then
        // read (few, and cached).
        let sblk_of = |n: u64| -> Result<Option<usize>> {
            Ok(match h.locate(n)? {
                ElementLocation::SuperBlock { sblk_off, .. } => Some(sblk_off),
                _ => None,
            })
        };
        if let Some(s1) = sblk_of(last)? {
            let s0 = sblk_of(first)?.unwrap_or(0);
            let s1 = s1.min(s0.saturating_add(super::MAX_PREPARED));
            let missing: Vec<(u64, u64)> = {
                let cached = &self.sblocks;
                (s0..=s1)
                    .filter_map(|off| {
                        let addr = *iblock.sblk_addrs.get(off)?;
                        let idx = off.checked_add(h.iblock_nsblks())?;
                        let len = ExtensibleArraySuperBlock::len(h, idx, sizes)?;
                        (addr != UNDEFINED_ADDR && !cached.contains(addr)).then_some((addr, len))
                    })
                    .collect()
            };
            if !missing.is_empty() {
                storage.prefetch(&missing);
            }
        }
        // The data blocks (or their pages) holding `first..=last`, one after the other: as
        // many as a prepare names, in a bounded number of steps (a super block never
        // written is one step).
        let mut want = Vec::new();
        let mut n = first;
        for _ in 0..4 * super::MAX_PREPARED {
            if n > last || want.len() >= super::MAX_PREPARED {
                break;
            }
            let next = match h.locate(n)? {
                ElementLocation::IndexBlock { .. } => Some(h.index_elements as u64),
                ElementLocation::DirectDataBlock { dblk, nelmts, elmt } => {
                    let addr = Self::direct_block(h, &iblock, dblk)?;
                    if let (Some(addr), 0) = (addr, h.dblk_npages(nelmts)) {
                        want.extend(data_block_len(h, nelmts, sizes).map(|l| (addr, addr, l)));
                    }
                    (n - elmt).checked_add(nelmts)
                }
                ElementLocation::SuperBlock {
                    sblk_idx,
                    sblk_off,
                    dblk,
                    nelmts,
                    elmt,
                } => {
                    match self.written_super_block(h, &iblock, sblk_idx, sblk_off)? {
                        // Never written: on to the next super block.
                        None => h.sblks.get(sblk_idx).and_then(|i| {
                            (h.index_elements as u64)
                                .checked_add(i.start_idx)?
                                .checked_add(i.ndblks.checked_mul(i.dblk_nelmts)?)
                        }),
                        Some(sblock) => {
                            if let Some(addr) = Self::block_of(&sblock, dblk)? {
                                if sblock.dblk_npages == 0 {
                                    want.extend(
                                        data_block_len(h, nelmts, sizes).map(|l| (addr, addr, l)),
                                    );
                                } else {
                                    // The pages from the one holding `n` to the one holding
                                    // `last` (or the block's end).
                                    let pe = h.page_elements();
                                    let end = (last - (n - elmt)).min(nelmts.saturating_sub(1));
                                    for page in elmt / pe..=end / pe {
                                        if want.len() >= super::MAX_PREPARED {
                                            break;
                                        }
                                        if sblock.page_initialized(dblk, page) {
                                            let key = Self::page_key(addr, page);
                                            want.extend(
                                                data_block_page(h, addr, page, sizes)
                                                    .map(|(a, l)| (key, a, l)),
                                            );
                                        }
                                    }
                                }
                            }
                            (n - elmt).checked_add(nelmts)
                        }
                    }
                }
            };
            match next {
                Some(next) if next > n => n = next,
                _ => break,
            }
        }
        let missing: Vec<(u64, u64)> = {
            let cached = &self.dblocks;
            want.iter()
                .filter(|&&(key, _, _)| !cached.contains(key))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::checksum::lookup3;
    use crate::io::Sizes;

    fn seal(v: &mut Vec<u8>) {
        let s = lookup3(v, 0);
        v.extend(s.to_le_bytes());
    }

    #[test]
    fn prepare_is_bounded_on_a_hostile_array() {
        // An array of 2^64 elements, all "set", whose super blocks are partly never written
        // and partly garbage: prepare over ranges reaching the top of the element numbers
        // neither panics (overflow) nor walks the array one data block at a time.
        let mut h = b"EAHD".to_vec();
        h.extend([0, 0, 8, 64, 4, 16, 4, 10]);
        for v in [0u64, 0, 0, 0, u64::MAX, 0, 128] {
            h.extend(v.to_le_bytes());
        }
        seal(&mut h);
        let mut img = h;
        img.resize(128, 0);
        let s0 = crate::io::testutil::memory_storage(&img);
        let hdr = ExtensibleArrayHeader::read(&s0, 0, Sizes::DEFAULT).unwrap();
        let mut ib = b"EAIB".to_vec();
        ib.extend([0, 0]);
        ib.extend(0u64.to_le_bytes());
        for _ in 0..4 {
            ib.extend(0x1000u64.to_le_bytes());
        }
        for _ in 0..hdr.iblock_ndblk_addrs() {
            ib.extend(u64::MAX.to_le_bytes());
        }
        // The super blocks never written, but for the last, "written" at an address that
        // holds nothing valid.
        let n = hdr.iblock_nsblk_addrs();
        for i in 0..n {
            let a = if i + 1 < n { u64::MAX } else { 64 };
            ib.extend(a.to_le_bytes());
        }
        seal(&mut ib);
        img.extend(ib);
        let (storage, rec) = super::super::tests::recording_bytes(&img);
        let params = IndexParams {
            storage,
            sizes: Sizes::DEFAULT,
            dims: vec![u64::MAX - 1],
            max_dims: vec![u64::MAX],
            chunk_dims: vec![1],
            element_size: 8,
            filtered: false,
            layout_version: 4,
            layout_flags: 0,
            budget: Default::default(),
        };
        let index = ExtensibleArrayIndex::open(params, 0).unwrap();
        for (lo, hi) in [
            (0, u64::MAX - 2),
            (1 << 40, 1 << 62),
            (1 << 62, (1 << 63) + (1 << 62)),
            (u64::MAX - 100, u64::MAX - 2),
            (5, 4),
        ] {
            let _ = index.prepare(&[lo], &[hi]);
            let events = super::super::tests::take(&rec);
            assert!(
                events.len() <= 2 * super::super::MAX_PREPARED + 4,
                "{lo}..={hi}: {} reads and hints",
                events.len()
            );
        }
    }
}
