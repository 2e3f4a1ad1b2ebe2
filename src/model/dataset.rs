//! Datasets: the description (type, shape, layout, filters, fill) and byte-range reads through
//! the layout engine.

use crate::error::Result;
use crate::format::messages::datatype::Datatype;
use crate::format::messages::filter_pipeline::FilterSpec;
use crate::layout::DataReader;

/// What `inspect` and xattrs show of a dataset.
#[derive(Clone, Debug)]
pub struct DatasetInfo {
    pub dtype: Datatype,
    /// Shape (empty for scalar).
    pub shape: Vec<u64>,
    /// Maximum shape (`u64::MAX` = unlimited), if stored.
    pub max_shape: Option<Vec<u64>>,
    /// True for a null dataspace.
    pub null: bool,
    /// "compact", "contiguous", "chunked", "virtual", or "external".
    pub layout: &'static str,
    pub chunk_shape: Option<Vec<u64>>,
    /// "btree-v1", "single", "implicit", "fixed-array", "extensible-array", "btree-v2".
    pub chunk_index: Option<&'static str>,
    pub filters: Vec<FilterSpec>,
    /// User-defined fill value bytes, if any.
    pub fill_value: Option<Vec<u8>>,
}

/// An open dataset.
#[derive(Debug)]
pub struct Dataset {
    pub info: DatasetInfo,
    reader: Result<DataReader, String>,
}

impl Dataset {
    /// Size of the dataset's byte image.
    pub fn len(&self) -> u64 {
        self.reader.as_ref().map(|r| r.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Read bytes at `offset` of the byte image.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        match &self.reader {
            Ok(r) => r.read_at(offset, buf),
            Err(e) => Err(crate::error::Error::unsupported("dataset", e.clone())),
        }
    }
}
