//! Data layout message (0x0008), versions 1-5, every class, with every chunk-index parameter
//! (spec "IV.A.2.i").
//!
//! * Versions 1 and 2 (HDF5 1.6 and older) share one encoding: rank, class, five reserved
//!   bytes, an address (absent for compact), `rank` 4-byte dimensions, and for compact storage
//!   a 4-byte size and the data. The contiguous size is not stored; it is taken here as the
//!   product of the stored dimensions (the writers of that era stored the element size as the
//!   last dimension, as for chunks), and the model should prefer npoints × element size.
//! * Version 3 gives each class its own properties: compact (2-byte size + data), contiguous
//!   (address + length), chunked (rank, v1 B-tree address, `rank` 4-byte dimensions).
//! * Versions 4 and 5 add layout flags, a per-message width for the chunk dimensions, the chunk
//!   index type (1-5) with its parameters, and the virtual class. Version 5 differs only in
//!   how filtered chunk sizes are stored inside the FA/EA/BT2 indexes, not in this message.
//!
//! In every version the stored chunk rank is the dataset rank plus one, the last "dimension"
//! being the element size in bytes (checked against real h5py files for v3, v4 and v5). It is
//! removed from [`ChunkedLayout::chunk_dims`] and kept in [`ChunkedLayout::element_size`].

use crate::error::{Error, Result};
use crate::format::limits::MAX_RANK;
use crate::io::{Cursor, Sizes};

/// Layout flag bit 0 of chunked layouts v4/v5: partial edge chunks are not filtered.
pub const DONT_FILTER_PARTIAL_EDGE_CHUNKS: u8 = 0x01;
/// Layout flag bit 1 of chunked layouts v4/v5: single-chunk index stores a filtered size.
pub const SINGLE_INDEX_WITH_FILTER: u8 = 0x02;

/// How chunk addresses are indexed, with each index type's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkIndexSpec {
    /// Layout v1-3: version-1 B-tree, node type 1 (index type 0 is invalid in v4/v5).
    BtreeV1 { addr: u64 },
    /// Index type 1: one chunk the size of the dataset.
    SingleChunk {
        addr: u64,
        /// Present when the chunk is filtered (flag bit 1).
        filtered_size: Option<u64>,
        filter_mask: u32,
    },
    /// Index type 2: chunks contiguous in address order, no index stored.
    Implicit { addr: u64 },
    /// Index type 3.
    FixedArray { addr: u64, page_bits: u8 },
    /// Index type 4.
    ExtensibleArray {
        addr: u64,
        max_bits: u8,
        index_elements: u8,
        min_pointers: u8,
        min_elements: u8,
        page_bits: u8,
    },
    /// Index type 5: version-2 B-tree, record types 10 (unfiltered) and 11 (filtered).
    BtreeV2 {
        addr: u64,
        node_size: u32,
        split_percent: u8,
        merge_percent: u8,
    },
}

/// A chunked layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkedLayout {
    /// Layout flags (v4/v5), 0 otherwise.
    pub flags: u8,
    /// Chunk dimensions in elements, one per dataset dimension (the trailing element-size
    /// dimension that every version stores is removed and kept in `element_size`).
    pub chunk_dims: Vec<u64>,
    /// Element size in bytes, stored as the last chunk dimension (all versions).
    pub element_size: u32,
    pub index: ChunkIndexSpec,
}

/// Storage class and its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutClass {
    /// Raw data in the message itself.
    Compact {
        data: Vec<u8>,
    },
    /// One block at `addr` (undefined when never allocated) of `size` bytes.
    Contiguous {
        addr: u64,
        size: u64,
    },
    Chunked(ChunkedLayout),
    /// Virtual dataset: mapping in the global heap collection at `heap_addr`, object `index`.
    Virtual {
        heap_addr: u64,
        index: u32,
    },
}

/// The data layout message (spec "IV.A.2.i").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Message version (1-5). Version 5 stores filtered chunk sizes in FA/EA/BT2 index
    /// elements with "Size of Lengths" bytes.
    pub version: u8,
    pub class: LayoutClass,
    /// Dimensionality stored by v1/v2 layouts (for reference; v3+ derive it).
    pub legacy_dims: Option<Vec<u64>>,
}

