//! Decoders for the v2 B-tree record types (spec "III.A.2", record-type tables). Each takes
//! the raw record bytes handed out by the tree walk and checks that they are long enough.

use crate::error::{Error, Result};
use crate::io::{Cursor, Sizes};

const WHAT: &str = "v2 B-tree record";

/// Record types 1-4: a huge fractal-heap object stored outside the heap's blocks.
///
/// Type 1 (indirect, unfiltered): address, length, ID. Type 2 (indirect, filtered): address,
/// length, filter mask, de-filtered size, ID. Type 3 (direct, unfiltered): address, length.
/// Type 4 (direct, filtered): address, length, filter mask, de-filtered size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HugeObjectRecord {
    pub addr: u64,
    /// Bytes stored in the file.
    pub len: u64,
    /// Filters skipped (types 2 and 4; 0 otherwise).
    pub filter_mask: u32,
    /// Size after undoing the filters (types 2 and 4).
    pub memory_size: Option<u64>,
    /// The object's huge-object ID (types 1 and 2), the key of the tree.
    pub id: Option<u64>,
}

impl HugeObjectRecord {
    pub fn parse(record_type: u8, rec: &[u8], sizes: Sizes) -> Result<HugeObjectRecord> {
        let mut c = Cursor::new(rec, 0, WHAT);
        let addr = c.offset(sizes)?;
        let len = c.length(sizes)?;
        let (filter_mask, memory_size) = match record_type {
            2 | 4 => (c.u32()?, Some(c.length(sizes)?)),
            1 | 3 => (0, None),
            t => return Err(c.corrupt(format!("record type {t} is not a huge object"))),
        };
        let id = match record_type {
            1 | 2 => Some(c.length(sizes)?),
            _ => None,
        };
        Ok(HugeObjectRecord {
            addr,
            len,
            filter_mask,
            memory_size,
            id,
        })
    }
}

fn heap_id<const N: usize>(c: &mut Cursor<'_>) -> Result<[u8; N]> {
    let b = c.bytes(N)?;
    let mut id = [0u8; N];
    id.copy_from_slice(b);
    Ok(id)
}

/// Record type 5: a link in a dense group indexed by name hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkNameRecord {
    /// lookup3 hash of the link name.
    pub hash: u32,
    /// Fractal-heap ID of the link message.
    pub heap_id: [u8; 7],
}

impl LinkNameRecord {
    pub fn parse(rec: &[u8]) -> Result<LinkNameRecord> {
        let mut c = Cursor::new(rec, 0, WHAT);
        Ok(LinkNameRecord {
            hash: c.u32()?,
            heap_id: heap_id(&mut c)?,
        })
    }
}

/// Record type 6: a link in a dense group indexed by creation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkOrderRecord {
    pub creation_order: u64,
    pub heap_id: [u8; 7],
}

impl LinkOrderRecord {
    pub fn parse(rec: &[u8]) -> Result<LinkOrderRecord> {
        let mut c = Cursor::new(rec, 0, WHAT);
        Ok(LinkOrderRecord {
            creation_order: c.u64()?,
            heap_id: heap_id(&mut c)?,
        })
    }
}

/// Record type 7: a shared object header message index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SohmRecord {
    /// Location 0: the message is in the shared-message fractal heap.
    Heap {
        hash: u32,
        ref_count: u32,
        heap_id: [u8; 8],
    },
    /// Location 1: the message is still in one object header.
    ObjectHeader {
        hash: u32,
        message_type: u8,
        /// Index of the message among the header's messages of that type.
        index: u16,
        header_addr: u64,
    },
}

impl SohmRecord {
    pub fn parse(rec: &[u8], sizes: Sizes) -> Result<SohmRecord> {
        let mut c = Cursor::new(rec, 0, WHAT);
        let location = c.u8()?;
        let hash = c.u32()?;
        match location {
            0 => Ok(SohmRecord::Heap {
                hash,
                ref_count: c.u32()?,
                heap_id: heap_id(&mut c)?,
            }),
            1 => {
                c.skip(1)?;
                Ok(SohmRecord::ObjectHeader {
                    hash,
                    message_type: c.u8()?,
                    index: c.u16()?,
                    header_addr: c.offset(sizes)?,
                })
            }
            l => Err(c.corrupt(format!("shared message location {l}"))),
        }
    }

