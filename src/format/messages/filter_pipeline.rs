//! Filter pipeline message (0x000B), versions 1 and 2.

use crate::error::Result;
use crate::io::Sizes;

/// Filter flag bit 0: the filter is optional (may be skipped, recorded in the chunk's mask).
pub const FILTER_OPTIONAL: u16 = 0x0001;

/// One filter in the pipeline, in the order applied when writing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterSpec {
    pub id: u16,
    pub flags: u16,
    /// Name stored in the message, if any.
    pub name: Option<String>,
    /// Client data ("cd_values").
    pub client_data: Vec<u32>,
}

/// The filter pipeline.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FilterPipeline {
    pub filters: Vec<FilterSpec>,
}

impl FilterPipeline {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<FilterPipeline> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("filter pipeline", "not implemented yet"))
    }
}
