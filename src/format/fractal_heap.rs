//! Fractal heaps (`FRHP`, `FHDB`, `FHIB`, spec "III.G"): dense link and attribute storage and
//! the shared-message heap. Managed objects through direct and nested indirect blocks; huge
//! objects through v2 B-trees (types 1-4) or inline; tiny objects inline in the heap ID.
//!
//! Managed objects live in a linear "heap space" cut into blocks by a doubling table: `width`
//! blocks per row, rows 0 and 1 of the starting block size, each later row twice the one
//! before. Rows whose blocks are at most the maximum direct block size hold direct blocks;
//! later rows hold indirect blocks, each a smaller doubling table of its own (its row count
//! follows from the heap space it covers). The root is a direct block when the header says
//! the root has 0 rows, else an indirect block with that many rows. A managed heap ID holds
//! the object's heap-space offset and length; we walk down from the root choosing the row and
//! column that cover the offset, so one `get` reads one block per level.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::format::btree_v2::{self, records::HugeObjectRecord, BtreeV2Header};
use crate::format::limits::MAX_TREE_DEPTH;
use crate::io::checksum::{lookup3, verify_lookup3};
use crate::io::cursor::bytes_for;
use crate::io::{Cursor, Sizes, Storage, UNDEFINED_ADDR};
use crate::sync::lock;

const WHAT: &str = "fractal heap header";
const DBLOCK: &str = "fractal heap direct block";
const IBLOCK: &str = "fractal heap indirect block";

/// Heap-ID type field (bits 4-5 of byte 0).
const ID_MANAGED: u8 = 0;
const ID_HUGE: u8 = 1;
const ID_TINY: u8 = 2;

/// Longest heap ID whose tiny objects keep their length (minus one) in the low 4 bits of
/// byte 0: such an ID carries at most 16 data bytes, which 4 bits can count (an 18-byte ID
/// still holds only 16, as the writer does not spend a byte it would not need). Longer IDs
/// add a second length byte (12 bits in all).
const TINY_SHORT_MAX_ID: u16 = 18;

/// An object's bytes, or (past a caller's bound) its length with nothing of it read.
pub type Bounded = std::result::Result<Vec<u8>, u64>;

/// An open fractal heap (header decoded; blocks read on demand).
///
/// Spec "III.G Disk Format: Level 1G - Fractal Heap", "Layout: Fractal Heap Header".
#[derive(Clone, Debug)]
pub struct FractalHeap {
    pub addr: u64,
    /// Length of heap IDs in bytes.
    pub id_len: u16,
    /// Bytes of encoded I/O filter information (0: no filters).
    pub filter_len: u16,
    /// Bit 0: huge IDs wrapped; bit 1: direct blocks are checksummed.
    pub flags: u8,
    pub max_managed_size: u32,
    /// Address of the v2 B-tree indexing huge objects (undefined when there are none).
    pub huge_btree_addr: u64,
    pub managed_objects: u64,
    pub huge_objects: u64,
    pub tiny_objects: u64,
    /// Doubling table: blocks per row.
    pub table_width: u16,
    pub start_block_size: u64,
    pub max_direct_size: u64,
    /// log2 of the heap-space size.
    pub max_heap_bits: u16,
    pub start_root_rows: u16,
    pub root_addr: u64,
    /// Rows in the root indirect block; 0 when the root is a direct block.
    pub root_rows: u16,
    /// Size on disk of a filtered root direct block.
    pub filtered_root_size: Option<u64>,
    /// Filters skipped for a filtered root direct block.
    pub root_filter_mask: u32,
    /// The encoded I/O filter pipeline (a filter pipeline message body; empty without filters).
    pub filter_info: Vec<u8>,
    /// Bytes of a heap-space offset (in IDs and block headers): ceil(max_heap_bits / 8).
    pub offset_width: usize,
    /// Bytes of a managed object's length in an ID.
    pub length_width: usize,
    /// Rows (of any indirect block) that hold direct blocks.
    pub max_direct_rows: u32,
    /// Address and length widths of the file.
    pub sizes: Sizes,
    /// Addresses of the checksummed direct blocks verified through this handle. Listing a
    /// dense group reads every object once, in name-hash order, so in no useful block order;
    /// without this each object would re-read and re-hash its whole block. With it a block
    /// is hashed once and each object read alone. Bounded by [`MAX_VERIFIED_BLOCKS`] (past
    /// it, blocks are verified on every read), and private to this handle.
    verified_blocks: Arc<Mutex<HashSet<u64>>>,
    /// Indirect blocks read and verified through this handle, by (address, heap offset,
    /// rows): every object lookup walks from the root indirect block down. Bounded by
    /// [`MAX_KEPT_IBLOCKS`].
    iblocks: Arc<Mutex<KeptIblocks>>,
}

