//! Chunk indexes behind one interface: given a chunk's coordinates (in chunk units), where is
//! it stored, how big is it and which filters were skipped. Lookups are lazy: only the nodes
//! on the path to the chunk are read, and nodes are cached inside each index.

pub mod btree_v1;
pub mod btree_v2;
pub mod extensible_array;
pub mod fixed_array;
pub mod implicit;
pub mod single;

use crate::error::Result;
use crate::format::messages::layout::ChunkIndexSpec;
use crate::io::{Sizes, Storage};

/// Where one chunk is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRecord {
    /// Relative file address of the stored chunk.
    pub addr: u64,
    /// Stored size in bytes (after filters).
    pub size: u64,
    /// Filters skipped for this chunk (bit i set = filter i of the pipeline not applied).
    pub filter_mask: u32,
}

/// Everything an index needs to know about its dataset.
#[derive(Clone, Debug)]
pub struct IndexParams {
    pub storage: Storage,
    pub sizes: Sizes,
    /// Current dataset dimensions.
    pub dims: Vec<u64>,
    /// Maximum dimensions (`u64::MAX` = unlimited); equal to `dims` when not stored.
    pub max_dims: Vec<u64>,
    /// Chunk dimensions in elements.
    pub chunk_dims: Vec<u64>,
    /// Bytes per element.
    pub element_size: u32,
    /// True when the dataset has a filter pipeline (index entries then carry sizes and masks).
    pub filtered: bool,
    /// Layout message version (5 stores filtered sizes with "Size of Lengths" bytes).
    pub layout_version: u8,
    /// Layout flags (v4/v5).
    pub layout_flags: u8,
}

impl IndexParams {
    /// Uncompressed size of one full chunk in bytes (`None` on overflow).
    pub fn chunk_bytes(&self) -> Option<u64> {
        self.chunk_dims
            .iter()
            .try_fold(self.element_size as u64, |a, &d| a.checked_mul(d))
    }
}

/// A chunk index.
pub trait ChunkIndex: Send + Sync + std::fmt::Debug {
    /// Find the chunk whose coordinates, in chunk units, are `coords` (one per dimension).
    /// `Ok(None)` means the chunk was never written (read as fill value).
    fn lookup(&self, coords: &[u64]) -> Result<Option<ChunkRecord>>;
}

/// Open the index described by a layout message.
pub fn open(spec: &ChunkIndexSpec, params: IndexParams) -> Result<Box<dyn ChunkIndex>> {
    let _ = (spec, params);
    Err(crate::error::Error::unsupported("chunk index", "not implemented yet"))
}
