//! Extensible array (spec "VII.C Disk Format: Level 1H - Extensible Array"): chunk index
//! type 4, used for datasets with one unlimited dimension.
//!
//! The header (`EAHD`) holds the creation parameters and points at the index block (`EAIB`).
//! Elements are numbered from 0 and stored in this order:
//! 1. the first `index elements` directly in the index block;
//! 2. then super block 0, 1, 2, ...: super block *i* covers 2^floor(i/2) data blocks of
//!    `min elements × 2^ceil(i/2)` elements each. The data blocks of the
//!    first `2·log2(min pointers)` super blocks are addressed directly from the index block
//!    (`2·(min pointers − 1)` addresses); each later super block has its own `EASB` block,
//!    addressed from the index block, which holds its data block addresses.
//!
//! Data blocks (`EADB`) store their elements inline, unless they hold more than 2^page bits
//! elements: then they are *paged*, each page `2^page bits` elements plus a checksum following
//! the block prefix, and the super block holds one page-init bitmap per data block (bits
//! numbered consecutively over the super block, most significant bit first). An element is
//! found by arithmetic alone ([`ExtensibleArrayHeader::locate`]), so a lookup reads only the
//! blocks on its path. Elements at or beyond "max index set" were never written.

use crate::error::{Error, Result};
use crate::format::fixed_array::{
    bit_msb_first, check_element_size, decode_element_at, ChunkElement,
};
use crate::io::{Cursor, Sizes, Storage};

/// Largest page-bits value accepted (libhdf5 writes 10); keeps every shift in range.
const MAX_PAGE_BITS: u8 = 32;

/// Geometry of one super block (libhdf5 `H5EA_sblk_info_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SuperBlockInfo {
    /// Number of data blocks.
    pub ndblks: u64,
    /// Elements per data block.
    pub dblk_nelmts: u64,
    /// Index of its first element, counted after the index block's elements.
    pub start_idx: u64,
    /// Index of its first data block, counted over all super blocks.
    pub start_dblk: u64,
}

/// Where element n of the array lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementLocation {
    /// Stored in the index block itself, at this position.
    IndexBlock { index: u64 },
    /// In a data block addressed from the index block.
    DirectDataBlock {
        /// Position in the index block's data block addresses.
        dblk: usize,
        /// Elements in that data block.
        nelmts: u64,
        /// Position within the data block.
        elmt: u64,
    },
    /// In a data block addressed from a super block.
    SuperBlock {
        /// Super block number.
        sblk_idx: usize,
        /// Position in the index block's super block addresses.
        sblk_off: usize,
        /// Data block within the super block.
        dblk: u64,
        /// Elements in that data block.
        nelmts: u64,
        /// Position within the data block.
        elmt: u64,
    },
}

/// Extensible array header (spec VII.C, "Extensible Array Header").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtensibleArrayHeader {
    pub addr: u64,
    pub client_id: u8,
    pub element_size: u8,
    /// log2 of the maximum number of elements.
    pub max_bits: u8,
    /// Elements stored in the index block.
    pub index_elements: u8,
    /// Minimum data block pointers of a super block.
    pub min_pointers: u8,
    /// Minimum elements of a data block.
    pub min_elements: u8,
    /// log2 of the elements per data block page.
    pub page_bits: u8,
    pub num_super_blocks: u64,
    pub super_blocks_size: u64,
    pub num_data_blocks: u64,
    pub data_blocks_size: u64,
    /// One more than the highest element index ever set.
    pub max_index_set: u64,
    pub num_elements: u64,
    /// Address of the index block (undefined when nothing was written).
    pub index_block: u64,
    /// Geometry of every super block.
    pub sblks: Vec<SuperBlockInfo>,
}