/// Verified indirect blocks by (address, heap offset, rows).
type KeptIblocks = HashMap<(u64, u64, u32), Arc<Vec<u8>>>;

/// Most indirect blocks kept per heap handle (each at most a few KiB for real heaps).
const MAX_KEPT_IBLOCKS: usize = 64;

/// Most verified block addresses remembered per heap handle (8 bytes each).
const MAX_VERIFIED_BLOCKS: usize = 1 << 20;

impl FractalHeap {
    pub fn open(storage: &Storage, addr: u64, sizes: Sizes) -> Result<FractalHeap> {
        let (o, l) = (sizes.offset as u64, sizes.length as u64);
        // Fixed fields: 22 bytes of small integers, 12 lengths and 3 addresses (spec table);
        // read them first, then the optional filter information, then the checksum.
        let fixed = 22 + 12 * l + 3 * o;
        let head = storage.read_vec(addr, fixed, WHAT)?;
        let mut c = Cursor::new(&head, addr, WHAT);
        c.signature(b"FRHP")?;
        let version = c.u8()?;
        if version != 0 {
            return Err(c.corrupt(format!("version {version}")));
        }
        let id_len = c.u16()?;
        let filter_len = c.u16()?;
        let flags = c.u8()?;
        let max_managed_size = c.u32()?;
        let _next_huge_id = c.length(sizes)?;
        let huge_btree_addr = c.offset(sizes)?;
        let _free_space = c.length(sizes)?;
        let _free_space_manager = c.offset(sizes)?;
        let _managed_space = c.length(sizes)?;
        let _allocated_space = c.length(sizes)?;
        let _iterator_offset = c.length(sizes)?;
        let managed_objects = c.length(sizes)?;
        let _huge_size = c.length(sizes)?;
        let huge_objects = c.length(sizes)?;
        let _tiny_size = c.length(sizes)?;
        let tiny_objects = c.length(sizes)?;
        let table_width = c.u16()?;
        let start_block_size = c.length(sizes)?;
        let max_direct_size = c.length(sizes)?;
        let max_heap_bits = c.u16()?;
        let start_root_rows = c.u16()?;
        let root_addr = c.offset(sizes)?;
        let root_rows = c.u16()?;
        debug_assert_eq!(c.remaining(), 0);
        let extra = if filter_len > 0 {
            l + 4 + filter_len as u64
        } else {
            0
        };
        let full = storage.read_vec(addr, fixed + extra + 4, WHAT)?;
        if !verify_lookup3(&full) {
            return Err(Error::Checksum { what: WHAT, addr });
        }
        let (filtered_root_size, root_filter_mask, filter_info) = if filter_len > 0 {
            let mut c = Cursor::new(&full, addr, WHAT);
            c.seek(fixed as usize)?;
            let size = c.length(sizes)?;
            let mask = c.u32()?;
            (Some(size), mask, c.bytes(filter_len as usize)?.to_vec())
        } else {
            (None, 0, Vec::new())
        };
        let bad = |d: String| Error::corrupt(WHAT, addr, d);
        if table_width == 0 || !table_width.is_power_of_two() {
            return Err(bad(format!("table width {table_width}")));
        }
        if !start_block_size.is_power_of_two() || !max_direct_size.is_power_of_two() {
            return Err(bad("block sizes must be powers of two".into()));
        }
        if start_block_size.checked_mul(table_width as u64).is_none() {
            return Err(bad("first row of the doubling table overflows".into()));
        }
        if max_direct_size < start_block_size {
            return Err(bad(
                "maximum direct block smaller than the starting block".into()
            ));
        }
        if max_heap_bits == 0 || max_heap_bits > 64 {
            return Err(bad(format!("maximum heap size of {max_heap_bits} bits")));
        }
        if id_len < 2 {
            return Err(bad(format!("heap ID length {id_len}")));
        }
        // Rows 0 and 1 hold starting-size blocks; row r ≥ 1 holds blocks of start·2^(r-1).
        let max_direct_rows =
            max_direct_size.trailing_zeros() - start_block_size.trailing_zeros() + 2;
        let offset_width = (max_heap_bits as usize).div_ceil(8);
        let length_width = ((max_direct_size.trailing_zeros() as usize).div_ceil(8))
            .min(bytes_for(max_managed_size as u64));
        Ok(FractalHeap {
            addr,
            id_len,
            filter_len,
            flags,
            max_managed_size,
            huge_btree_addr,
            managed_objects,
            huge_objects,
            tiny_objects,
            table_width,
            start_block_size,
            max_direct_size,
            max_heap_bits,
            start_root_rows,
            root_addr,
            root_rows,
            filtered_root_size,
            root_filter_mask,
            filter_info,
            offset_width,
            length_width,
            max_direct_rows,
            sizes,
            verified_blocks: Arc::new(Mutex::new(HashSet::new())),
            iblocks: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// The object with this heap ID.
    pub fn get(&self, storage: &Storage, sizes: Sizes, id: &[u8]) -> Result<Vec<u8>> {
        // No object is longer than u64::MAX bytes: the inner result is always Ok.
        self.get_at_most(storage, sizes, id, u64::MAX)?
            .map_err(|len| Error::corrupt(WHAT, self.addr, format!("object of {len} bytes")))
    }

    /// The object with this heap ID if it has at most `max` bytes, else `Ok(Err(its length))`
    /// with nothing of it read: a caller that can bound its objects refuses that one object
    /// and goes on with the others (a dense group's link records, whose names are bounded).
    pub fn get_at_most(
        &self,
        storage: &Storage,
        sizes: Sizes,
        id: &[u8],
        max: u64,
    ) -> Result<Bounded> {
        let first = *id
            .first()
            .ok_or_else(|| Error::corrupt(WHAT, self.addr, "empty heap ID"))?;
        if first >> 6 != 0 {
            return Err(Error::corrupt(
                WHAT,
                self.addr,
                format!("heap ID version {}", first >> 6),
            ));
        }
        match (first >> 4) & 3 {
            ID_MANAGED => match self.managed_place(id)? {
                (_, len) if len > max => Ok(Err(len)),
                (offset, len) => self.get_managed(storage, offset, len).map(Ok),
            },
            ID_HUGE => self.get_huge(storage, sizes, id, max),
            // A tiny object has at most 4096 bytes, all of them in the ID already read.
            ID_TINY => self.get_tiny(id).map(|o| {
                if o.len() as u64 > max {
                    Err(o.len() as u64)
                } else {
                    Ok(o)
                }
            }),
            t => Err(Error::corrupt(WHAT, self.addr, format!("heap ID type {t}"))),
        }
    }

    fn get_tiny(&self, id: &[u8]) -> Result<Vec<u8>> {
        let id = id.get(..self.id_len as usize).unwrap_or(id);
        let (len, data) = if self.id_len <= TINY_SHORT_MAX_ID {
            ((id[0] & 0x0f) as usize + 1, &id[1..])
        } else {
            let hi = (id[0] & 0x0f) as usize;
            let lo = *id
                .get(1)
                .ok_or_else(|| Error::corrupt(WHAT, self.addr, "tiny heap ID too short"))?;
            ((hi << 8 | lo as usize) + 1, id.get(2..).unwrap_or_default())
        };
        data.get(..len).map(<[u8]>::to_vec).ok_or_else(|| {
            Error::corrupt(
                WHAT,
                self.addr,
                format!("tiny object of {len} bytes overruns its ID"),
            )
        })
    }

    fn get_huge(&self, storage: &Storage, sizes: Sizes, id: &[u8], max: u64) -> Result<Bounded> {
        let body = id.get(1..self.id_len as usize).unwrap_or_default();
        let (o, l) = (sizes.offset as usize, sizes.length as usize);
        if self.filter_len > 0 {
            return Err(Error::unsupported(
                "fractal heap",
                "huge objects in a heap with I/O filters",
            ));
        }
        let (addr, len) = if body.len() >= o + l {
            // The ID is wide enough to hold the object's address and length directly.
            let mut c = Cursor::new(body, self.addr, WHAT);
            (c.offset(sizes)?, c.length(sizes)?)
        } else {
            // The ID holds a key into the huge-object v2 B-tree (record type 1).
            let key = Cursor::new(body, self.addr, WHAT).uint(body.len().min(8))?;
            if self.huge_btree_addr == UNDEFINED_ADDR {
                return Err(Error::corrupt(
                    WHAT,
                    self.addr,
                    "huge object but no huge-object B-tree",
                ));
            }
            let hdr = BtreeV2Header::read(storage, self.huge_btree_addr, sizes)?;
            if hdr.record_type != 1 {
                return Err(Error::corrupt(
                    "v2 B-tree header",
                    hdr.addr,
                    format!("huge-object tree of record type {}", hdr.record_type),
                ));
            }
            let rec = btree_v2::find(storage, &hdr, sizes, &mut |r| {
                let rec = HugeObjectRecord::parse(1, r, sizes)?;
                Ok(key.cmp(&rec.id.unwrap_or(0)))
            })?
            .ok_or_else(|| {
                Error::corrupt(
                    WHAT,
                    self.addr,
                    format!("huge object {key} not in its B-tree"),
                )
            })?;
            let rec = HugeObjectRecord::parse(1, &rec, sizes)?;
            (rec.addr, rec.len)
        };
        if len > max {
            return Ok(Err(len));
        }
        storage
            .read_vec(addr, len, "fractal heap huge object")
            .map(Ok)
    }

    /// Size of the blocks in row `row` of any indirect block.
    fn row_block_size(&self, row: u32) -> Option<u64> {
        if row == 0 {
            Some(self.start_block_size)
        } else {
            self.start_block_size
                .checked_shl(row - 1)
                .filter(|s| s.trailing_zeros() == self.start_block_size.trailing_zeros() + row - 1)
        }
    }

    /// Heap-space offset of row `row` from the start of its indirect block.
    fn row_offset(&self, row: u32) -> Option<u64> {
        if row == 0 {
            Some(0)
        } else {
            self.row_block_size(row)?
                .checked_mul(self.table_width as u64)
        }
    }

    /// Rows of an indirect block that covers `size` bytes of heap space.
    fn rows_for(&self, size: u64) -> u32 {
        let first_row = self.start_block_size.trailing_zeros() + self.table_width.trailing_zeros();
        (size.trailing_zeros()).saturating_sub(first_row) + 1
    }

    /// (heap-space offset, length) of the managed object with this ID.
    fn managed_place(&self, id: &[u8]) -> Result<(u64, u64)> {
        let mut c = Cursor::new(id, self.addr, "fractal heap ID");
        c.skip(1)?;
        let offset = c.uint(self.offset_width)?;
        let len = c.uint(self.length_width)?;
        if len > self.max_managed_size as u64 {
            return Err(Error::corrupt(
                WHAT,
                self.addr,
                format!("managed object of {len} bytes"),
            ));
        }
        Ok((offset, len))
    }

    /// The managed object of `len` bytes at heap offset `offset` (from [`Self::managed_place`]).
    fn get_managed(&self, storage: &Storage, offset: u64, len: u64) -> Result<Vec<u8>> {
        let (block_addr, block_off, block_size) = self.find_direct_block(storage, offset)?;
        if self.filter_len > 0 {
            return Err(Error::unsupported("fractal heap", "filtered direct blocks"));
        }
        let hlen = 5 + self.sizes.offset as u64 + self.offset_width as u64;
        let sum_len = if self.flags & 2 != 0 { 4 } else { 0 };
        let rel = offset - block_off;
        let end = rel
            .checked_add(len)
            .filter(|&e| e <= block_size && rel >= hlen + sum_len);
        let Some(end) = end else {
            return Err(Error::corrupt(
                DBLOCK,
                block_addr,
                format!("object at heap offset {offset} ({len} bytes) outside the block"),
            ));
        };
        let verified = || {
            let set = lock(&self.verified_blocks);
            set.contains(&block_addr)
        };
        if self.flags & 2 != 0 && verified() {
            return storage.read_vec(block_addr + rel, len, DBLOCK);
        }
        if self.flags & 2 != 0 {
            // The checksum covers the whole block with its own field zeroed.
            let mut block = storage.read_vec(block_addr, block_size, DBLOCK)?;
            self.check_dblock_header(&block, block_addr, block_off)?;
            let at = hlen as usize;
            let stored =
                u32::from_le_bytes([block[at], block[at + 1], block[at + 2], block[at + 3]]);
            block[at..at + 4].fill(0);
            if lookup3(&block, 0) != stored {
                return Err(Error::Checksum {
                    what: DBLOCK,
                    addr: block_addr,
                });
            }
            let mut set = lock(&self.verified_blocks);
            if set.len() < MAX_VERIFIED_BLOCKS {
                set.insert(block_addr);
            }
            Ok(block[rel as usize..end as usize].to_vec())
        } else {
            let head = storage.read_vec(block_addr, hlen, DBLOCK)?;
            self.check_dblock_header(&head, block_addr, block_off)?;
            storage.read_vec(block_addr + rel, len, DBLOCK)
        }
    }

    fn check_dblock_header(&self, b: &[u8], addr: u64, block_off: u64) -> Result<()> {
        let mut c = Cursor::new(b, addr, DBLOCK);
        c.signature(b"FHDB")?;
        let v = c.u8()?;
        if v != 0 {
            return Err(c.corrupt(format!("version {v}")));
        }
        c.skip(self.sizes.offset as usize)?;
        let off = c.uint(self.offset_width)?;
        if off != block_off {
            return Err(c.corrupt(format!("block offset {off}, expected {block_off}")));
        }
        Ok(())
    }

    /// Walk from the root to the direct block covering heap-space `offset`:
    /// (address, heap-space offset of the block, block size).
    fn find_direct_block(&self, storage: &Storage, offset: u64) -> Result<(u64, u64, u64)> {
        if self.root_addr == UNDEFINED_ADDR {
            return Err(Error::corrupt(WHAT, self.addr, "object in an empty heap"));
        }
        if self.root_rows == 0 {
            if offset >= self.start_block_size {
                return Err(Error::corrupt(
                    WHAT,
                    self.addr,
                    format!("heap offset {offset} past the root block"),
                ));
            }
            return Ok((self.root_addr, 0, self.start_block_size));
        }
        let mut iaddr = self.root_addr;
        let mut ioff = 0u64;
        let mut rows = self.root_rows as u32;
        for _ in 0..MAX_TREE_DEPTH {
            let rel = offset - ioff;
            let span = self.start_block_size * self.table_width as u64;
            let row = if rel < span {
                0
            } else {
                64 - (rel / span).leading_zeros()
            };
            if row >= rows {
                return Err(Error::corrupt(
                    IBLOCK,
                    iaddr,
                    format!("heap offset {offset} beyond its {rows} rows"),
                ));
            }
            let bsize = self
                .row_block_size(row)
                .ok_or_else(|| Error::corrupt(IBLOCK, iaddr, "row size overflows"))?;
            let roff = self
                .row_offset(row)
                .ok_or_else(|| Error::corrupt(IBLOCK, iaddr, "row offset overflows"))?;
            let col = (rel - roff) / bsize;
            let child_off = ioff + roff + col * bsize;
            let entry = row as u64 * self.table_width as u64 + col;
            let child = self.iblock_entry(storage, iaddr, ioff, rows, entry)?;
            if child == UNDEFINED_ADDR {
                return Err(Error::corrupt(
                    IBLOCK,
                    iaddr,
                    format!("heap offset {offset} in an unallocated block"),
                ));
            }
            if row < self.max_direct_rows {
                return Ok((child, child_off, bsize));
            }
            iaddr = child;
            ioff = child_off;
            rows = self.rows_for(bsize);
        }
        Err(Error::limit(
            IBLOCK,
            iaddr,
            "indirect blocks nested too deeply",
        ))
    }

    /// Read indirect block `addr` (heap-space offset `ioff`, `rows` rows) and return the child
    /// address in slot `entry`.
    fn iblock_entry(
        &self,
        storage: &Storage,
        addr: u64,
        ioff: u64,
        rows: u32,
        entry: u64,
    ) -> Result<u64> {
        let o = self.sizes.offset as u64;
        let w = self.table_width as u64;
        let direct = rows.min(self.max_direct_rows) as u64 * w;
        let indirect = rows.saturating_sub(self.max_direct_rows) as u64 * w;
        let dsize = if self.filter_len > 0 {
            o + self.sizes.length as u64 + 4
        } else {
            o
        };
        let hlen = 5 + o + self.offset_width as u64;
        let len = hlen + direct * dsize + indirect * o + 4;
        let key = (addr, ioff, rows);
        let kept = {
            let map = lock(&self.iblocks);
            map.get(&key).cloned()
        };
        let buf = match kept {
            Some(b) => b,
            None => {
                let b = Arc::new(storage.read_checksummed(addr, len, IBLOCK)?);
                self.check_iblock_header(&b, addr, ioff)?;
                let mut map = lock(&self.iblocks);
                if map.len() < MAX_KEPT_IBLOCKS {
                    map.insert(key, b.clone());
                }
                b
            }
        };
        let pos = if entry < direct {
            hlen + entry * dsize
        } else {
            hlen + direct * dsize + (entry - direct) * o
        };
        let mut c = Cursor::new(&buf, addr, IBLOCK);
        c.seek(pos as usize)?;
        c.offset(self.sizes)
    }

    /// Check the header of the indirect block at `addr` expected at heap offset `ioff`.
    fn check_iblock_header(&self, buf: &[u8], addr: u64, ioff: u64) -> Result<()> {
        let o = self.sizes.offset as u64;
        let mut c = Cursor::new(buf, addr, IBLOCK);
        c.signature(b"FHIB")?;
        let v = c.u8()?;
        if v != 0 {
            return Err(c.corrupt(format!("version {v}")));
        }
        let heap = c.uint(o as usize)?;
        if heap != self.addr {
            return Err(c.corrupt(format!("belongs to heap {heap:#x}, not {:#x}", self.addr)));
        }
        let off = c.uint(self.offset_width)?;
        if off != ioff {
            return Err(c.corrupt(format!("block offset {off}, expected {ioff}")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
