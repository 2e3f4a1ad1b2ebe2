//! Fixed array (spec "VII.B Disk Format: Level 1G - Fixed Array"): chunk index type 3.
//!
//! A header (`FAHD`) gives the element size, the page size (2^page bits elements) and the
//! number of elements; it points at one data block (`FADB`). When the array holds no more
//! than one page of elements the data block stores them inline, followed by a checksum.
//! Otherwise the data block is *paged*: its prefix holds a page-init bitmap (one bit per page,
//! most significant bit first) and a checksum, and the pages follow it back to back, each
//! `page elements × element size` bytes plus its own checksum (the last page holds only the
//! remaining elements). A page whose bit is clear was never written: its elements are all
//! undefined.
//!
//! The chunk-index elements ([`ChunkElement`]) are shared with the extensible array: client
//! 0 stores only an address, client 1 (filtered chunks) an address, the stored chunk size and
//! a filter mask. The size's width is whatever the element size leaves after the address and
//! the mask, which covers both layout v4 (width from the chunk size) and v5 ("Size of
//! Lengths").

use crate::error::{Error, Result};
use crate::io::{Cursor, Sizes, Storage, UNDEFINED_ADDR};

/// Client id of an array of unfiltered chunk addresses.
pub const CLIENT_CHUNKS: u8 = 0;
/// Client id of an array of filtered chunks (address, size, filter mask).
pub const CLIENT_FILTERED_CHUNKS: u8 = 1;

/// Largest page-bits value accepted: a page of 2^32 elements is already far beyond what
/// libhdf5 writes (its default is 10), and the bound keeps every shift in range.
const MAX_PAGE_BITS: u8 = 32;

/// One chunk-index element of a fixed or extensible array (spec VII.B/VII.C, "Element" for
/// client ids 0 and 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkElement {
    /// Chunk address; [`UNDEFINED_ADDR`] when the chunk was never written.
    pub addr: u64,
    /// Stored size (filtered elements only).
    pub size: Option<u64>,
    /// Filter mask (0 for unfiltered elements).
    pub filter_mask: u32,
}

/// Check that `element_size` is a valid element size for `client_id`.
pub fn check_element_size(
    client_id: u8,
    element_size: u8,
    sizes: Sizes,
    what: &'static str,
    addr: u64,
) -> Result<()> {
    let o = sizes.offset as usize;
    let ok = match client_id {
        CLIENT_CHUNKS => element_size as usize == o,
        // Address, 1 to 8 bytes of size, 4 bytes of filter mask.
        CLIENT_FILTERED_CHUNKS => (o + 5..=o + 12).contains(&(element_size as usize)),
        c => return Err(Error::unsupported(what, format!("client id {c}"))),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::corrupt(
            what,
            addr,
            format!("element size {element_size} for client id {client_id}"),
        ))
    }
}

/// Decode element `index` of `elements`, a packed run of `element_size`-byte chunk elements
/// of the array at `addr` (fixed or extensible); an index outside the run is corrupt.
pub fn decode_element_at(
    elements: &[u8],
    index: u64,
    element_size: u8,
    addr: u64,
    client_id: u8,
    sizes: Sizes,
    what: &'static str,
) -> Result<ChunkElement> {
    let es = u64::from(element_size);
    let bytes = index
        .checked_mul(es)
        .and_then(|s| Some(s..s.checked_add(es)?))
        .and_then(|r| elements.get(usize::try_from(r.start).ok()?..usize::try_from(r.end).ok()?))
        .ok_or_else(|| Error::corrupt(what, addr, format!("element {index} out of range")))?;
    decode_chunk_element(bytes, addr, client_id, sizes, what)
}

/// Decode one chunk element from exactly `bytes` (whose length was checked with
/// [`check_element_size`]).
pub fn decode_chunk_element(
    bytes: &[u8],
    addr: u64,
    client_id: u8,
    sizes: Sizes,
    what: &'static str,
) -> Result<ChunkElement> {
    let mut c = Cursor::new(bytes, addr, what);
    let chunk_addr = c.offset(sizes)?;
    if client_id == CLIENT_FILTERED_CHUNKS {
        let width = bytes
            .len()
            .checked_sub(sizes.offset as usize + 4)
            .ok_or_else(|| c.truncated())?;
        let size = c.uint(width)?;
        let filter_mask = c.u32()?;
        Ok(ChunkElement {
            addr: chunk_addr,
            size: Some(size),
            filter_mask,
        })
    } else {
        Ok(ChunkElement {
            addr: chunk_addr,
            size: None,
            filter_mask: 0,
        })
    }
}

/// Bit `i` of a bitmap stored most significant bit first (libhdf5 `H5VM_bit_get`).
pub fn bit_msb_first(bitmap: &[u8], i: u64) -> bool {
    usize::try_from(i / 8)
        .ok()
        .and_then(|byte| bitmap.get(byte))
        .is_some_and(|b| b & (0x80 >> (i % 8)) != 0)
}