impl ExtensibleArrayHeader {
    /// Read and verify the header at `addr`, and derive the super block geometry.
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<ExtensibleArrayHeader> {
        const WHAT: &str = "extensible array header";
        let len = 12 + 6 * sizes.length as usize + sizes.offset as usize + 4;
        let buf = storage.read_checksummed(addr, len as u64, WHAT)?;
        let mut c = Cursor::new(&buf, addr, WHAT);
        c.signature(b"EAHD")?;
        let version = c.u8()?;
        if version != 0 {
            return Err(Error::unsupported(WHAT, format!("version {version}")));
        }
        let client_id = c.u8()?;
        let element_size = c.u8()?;
        let max_bits = c.u8()?;
        let index_elements = c.u8()?;
        let min_elements = c.u8()?;
        let min_pointers = c.u8()?;
        let page_bits = c.u8()?;
        check_element_size(client_id, element_size, sizes, WHAT, addr)?;
        let bad = |d: String| Error::corrupt(WHAT, addr, d);
        if !min_elements.is_power_of_two() || !min_pointers.is_power_of_two() {
            return Err(bad(format!(
                "min elements {min_elements} / min pointers {min_pointers} not powers of two"
            )));
        }
        if max_bits > 64 || u32::from(max_bits) < min_elements.trailing_zeros() {
            return Err(bad(format!("max bits {max_bits}")));
        }
        if page_bits > MAX_PAGE_BITS {
            return Err(bad(format!("page bits {page_bits}")));
        }
        let mut h = ExtensibleArrayHeader {
            addr,
            client_id,
            element_size,
            max_bits,
            index_elements,
            min_pointers,
            min_elements,
            page_bits,
            num_super_blocks: c.length(sizes)?,
            super_blocks_size: c.length(sizes)?,
            num_data_blocks: c.length(sizes)?,
            data_blocks_size: c.length(sizes)?,
            max_index_set: c.length(sizes)?,
            num_elements: c.length(sizes)?,
            index_block: c.offset(sizes)?,
            sblks: Vec::new(),
        };
        // nsblks = 1 + max bits − log2(min elements) ≤ 65.
        let nsblks = 1 + max_bits as usize - min_elements.trailing_zeros() as usize;
        if h.iblock_nsblks() > nsblks {
            return Err(bad(format!(
                "min pointers {min_pointers} for {nsblks} super blocks"
            )));
        }
        let (mut start_idx, mut start_dblk) = (0u64, 0u64);
        for i in 0..nsblks as u32 {
            // Shifts stay below 64: i ≤ 64 gives at most 2^32 blocks, and min elements ≤ 2^7
            // times 2^32 elements.
            let info = SuperBlockInfo {
                ndblks: 1u64 << (i / 2),
                dblk_nelmts: (min_elements as u64) << i.div_ceil(2),
                start_idx,
                start_dblk,
            };
            start_idx = start_idx.saturating_add(info.ndblks.saturating_mul(info.dblk_nelmts));
            start_dblk = start_dblk.saturating_add(info.ndblks);
            h.sblks.push(info);
        }
        Ok(h)
    }

    /// Super blocks whose data blocks the index block addresses directly.
    pub fn iblock_nsblks(&self) -> usize {
        2 * self.min_pointers.trailing_zeros() as usize
    }

    /// Data block addresses stored in the index block.
    pub fn iblock_ndblk_addrs(&self) -> usize {
        2 * (self.min_pointers as usize).saturating_sub(1)
    }

    /// Super block addresses stored in the index block.
    pub fn iblock_nsblk_addrs(&self) -> usize {
        self.sblks.len() - self.iblock_nsblks()
    }

    /// Bytes of the "block offset" field of super and data blocks.
    pub fn arr_off_size(&self) -> usize {
        (self.max_bits as usize).div_ceil(8)
    }

    /// Elements per data block page.
    pub fn page_elements(&self) -> u64 {
        1u64 << self.page_bits
    }

    /// Pages of a data block of `nelmts` elements (0 when it is not paged).
    pub fn dblk_npages(&self, nelmts: u64) -> u64 {
        if nelmts > self.page_elements() {
            nelmts / self.page_elements()
        } else {
            0
        }
    }

    /// Where element `idx` lives (pure arithmetic; `idx` must be below 2^max bits).
    pub fn locate(&self, idx: u64) -> Result<ElementLocation> {
        let ie = self.index_elements as u64;
        if idx < ie {
            return Ok(ElementLocation::IndexBlock { index: idx });
        }
        let rel = idx - ie;
        // Super blocks 2j and 2j+1 together hold 3·min·4^j elements, so the super block of
        // `rel` is floor(log2(rel / min + 1)) (libhdf5 `H5EA__dblock_sblk_idx`).
        let sblk_idx = (rel / self.min_elements as u64).saturating_add(1).ilog2() as usize;
        let beyond = || {
            Error::corrupt(
                "extensible array element",
                self.addr,
                format!("element {idx} beyond the array's maximum"),
            )
        };
        let info = self.sblks.get(sblk_idx).ok_or_else(beyond)?;
        let in_sblk = rel.checked_sub(info.start_idx).ok_or_else(beyond)?;
        let dblk = in_sblk / info.dblk_nelmts;
        let elmt = in_sblk % info.dblk_nelmts;
        if sblk_idx < self.iblock_nsblks() {
            Ok(ElementLocation::DirectDataBlock {
                dblk: (info.start_dblk + dblk) as usize,
                nelmts: info.dblk_nelmts,
                elmt,
            })
        } else {
            Ok(ElementLocation::SuperBlock {
                sblk_idx,
                sblk_off: sblk_idx - self.iblock_nsblks(),
                dblk,
                nelmts: info.dblk_nelmts,
                elmt,
            })
        }
    }
}