/// Layout class numbers.
const COMPACT: u8 = 0;
const CONTIGUOUS: u8 = 1;
const CHUNKED: u8 = 2;
const VIRTUAL: u8 = 3;

impl Layout {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<Layout> {
        let mut c = Cursor::new(data, addr, "data layout message");
        match c.u8()? {
            v @ (1 | 2) => legacy(&mut c, v, sizes),
            v @ 3..=5 => {
                let class = match c.u8()? {
                    COMPACT => {
                        let n = c.u16()? as usize;
                        LayoutClass::Compact {
                            data: c.bytes(n)?.to_vec(),
                        }
                    }
                    CONTIGUOUS => LayoutClass::Contiguous {
                        addr: c.offset(sizes)?,
                        size: c.length(sizes)?,
                    },
                    CHUNKED if v == 3 => chunked_v3(&mut c, sizes)?,
                    CHUNKED => chunked_v4(&mut c, sizes)?,
                    VIRTUAL if v >= 4 => LayoutClass::Virtual {
                        heap_addr: c.offset(sizes)?,
                        index: c.u32()?,
                    },
                    k => return Err(c.corrupt(format!("layout class {k} in version {v}"))),
                };
                Ok(Layout {
                    version: v,
                    class,
                    legacy_dims: None,
                })
            }
            v => Err(c.corrupt(format!("layout version {v}"))),
        }
    }
}

/// Split the stored chunk dimensions into dataset-rank chunk dims and the element size.
fn split_element_size(c: &Cursor<'_>, mut dims: Vec<u64>) -> Result<(Vec<u64>, u32)> {
    let elem = dims
        .pop()
        .ok_or_else(|| c.corrupt("chunked layout of rank 0"))?;
    let elem = u32::try_from(elem)
        .map_err(|_| c.corrupt(format!("element size {elem} in chunk dimensions")))?;
    if dims.is_empty() {
        return Err(c.corrupt("chunked layout without dataset dimensions"));
    }
    if dims.contains(&0) {
        return Err(c.corrupt("chunk dimension of 0"));
    }
    Ok((dims, elem))
}

/// The stored rank of chunk dimensions: dataset rank + 1, at most [`MAX_RANK`] + 1.
fn chunk_rank(c: &mut Cursor<'_>) -> Result<usize> {
    let n = c.u8()? as usize;
    if n > MAX_RANK + 1 {
        return Err(Error::limit(
            c.what(),
            c.start_addr(),
            format!("chunk rank {n} exceeds {}", MAX_RANK + 1),
        ));
    }
    Ok(n)
}

/// Versions 1 and 2.
fn legacy(c: &mut Cursor<'_>, version: u8, sizes: Sizes) -> Result<Layout> {
    let rank = chunk_rank(c)?;
    let class = c.u8()?;
    c.skip(5)?; // reserved
    let addr = if class == COMPACT {
        None
    } else {
        Some(c.offset(sizes)?)
    };
    let mut dims = Vec::with_capacity(rank);
    for _ in 0..rank {
        dims.push(c.u32()? as u64);
    }
    let class = match (class, addr) {
        (COMPACT, _) => {
            let n = c.u32()? as usize;
            LayoutClass::Compact {
                data: c.bytes(n)?.to_vec(),
            }
        }
        (CONTIGUOUS, Some(addr)) => LayoutClass::Contiguous {
            addr,
            size: dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .ok_or_else(|| c.corrupt("contiguous size overflows"))?,
        },
        (CHUNKED, Some(addr)) => {
            let (chunk_dims, element_size) = split_element_size(c, dims.clone())?;
            LayoutClass::Chunked(ChunkedLayout {
                flags: 0,
                chunk_dims,
                element_size,
                index: ChunkIndexSpec::BtreeV1 { addr },
            })
        }
        (k, _) => return Err(c.corrupt(format!("layout class {k} in version {version}"))),
    };
    Ok(Layout {
        version,
        class,
        legacy_dims: Some(dims),
    })
}

