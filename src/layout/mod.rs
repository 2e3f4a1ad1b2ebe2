//! The layout engine: a byte range of a dataset's virtual file (elements in C order, file
//! datatype) translated into reads of compact, contiguous, external or chunked storage.
//!
//! For chunked data, `read_at` walks the chunks the range touches, fetches each decoded chunk
//! through the shared [`crate::cache::ChunkCache`], and copies contiguous row runs.

pub mod chunk_index;
pub mod chunked;
pub mod compact;
pub mod contiguous;
pub mod external;

use std::path::PathBuf;
use std::sync::Arc;

use crate::cache::ChunkCache;
use crate::error::Result;
use crate::format::messages::filter_pipeline::FilterPipeline;
use crate::format::messages::layout::Layout;
use crate::io::{Sizes, Storage};

/// One segment of external storage, with its file name already resolved to a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalSegment {
    pub path: PathBuf,
    /// Offset in the external file.
    pub offset: u64,
    /// Bytes of the dataset this segment holds.
    pub size: u64,
}

/// Everything the layout engine needs to serve a dataset.
#[derive(Clone, Debug)]
pub struct LayoutParams {
    pub storage: Storage,
    pub sizes: Sizes,
    pub layout: Layout,
    /// Current dimensions (empty for scalar).
    pub dims: Vec<u64>,
    /// Maximum dimensions (`u64::MAX` unlimited); `dims` when not stored.
    pub max_dims: Vec<u64>,
    /// Number of elements (1 for scalar, 0 for null dataspace).
    pub npoints: u64,
    pub element_size: u32,
    /// One element of fill value; `None` means zeros.
    pub fill: Option<Vec<u8>>,
    pub filters: FilterPipeline,
    /// Resolved external storage segments, if the dataset has an external file list.
    pub external: Option<Vec<ExternalSegment>>,
    /// The shared chunk cache.
    pub cache: Arc<ChunkCache>,
    /// Unique id of the dataset within the cache (its object header address).
    pub cache_id: u64,
}

/// Serves byte ranges of one dataset.
#[derive(Debug)]
pub struct DataReader {
    len: u64,
}

impl DataReader {
    /// Prepare a reader. Cheap: no chunk index is walked.
    pub fn new(params: LayoutParams) -> Result<DataReader> {
        let _ = params;
        Err(crate::error::Error::unsupported("layout", "not implemented yet"))
    }

    /// Size of the virtual file: npoints × element size.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the dataset holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fill `buf` with the bytes at `offset`; returns the number of bytes written (short only
    /// at the end of the data).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let _ = (offset, buf);
        Err(crate::error::Error::unsupported("layout", "not implemented yet"))
    }
}