/// Fixed array header (spec VII.B, "Fixed Array Header").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedArrayHeader {
    pub addr: u64,
    pub client_id: u8,
    /// Bytes per element.
    pub element_size: u8,
    /// log2 of the elements per data block page.
    pub page_bits: u8,
    /// Number of elements in the array.
    pub max_entries: u64,
    /// Address of the data block (undefined when nothing was written).
    pub data_block: u64,
}

impl FixedArrayHeader {
    /// Read and verify the header at `addr`.
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<FixedArrayHeader> {
        const WHAT: &str = "fixed array header";
        let len = 4 + 1 + 1 + 1 + 1 + sizes.length as usize + sizes.offset as usize + 4;
        let buf = storage.read_checksummed(addr, len as u64, WHAT)?;
        let mut c = Cursor::new(&buf, addr, WHAT);
        c.signature(b"FAHD")?;
        let version = c.u8()?;
        if version != 0 {
            return Err(Error::unsupported(WHAT, format!("version {version}")));
        }
        let client_id = c.u8()?;
        let element_size = c.u8()?;
        let page_bits = c.u8()?;
        let max_entries = c.length(sizes)?;
        let data_block = c.offset(sizes)?;
        check_element_size(client_id, element_size, sizes, WHAT, addr)?;
        if page_bits > MAX_PAGE_BITS {
            return Err(Error::corrupt(WHAT, addr, format!("page bits {page_bits}")));
        }
        Ok(FixedArrayHeader {
            addr,
            client_id,
            element_size,
            page_bits,
            max_entries,
            data_block,
        })
    }

    /// Elements per page.
    pub fn page_elements(&self) -> u64 {
        1u64 << self.page_bits
    }

    /// Number of pages of the data block; 0 when the data block is not paged.
    pub fn npages(&self) -> u64 {
        if self.max_entries > self.page_elements() {
            self.max_entries.div_ceil(self.page_elements())
        } else {
            0
        }
    }

    /// Bytes of the data block before its first page (signature, version, client id,
    /// header address, the page-init bitmap or, unpaged, the elements, and the checksum):
    /// what [`FixedArrayDataBlock::read`] reads (`None` on overflow).
    pub fn data_block_prefix_len(&self, sizes: Sizes) -> Option<u64> {
        let npages = self.npages();
        let elements_len = if npages == 0 {
            self.max_entries.checked_mul(self.element_size as u64)?
        } else {
            0
        };
        (6 + sizes.offset as u64 + 4)
            .checked_add(npages.div_ceil(8))?
            .checked_add(elements_len)
    }

    /// Bytes of one full page including its checksum (`None` on overflow).
    pub fn page_bytes(&self) -> Option<u64> {
        self.page_elements()
            .checked_mul(self.element_size as u64)?
            .checked_add(4)
    }
}

/// Fixed array data block (spec VII.B, "Fixed Array Data Block"), with its elements when it
/// is not paged, or its page-init bitmap when it is.
#[derive(Clone, Debug)]
pub struct FixedArrayDataBlock {
    pub addr: u64,
    /// Page-init bitmap (empty when not paged).
    pub page_init: Vec<u8>,
    /// Element bytes (empty when paged).
    pub elements: Vec<u8>,
    /// Bytes from the block's address to its first page (prefix and checksum).
    pub prefix_len: u64,
}

impl FixedArrayDataBlock {
    /// Read and verify the data block of `header`.
    pub fn read(storage: &Storage, header: &FixedArrayHeader, sizes: Sizes) -> Result<Self> {
        const WHAT: &str = "fixed array data block";
        let addr = header.data_block;
        let npages = header.npages();
        let bitmap_len = npages.div_ceil(8);
        let elements_len = if npages == 0 {
            header
                .max_entries
                .checked_mul(header.element_size as u64)
                .ok_or_else(|| Error::corrupt(WHAT, addr, "size overflow"))?
        } else {
            0
        };
        let len = header
            .data_block_prefix_len(sizes)
            .ok_or_else(|| Error::corrupt(WHAT, addr, "size overflow"))?;
        let buf = storage.read_checksummed(addr, len, WHAT)?;
        let mut c = Cursor::new(&buf, addr, WHAT);
        c.signature(b"FADB")?;
        let version = c.u8()?;
        if version != 0 {
            return Err(Error::unsupported(WHAT, format!("version {version}")));
        }
        let client_id = c.u8()?;
        if client_id != header.client_id {
            return Err(c.corrupt(format!(
                "client id {client_id}, header says {}",
                header.client_id
            )));
        }
        let hdr_addr = c.offset(sizes)?;
        if hdr_addr != header.addr {
            return Err(c.corrupt(format!("header address {hdr_addr:#x}")));
        }
        let page_init = c.bytes(bitmap_len as usize)?.to_vec();
        let elements = c.bytes(elements_len as usize)?.to_vec();
        Ok(FixedArrayDataBlock {
            addr,
            page_init,
            elements,
            prefix_len: len,
        })
    }

    /// True when page `page` was ever written.
    pub fn page_initialized(&self, page: u64) -> bool {
        bit_msb_first(&self.page_init, page)
    }

