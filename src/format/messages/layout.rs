//! Data layout message (0x0008), versions 1-5, every class, with every chunk-index parameter.

use crate::error::Result;
use crate::io::Sizes;

/// Layout flag bit 0 of chunked layouts v4/v5: partial edge chunks are not filtered.
pub const DONT_FILTER_PARTIAL_EDGE_CHUNKS: u8 = 0x01;
/// Layout flag bit 1 of chunked layouts v4/v5: single-chunk index stores a filtered size.
pub const SINGLE_INDEX_WITH_FILTER: u8 = 0x02;

/// How chunk addresses are indexed, with each index type's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkIndexSpec {
    /// Layout v1-3 (and v4 type 5): version-1 B-tree, node type 1.
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
    /// dimension of v1-3 is removed and kept in `element_size`).
    pub chunk_dims: Vec<u64>,
    /// Element size stored with the chunk dims in v1-3 (0 when not stored).
    pub element_size: u32,
    pub index: ChunkIndexSpec,
}

/// Storage class and its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutClass {
    /// Raw data in the message itself.
    Compact { data: Vec<u8> },
    /// One block at `addr` (undefined when never allocated) of `size` bytes.
    Contiguous { addr: u64, size: u64 },
    Chunked(ChunkedLayout),
    /// Virtual dataset: mapping in the global heap collection at `heap_addr`, object `index`.
    Virtual { heap_addr: u64, index: u32 },
}

/// The data layout message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Message version (1-5). Version 5 stores filtered chunk sizes in FA/EA/BT2 index
    /// elements with "Size of Lengths" bytes (FORMAT-NOTES).
    pub version: u8,
    pub class: LayoutClass,
    /// Dimensionality stored by v1/v2 layouts (for reference; v3+ derive it).
    pub legacy_dims: Option<Vec<u64>>,
}

impl Layout {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<Layout> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("layout", "not implemented yet"))
    }
}