/// Extensible array index block (spec VII.C, "Extensible Array Index Block").
#[derive(Clone, Debug)]
pub struct ExtensibleArrayIndexBlock {
    pub addr: u64,
    /// Bytes of the elements stored in the index block.
    pub elements: Vec<u8>,
    pub dblk_addrs: Vec<u64>,
    pub sblk_addrs: Vec<u64>,
}

/// Read the common prefix of index, super and data blocks: signature, version, client id and
/// header address.
fn block_prefix(
    c: &mut Cursor,
    sig: &[u8; 4],
    hdr: &ExtensibleArrayHeader,
    s: Sizes,
) -> Result<()> {
    c.signature(sig)?;
    let version = c.u8()?;
    if version != 0 {
        return Err(Error::unsupported(c.what(), format!("version {version}")));
    }
    let client_id = c.u8()?;
    if client_id != hdr.client_id {
        return Err(c.corrupt(format!(
            "client id {client_id}, header says {}",
            hdr.client_id
        )));
    }
    let hdr_addr = c.offset(s)?;
    if hdr_addr != hdr.addr {
        return Err(c.corrupt(format!("header address {hdr_addr:#x}")));
    }
    Ok(())
}

impl ExtensibleArrayIndexBlock {
    /// Read and verify the index block of `hdr`.
    pub fn read(storage: &Storage, hdr: &ExtensibleArrayHeader, sizes: Sizes) -> Result<Self> {
        const WHAT: &str = "extensible array index block";
        let addr = hdr.index_block;
        let o = sizes.offset as usize;
        let nelem_bytes = hdr.index_elements as usize * hdr.element_size as usize;
        let (nd, ns) = (hdr.iblock_ndblk_addrs(), hdr.iblock_nsblk_addrs());
        let len = 6 + o + nelem_bytes + (nd + ns) * o + 4;
        let buf = storage.read_checksummed(addr, len as u64, WHAT)?;
        let mut c = Cursor::new(&buf, addr, WHAT);
        block_prefix(&mut c, b"EAIB", hdr, sizes)?;
        let elements = c.bytes(nelem_bytes)?.to_vec();
        let dblk_addrs = (0..nd).map(|_| c.offset(sizes)).collect::<Result<_>>()?;
        let sblk_addrs = (0..ns).map(|_| c.offset(sizes)).collect::<Result<_>>()?;
        Ok(ExtensibleArrayIndexBlock {
            addr,
            elements,
            dblk_addrs,
            sblk_addrs,
        })
    }
}

/// Extensible array super block (spec VII.C, "Extensible Array Secondary Block").
#[derive(Clone, Debug)]
pub struct ExtensibleArraySuperBlock {
    pub addr: u64,
    pub block_offset: u64,
    /// Page-init bits of all its data blocks (empty when they are not paged).
    pub page_init: Vec<u8>,
    /// Pages per data block (0 when not paged).
    pub dblk_npages: u64,
    pub dblk_addrs: Vec<u64>,
}

impl ExtensibleArraySuperBlock {
    /// Bytes of super block number `sblk_idx` (`None` when there is no such super block, or
    /// on overflow).
    pub fn len(hdr: &ExtensibleArrayHeader, sblk_idx: usize, sizes: Sizes) -> Option<u64> {
        let info = hdr.sblks.get(sblk_idx)?;
        let dblk_npages = hdr.dblk_npages(info.dblk_nelmts);
        let o = sizes.offset as u64;
        // One bitmap of ceil(npages / 8) bytes per data block (libhdf5 sizes it so, while
        // numbering the bits consecutively).
        info.ndblks
            .checked_mul(dblk_npages.div_ceil(8))?
            .checked_add(info.ndblks.checked_mul(o)?)?
            .checked_add(6 + o + hdr.arr_off_size() as u64 + 4)
    }