    /// Where page `page` of a paged data block lies: its address and length (elements and
    /// checksum); `None` past the last page or on overflow.
    pub fn page_range(&self, header: &FixedArrayHeader, page: u64) -> Option<(u64, u64)> {
        let npages = header.npages();
        if page >= npages {
            return None;
        }
        let page_addr = page
            .checked_mul(header.page_bytes()?)?
            .checked_add(self.prefix_len)?
            .checked_add(self.addr)?;
        // The last page holds only the elements left over.
        let nelmts = if page + 1 == npages {
            header.max_entries - page * header.page_elements()
        } else {
            header.page_elements()
        };
        Some((page_addr, nelmts * header.element_size as u64 + 4))
    }

    /// Read and verify page `page` of a paged data block; returns its element bytes.
    pub fn read_page(
        &self,
        storage: &Storage,
        header: &FixedArrayHeader,
        page: u64,
    ) -> Result<Vec<u8>> {
        const WHAT: &str = "fixed array data block page";
        if page >= header.npages() {
            return Err(Error::corrupt(WHAT, self.addr, format!("page {page}")));
        }
        let (page_addr, len) = self
            .page_range(header, page)
            .ok_or_else(|| Error::corrupt(WHAT, self.addr, "address overflow"))?;
        let mut buf = storage.read_checksummed(page_addr, len, WHAT)?;
        buf.truncate(buf.len() - 4);
        Ok(buf)
    }
}

/// Decode element `index` of a fixed array whose data block is not paged.
pub fn element_at(
    header: &FixedArrayHeader,
    elements: &[u8],
    index: u64,
    sizes: Sizes,
) -> Result<ChunkElement> {
    decode_element_at(
        elements,
        index,
        header.element_size,
        header.addr,
        header.client_id,
        sizes,
        "fixed array element",
    )
}

/// True when an element's address says "never written".
pub fn is_undefined(e: &ChunkElement) -> bool {
    e.addr == UNDEFINED_ADDR
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::checksum::lookup3;
    use crate::io::testutil::memory_storage;

    fn seal(v: &mut Vec<u8>) {
        let s = lookup3(v, 0);
        v.extend(s.to_le_bytes());
    }

    /// FAHD at 0 and FADB at 64 for three filtered elements with 2-byte sizes.
    fn image() -> Vec<u8> {
        let mut img = vec![0u8; 64];
        let mut h = b"FAHD".to_vec();
        h.extend([0, 1, 14, 10]);
        h.extend(3u64.to_le_bytes());
        h.extend(64u64.to_le_bytes());
        seal(&mut h);
        img[..h.len()].copy_from_slice(&h);
        let mut d = b"FADB".to_vec();
        d.extend([0, 1]);
        d.extend(0u64.to_le_bytes());
        for (a, s, m) in [(0x800u64, 300u16, 0u32), (u64::MAX, 0, 0), (0x900, 12, 1)] {
            d.extend(a.to_le_bytes());
            d.extend(s.to_le_bytes());
            d.extend(m.to_le_bytes());
        }
        seal(&mut d);
        img.extend(d);
        img
    }

    #[test]
    fn header_and_inline_block() {
        let img = image();
        let s = memory_storage(&img);
        let h = FixedArrayHeader::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!((h.client_id, h.element_size, h.max_entries), (1, 14, 3));
        assert_eq!(h.npages(), 0);
        let d = FixedArrayDataBlock::read(&s, &h, Sizes::DEFAULT).unwrap();
        let e0 = element_at(&h, &d.elements, 0, Sizes::DEFAULT).unwrap();
        assert_eq!((e0.addr, e0.size, e0.filter_mask), (0x800, Some(300), 0));
        assert!(is_undefined(
            &element_at(&h, &d.elements, 1, Sizes::DEFAULT).unwrap()
        ));
        let e2 = element_at(&h, &d.elements, 2, Sizes::DEFAULT).unwrap();
        assert_eq!((e2.addr, e2.size, e2.filter_mask), (0x900, Some(12), 1));
        assert!(element_at(&h, &d.elements, 3, Sizes::DEFAULT).is_err());
    }

    #[test]
    fn checksums_are_verified() {
        let mut img = image();
        img[64 + 20] ^= 1;
        let s = memory_storage(&img);
        let h = FixedArrayHeader::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert!(matches!(
            FixedArrayDataBlock::read(&s, &h, Sizes::DEFAULT),
            Err(Error::Checksum { .. })
        ));
        img[8] ^= 1;
        let s = memory_storage(&img);
        assert!(FixedArrayHeader::read(&s, 0, Sizes::DEFAULT).is_err());
    }

    #[test]
    fn bitmap_is_msb_first() {
        assert!(bit_msb_first(&[0x80], 0));
        assert!(!bit_msb_first(&[0x80], 7));
        assert!(bit_msb_first(&[0x00, 0x01], 15));
        assert!(!bit_msb_first(&[0xff], 8));
    }
}