    /// The hash of the message, the tree's key.
    pub fn hash(&self) -> u32 {
        match *self {
            SohmRecord::Heap { hash, .. } | SohmRecord::ObjectHeader { hash, .. } => hash,
        }
    }
}

/// Record types 8 (by name hash) and 9 (by creation order): a dense attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttributeRecord {
    /// Fractal-heap ID of the attribute message.
    pub heap_id: [u8; 8],
    /// Object header message flags of the attribute (bit 1: shared).
    pub flags: u8,
    pub creation_order: u32,
    /// lookup3 hash of the name (type 8 only).
    pub hash: Option<u32>,
}

impl AttributeRecord {
    pub fn parse(record_type: u8, rec: &[u8]) -> Result<AttributeRecord> {
        let mut c = Cursor::new(rec, 0, WHAT);
        let heap_id = heap_id(&mut c)?;
        let flags = c.u8()?;
        let creation_order = c.u32()?;
        let hash = match record_type {
            8 => Some(c.u32()?),
            9 => None,
            t => return Err(c.corrupt(format!("record type {t} is not an attribute"))),
        };
        Ok(AttributeRecord {
            heap_id,
            flags,
            creation_order,
            hash,
        })
    }
}

/// Record types 10 (unfiltered) and 11 (filtered): one chunk of a dataset.
///
/// Type 10: address, then one 8-byte scaled offset per dataset dimension. Type 11: address,
/// stored chunk size, filter mask (4 bytes), scaled offsets. The chunk-size width is whatever
/// the record size leaves: layout v4 writers use the bytes needed for the uncompressed chunk
/// size plus one, layout v5 (HDF5 2.0) uses "Size of Lengths".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkBtRecord {
    pub addr: u64,
    /// Stored size (type 11 only).
    pub size: Option<u64>,
    pub filter_mask: u32,
    /// Chunk coordinates in chunk units, one per dimension.
    pub scaled: Vec<u64>,
}

impl ChunkBtRecord {
    /// Width of the chunk-size field of a type-11 record of `record_size` bytes and `rank`
    /// dimensions, checked to be 1..=8.
    pub fn size_width(record_size: usize, rank: usize, sizes: Sizes) -> Result<usize> {
        rank.checked_mul(8)
            .and_then(|s| s.checked_add(sizes.offset as usize + 4))
            .and_then(|fixed| record_size.checked_sub(fixed))
            .filter(|w| (1..=8).contains(w))
            .ok_or_else(|| {
                Error::corrupt(
                    WHAT,
                    0,
                    format!("filtered chunk record of {record_size} bytes for rank {rank}"),
                )
            })
    }

    /// Decode a record of type `record_type` (10 or 11) for a dataset of `rank` dimensions.
    pub fn parse(record_type: u8, rec: &[u8], sizes: Sizes, rank: usize) -> Result<ChunkBtRecord> {
        let mut c = Cursor::new(rec, 0, WHAT);
        let addr = c.offset(sizes)?;
        let (size, filter_mask) = match record_type {
            10 => (None, 0),
            11 => {
                let w = Self::size_width(rec.len(), rank, sizes)?;
                (Some(c.uint(w)?), c.u32()?)
            }
            t => return Err(c.corrupt(format!("record type {t} is not a chunk"))),
        };
        let mut scaled = Vec::with_capacity(rank.min(crate::format::limits::MAX_RANK));
        for _ in 0..rank {
            scaled.push(c.u64()?);
        }
        Ok(ChunkBtRecord {
            addr,
            size,
            filter_mask,
            scaled,
        })
    }

    /// Compare scaled coordinates without decoding the whole record: how `coords` compares to
    /// the record's offsets, dimension by dimension from the first.
    pub fn compare(
        record_type: u8,
        rec: &[u8],
        sizes: Sizes,
        coords: &[u64],
    ) -> Result<std::cmp::Ordering> {
        let start = match record_type {
            10 => sizes.offset as usize,
            _ => sizes.offset as usize + Self::size_width(rec.len(), coords.len(), sizes)? + 4,
        };
        let mut c = Cursor::new(rec, 0, WHAT);
        c.seek(start)?;
        for &x in coords {
            match x.cmp(&c.u64()?) {
                std::cmp::Ordering::Equal => {}
                o => return Ok(o),
            }
        }
        Ok(std::cmp::Ordering::Equal)
    }
}