    /// Read and verify super block number `sblk_idx` at `addr`.
    pub fn read(
        storage: &Storage,
        hdr: &ExtensibleArrayHeader,
        sblk_idx: usize,
        addr: u64,
        sizes: Sizes,
    ) -> Result<Self> {
        const WHAT: &str = "extensible array super block";
        let info = hdr
            .sblks
            .get(sblk_idx)
            .ok_or_else(|| Error::corrupt(WHAT, addr, format!("super block {sblk_idx}")))?;
        let dblk_npages = hdr.dblk_npages(info.dblk_nelmts);
        let bitmap_len = info.ndblks.checked_mul(dblk_npages.div_ceil(8));
        let len = Self::len(hdr, sblk_idx, sizes)
            .ok_or_else(|| Error::corrupt(WHAT, addr, "size overflow"))?;
        let buf = storage.read_checksummed(addr, len, WHAT)?;
        let mut c = Cursor::new(&buf, addr, WHAT);
        block_prefix(&mut c, b"EASB", hdr, sizes)?;
        let block_offset = c.uint(hdr.arr_off_size())?;
        // Both lengths fit: the whole block was read into memory.
        let page_init = c.bytes(bitmap_len.unwrap_or(0) as usize)?.to_vec();
        let dblk_addrs = (0..info.ndblks)
            .map(|_| c.offset(sizes))
            .collect::<Result<_>>()?;
        Ok(ExtensibleArraySuperBlock {
            addr,
            block_offset,
            page_init,
            dblk_npages,
            dblk_addrs,
        })
    }

    /// True when page `page` of data block `dblk` was ever written.
    pub fn page_initialized(&self, dblk: u64, page: u64) -> bool {
        dblk.checked_mul(self.dblk_npages)
            .and_then(|b| b.checked_add(page))
            .is_some_and(|bit| bit_msb_first(&self.page_init, bit))
    }
}

/// Bytes of a data block's prefix including its checksum.
fn dblock_prefix_len(hdr: &ExtensibleArrayHeader, sizes: Sizes) -> u64 {
    6 + sizes.offset as u64 + hdr.arr_off_size() as u64 + 4
}

/// Bytes of an unpaged data block of `nelmts` elements (`None` on overflow).
pub fn data_block_len(hdr: &ExtensibleArrayHeader, nelmts: u64, sizes: Sizes) -> Option<u64> {
    nelmts
        .checked_mul(hdr.element_size as u64)?
        .checked_add(dblock_prefix_len(hdr, sizes))
}

/// Where page `page` of the paged data block at `dblk_addr` lies: its address and length
/// (elements and checksum); `None` on overflow.
pub fn data_block_page(
    hdr: &ExtensibleArrayHeader,
    dblk_addr: u64,
    page: u64,
    sizes: Sizes,
) -> Option<(u64, u64)> {
    let nbytes = hdr.page_elements() * hdr.element_size as u64;
    let page_addr = page
        .checked_mul(nbytes + 4)?
        .checked_add(dblock_prefix_len(hdr, sizes))?
        .checked_add(dblk_addr)?;
    Some((page_addr, nbytes + 4))
}

/// Read and verify an unpaged data block (spec VII.C, "Extensible Array Data Block") of
/// `nelmts` elements at `addr`; returns its element bytes.
pub fn read_data_block(
    storage: &Storage,
    hdr: &ExtensibleArrayHeader,
    addr: u64,
    nelmts: u64,
    sizes: Sizes,
) -> Result<Vec<u8>> {
    const WHAT: &str = "extensible array data block";
    let len = data_block_len(hdr, nelmts, sizes)
        .ok_or_else(|| Error::corrupt(WHAT, addr, "size overflow"))?;
    let nbytes = len - dblock_prefix_len(hdr, sizes);
    let buf = storage.read_checksummed(addr, len, WHAT)?;
    let mut c = Cursor::new(&buf, addr, WHAT);
    block_prefix(&mut c, b"EADB", hdr, sizes)?;
    c.skip(hdr.arr_off_size())?;
    Ok(c.bytes(nbytes as usize)?.to_vec())
}

/// Read and verify page `page` of the paged data block at `dblk_addr`; returns its element
/// bytes. The block's prefix is not read: pages are located by arithmetic.
pub fn read_data_block_page(
    storage: &Storage,
    hdr: &ExtensibleArrayHeader,
    dblk_addr: u64,
    page: u64,
    sizes: Sizes,
) -> Result<Vec<u8>> {
    const WHAT: &str = "extensible array data block page";
    let (page_addr, len) = data_block_page(hdr, dblk_addr, page, sizes)
        .ok_or_else(|| Error::corrupt(WHAT, dblk_addr, "address overflow"))?;
    let mut buf = storage.read_checksummed(page_addr, len, WHAT)?;
    buf.truncate(len as usize - 4);
    Ok(buf)
}