/// Version 3 chunked: rank, v1 B-tree address, 4-byte dimensions.
fn chunked_v3(c: &mut Cursor<'_>, sizes: Sizes) -> Result<LayoutClass> {
    let rank = chunk_rank(c)?;
    let addr = c.offset(sizes)?;
    let mut dims = Vec::with_capacity(rank);
    for _ in 0..rank {
        dims.push(c.u32()? as u64);
    }
    let (chunk_dims, element_size) = split_element_size(c, dims)?;
    Ok(LayoutClass::Chunked(ChunkedLayout {
        flags: 0,
        chunk_dims,
        element_size,
        index: ChunkIndexSpec::BtreeV1 { addr },
    }))
}

/// Fixed and extensible array parameters are counts and bit widths that the index code shifts
/// and divides by: the library refuses zeros, and so do we.
fn nonzero<'a>(c: &Cursor<'_>, params: &'a [u8]) -> Result<&'a [u8]> {
    if params.contains(&0) {
        return Err(c.corrupt(format!("chunk index parameter of 0 in {params:?}")));
    }
    Ok(params)
}

/// Versions 4 and 5 chunked: flags, rank, dimension width, dimensions, index type and its
/// parameters, index address.
fn chunked_v4(c: &mut Cursor<'_>, sizes: Sizes) -> Result<LayoutClass> {
    let flags = c.u8()?;
    if flags & !(DONT_FILTER_PARTIAL_EDGE_CHUNKS | SINGLE_INDEX_WITH_FILTER) != 0 {
        return Err(c.corrupt(format!("unknown chunked layout flags {flags:#04x}")));
    }
    let rank = chunk_rank(c)?;
    // Writers use the bytes needed for the largest dimension; any width up to 8 is valid.
    let width = c.u8()? as usize;
    if !(1..=8).contains(&width) {
        return Err(c.corrupt(format!("chunk dimension width {width}")));
    }
    let mut dims = Vec::with_capacity(rank);
    for _ in 0..rank {
        dims.push(c.uint(width)?);
    }
    let (chunk_dims, element_size) = split_element_size(c, dims)?;
    let index_type = c.u8()?;
    let index = match index_type {
        1 => {
            let (filtered_size, filter_mask) = if flags & SINGLE_INDEX_WITH_FILTER != 0 {
                (Some(c.length(sizes)?), c.u32()?)
            } else {
                (None, 0)
            };
            ChunkIndexSpec::SingleChunk {
                addr: c.offset(sizes)?,
                filtered_size,
                filter_mask,
            }
        }
        2 => ChunkIndexSpec::Implicit {
            addr: c.offset(sizes)?,
        },
        3 => {
            let b = c.bytes(1)?;
            let page_bits = nonzero(c, b)?[0];
            ChunkIndexSpec::FixedArray {
                addr: c.offset(sizes)?,
                page_bits,
            }
        }
        4 => {
            let p = c.bytes(5)?;
            let p = nonzero(c, p)?;
            ChunkIndexSpec::ExtensibleArray {
                max_bits: p[0],
                index_elements: p[1],
                min_pointers: p[2],
                min_elements: p[3],
                page_bits: p[4],
                addr: c.offset(sizes)?,
            }
        }
        5 => {
            let node_size = c.u32()?;
            let (split_percent, merge_percent) = (c.u8()?, c.u8()?);
            ChunkIndexSpec::BtreeV2 {
                addr: c.offset(sizes)?,
                node_size,
                split_percent,
                merge_percent,
            }
        }
        t => return Err(c.corrupt(format!("chunk index type {t}"))),
    };
    Ok(LayoutClass::Chunked(ChunkedLayout {
        flags,
        chunk_dims,
        element_size,
        index,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::UNDEFINED_ADDR;

    use crate::io::testutil::hex;

    fn parse(h: &str) -> Layout {
        Layout::parse(&hex(h), 0x200, Sizes::DEFAULT).unwrap()
    }

    fn chunked(l: &Layout) -> &ChunkedLayout {
        match &l.class {
            LayoutClass::Chunked(c) => c,
            other => panic!("not chunked: {other:?}"),
        }
    }

    #[test]
    fn real_v3() {
        // h5py earliest, 3-D f8 chunks (2, 4, 5), B-tree not yet allocated, v1 header padding.
        let l = parse("030204ffffffffffffffff020000000400000005000000080000000000000000");
        let c = chunked(&l);
        assert_eq!((l.version, c.flags), (3, 0));
        assert_eq!(c.chunk_dims, vec![2, 4, 5]);
        assert_eq!(c.element_size, 8);
        assert_eq!(
            c.index,
            ChunkIndexSpec::BtreeV1 {
                addr: UNDEFINED_ADDR
            }
        );
        let l = parse("0301a00d0000000000003000000000000000000000000000");
        assert_eq!(
            l.class,
            LayoutClass::Contiguous {
                addr: 0xda0,
                size: 48
            }
        );
        let l = parse("03000800000001000200030000000000");
        assert_eq!(
            l.class,
            LayoutClass::Compact {
                data: vec![0, 0, 1, 0, 2, 0, 3, 0]
            }
        );
    }

    #[test]
    fn real_v4_indexes() {
        // Extensible array: one unlimited dimension, <i4 chunks (2, 4).
        let l = parse("040200030102040404200404100affffffffffffffff");
        let c = chunked(&l);
        assert_eq!((c.chunk_dims.as_slice(), c.element_size), (&[2, 4][..], 4));
        assert_eq!(
            c.index,
            ChunkIndexSpec::ExtensibleArray {
                addr: UNDEFINED_ADDR,
                max_bits: 32,
                index_elements: 4,
                min_pointers: 4,
                min_elements: 16,
                page_bits: 10,
            }
        );
        // Fixed array, 3-D.
        let c = parse("040200040102040508030affffffffffffffff");
        assert_eq!(
            chunked(&c).index,
            ChunkIndexSpec::FixedArray {
                addr: UNDEFINED_ADDR,
                page_bits: 10
            }
        );
        // Implicit (early allocation), allocated at 0xa11.
        let l = parse("040200030102020202110a000000000000");
        assert_eq!(chunked(&l).index, ChunkIndexSpec::Implicit { addr: 0xa11 });
        // Single chunk, unfiltered.
        let l = parse("040200030103040201ffffffffffffffff");
        assert_eq!(
            chunked(&l).index,
            ChunkIndexSpec::SingleChunk {
                addr: UNDEFINED_ADDR,
                filtered_size: None,
                filter_mask: 0
            }
        );
    }

    #[test]
    fn real_v5() {
        // Two unlimited dimensions: v2 B-tree.
        let l = parse("050200030102040805000800006428ffffffffffffffff");
        assert_eq!(l.version, 5);
        let c = chunked(&l);
        assert_eq!((c.chunk_dims.as_slice(), c.element_size), (&[2, 4][..], 8));
        assert_eq!(
            c.index,
            ChunkIndexSpec::BtreeV2 {
                addr: UNDEFINED_ADDR,
                node_size: 2048,
                split_percent: 100,
                merge_percent: 40
            }
        );
        // Single filtered chunk: flag bit 1, filtered size (Size of Lengths) and mask.
        let l = parse("050202030103040201000000000000000000000000ffffffffffffffff");
        let c = chunked(&l);
        assert_eq!(c.flags, SINGLE_INDEX_WITH_FILTER);
        assert_eq!(
            c.index,
            ChunkIndexSpec::SingleChunk {
                addr: UNDEFINED_ADDR,
                filtered_size: Some(0),
                filter_mask: 0
            }
        );
    }

    #[test]
    fn real_virtual() {
        // h5py VirtualLayout: mapping in the global heap collection at 0x19d4, object 1.
        let l = parse("0403d41900000000000001000000");
        assert_eq!(
            l.class,
            LayoutClass::Virtual {
                heap_addr: 0x19d4,
                index: 1
            }
        );
    }

    #[test]
    fn v4_wide_dimension_encoding_and_virtual() {
        // 4-byte dimension width although 1 would do; partial-edge flag; filtered single chunk.
        let mut b = vec![4, 2, 3, 3, 4];
        for d in [7u32, 9, 2] {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.push(1);
        b.extend_from_slice(&100u64.to_le_bytes());
        b.extend_from_slice(&0x5u32.to_le_bytes());
        b.extend_from_slice(&0x800u64.to_le_bytes());
        let l = Layout::parse(&b, 0, Sizes::DEFAULT).unwrap();
        let c = chunked(&l);
        assert_eq!(c.flags, 3);
        assert_eq!((c.chunk_dims.as_slice(), c.element_size), (&[7, 9][..], 2));
        assert_eq!(
            c.index,
            ChunkIndexSpec::SingleChunk {
                addr: 0x800,
                filtered_size: Some(100),
                filter_mask: 5
            }
        );
        let mut v = vec![4, 3];
        v.extend_from_slice(&0x1234u64.to_le_bytes());
        v.extend_from_slice(&7u32.to_le_bytes());
        assert_eq!(
            Layout::parse(&v, 0, Sizes::DEFAULT).unwrap().class,
            LayoutClass::Virtual {
                heap_addr: 0x1234,
                index: 7
            }
        );
        // Virtual does not exist in version 3.
        v[0] = 3;
        assert!(Layout::parse(&v, 0, Sizes::DEFAULT).is_err());
    }

    #[test]
    fn legacy_v1_v2() {
        let sizes = Sizes {
            offset: 4,
            length: 4,
        };
        // v1 chunked, 2-D chunks (10, 20) of 4-byte elements at B-tree 0x400.
        let mut b = vec![1, 3, 2, 0, 0, 0, 0, 0];
        b.extend_from_slice(&0x400u32.to_le_bytes());
        for d in [10u32, 20, 4] {
            b.extend_from_slice(&d.to_le_bytes());
        }
        let l = Layout::parse(&b, 0, sizes).unwrap();
        assert_eq!(l.legacy_dims, Some(vec![10, 20, 4]));
        let c = chunked(&l);
        assert_eq!(
            (c.chunk_dims.as_slice(), c.element_size),
            (&[10, 20][..], 4)
        );
        assert_eq!(c.index, ChunkIndexSpec::BtreeV1 { addr: 0x400 });
        // v2 contiguous, never allocated (undefined address of 4 bytes).
        let mut b = vec![2, 2, 1, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        for d in [6u32, 8] {
            b.extend_from_slice(&d.to_le_bytes());
        }
        let l = Layout::parse(&b, 0, sizes).unwrap();
        assert_eq!(
            l.class,
            LayoutClass::Contiguous {
                addr: UNDEFINED_ADDR,
                size: 48
            }
        );
        // v2 compact: no address, dims, 4-byte size, data.
        let mut b = vec![2, 1, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(b"abc");
        let l = Layout::parse(&b, 0, sizes).unwrap();
        assert_eq!(
            l.class,
            LayoutClass::Compact {
                data: b"abc".to_vec()
            }
        );
    }

    #[test]
    fn mutated_real_messages_never_panic() {
        for h in [
            "040200030102040404200404100affffffffffffffff",
            "050202030103040201000000000000000000000000ffffffffffffffff",
            "030204ffffffffffffffff0200000004000000050000000800000000",
        ] {
            let orig = hex(h);
            for pos in 0..orig.len() {
                for v in [0u8, 0xff, orig[pos].wrapping_add(1)] {
                    let mut b = orig.clone();
                    b[pos] = v;
                    let _ = Layout::parse(&b, 0, Sizes::DEFAULT);
                }
                let _ = Layout::parse(&orig[..pos], 0, Sizes::DEFAULT);
            }
        }
    }

    #[test]
    fn hostile() {
        let bad = |h: &str| Layout::parse(&hex(h), 0, Sizes::DEFAULT);
        assert!(bad("06").is_err());
        assert!(bad("0309").is_err());
        // Compact size beyond the message.
        assert!(matches!(bad("0300ff00aa"), Err(Error::Truncated { .. })));
        // Chunk rank 200.
        assert!(matches!(bad("0302c8"), Err(Error::Limit { .. })));
        // Dimension width 9; unknown index type; unknown flags; zero chunk dimension.
        assert!(bad("04020002090102").is_err());
        assert!(bad("040200020102040900").is_err());
        assert!(bad("040280020102040300").is_err());
        assert!(bad("040200020100040300ffffffffffffffff").is_err());
        // Zero fixed/extensible array parameters.
        assert!(bad("04020002010204030000").is_err());
        assert!(bad("040200020102040420000410").is_err());
        // Element size only (rank 1 stored = dataset rank 0).
        assert!(bad("0402000101040300ffffffffffffffff").is_err());
    }
}