/// Decode element `index` of a block's element bytes.
pub fn element_at(
    hdr: &ExtensibleArrayHeader,
    elements: &[u8],
    index: u64,
    sizes: Sizes,
) -> Result<ChunkElement> {
    decode_element_at(
        elements,
        index,
        hdr.element_size,
        hdr.addr,
        hdr.client_id,
        sizes,
        "extensible array element",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::checksum::lookup3;
    use crate::io::testutil::memory_storage;
    use crate::io::UNDEFINED_ADDR;

    fn seal(v: &mut Vec<u8>) {
        let s = lookup3(v, 0);
        v.extend(s.to_le_bytes());
    }

    /// EAHD at 0 (unfiltered, index elements 4, min pointers 4, min elements 16, page bits
    /// 10, max bits 32) and EAIB at 128 with two elements set.
    fn image() -> Vec<u8> {
        let mut h = b"EAHD".to_vec();
        h.extend([0, 0, 8, 32, 4, 16, 4, 10]);
        for v in [0u64, 0, 0, 0, 2, 2, 128] {
            h.extend(v.to_le_bytes());
        }
        seal(&mut h);
        let mut img = h;
        img.resize(128, 0);
        let mut ib = b"EAIB".to_vec();
        ib.extend([0, 0]);
        ib.extend(0u64.to_le_bytes());
        for a in [0x1000u64, 0x2000, u64::MAX, u64::MAX] {
            ib.extend(a.to_le_bytes());
        }
        // 6 data block addresses, then 29 − 4 = 25 super block addresses.
        for _ in 0..6 + 25 {
            ib.extend(u64::MAX.to_le_bytes());
        }
        seal(&mut ib);
        img.extend(ib);
        img
    }

    #[test]
    fn header_index_block_and_geometry() {
        let s = memory_storage(&image());
        let h = ExtensibleArrayHeader::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(h.sblks.len(), 29);
        assert_eq!((h.iblock_nsblks(), h.iblock_ndblk_addrs()), (4, 6));
        assert_eq!(h.max_index_set, 2);
        let ib = ExtensibleArrayIndexBlock::read(&s, &h, Sizes::DEFAULT).unwrap();
        assert_eq!(ib.dblk_addrs.len(), 6);
        assert_eq!(ib.sblk_addrs.len(), 25);
        assert_eq!(
            element_at(&h, &ib.elements, 1, Sizes::DEFAULT)
                .unwrap()
                .addr,
            0x2000
        );
        assert_eq!(
            element_at(&h, &ib.elements, 2, Sizes::DEFAULT)
                .unwrap()
                .addr,
            UNDEFINED_ADDR
        );
    }

    #[test]
    fn locate_walks_super_blocks() {
        let s = memory_storage(&image());
        let h = ExtensibleArrayHeader::read(&s, 0, Sizes::DEFAULT).unwrap();
        use ElementLocation::*;
        assert_eq!(h.locate(3).unwrap(), IndexBlock { index: 3 });
        // Super block 0: one block of 16; super block 1: one of 32; 2 and 3: two of 32 / 64.
        let d = |dblk, nelmts, elmt| DirectDataBlock { dblk, nelmts, elmt };
        assert_eq!(h.locate(4).unwrap(), d(0, 16, 0));
        assert_eq!(h.locate(20).unwrap(), d(1, 32, 0));
        assert_eq!(h.locate(52).unwrap(), d(2, 32, 0));
        assert_eq!(h.locate(84).unwrap(), d(3, 32, 0));
        assert_eq!(h.locate(116).unwrap(), d(4, 64, 0));
        assert_eq!(h.locate(243).unwrap(), d(5, 64, 63));
        // Super block 4: four data blocks of 64.
        let sb = |dblk, nelmts, elmt| SuperBlock {
            sblk_idx: 4,
            sblk_off: 0,
            dblk,
            nelmts,
            elmt,
        };
        assert_eq!(h.locate(244).unwrap(), sb(0, 64, 0));
        assert_eq!(h.locate(244 + 64 * 3 + 5).unwrap(), sb(3, 64, 5));
        assert!(h.locate(u64::MAX).is_err());
    }

    #[test]
    fn corrupt_parameters_are_rejected() {
        let mut img = image();
        // Min pointers (byte 10) not a power of two, with a valid checksum.
        img[10] = 12;
        let sum = lookup3(&img[..68], 0);
        img[68..72].copy_from_slice(&sum.to_le_bytes());
        let s = memory_storage(&img);
        assert!(ExtensibleArrayHeader::read(&s, 0, Sizes::DEFAULT).is_err());
    }
}
