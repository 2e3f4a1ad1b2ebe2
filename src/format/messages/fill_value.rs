//! Fill value messages: old (0x0004) and new (0x0005, versions 1-3).

use crate::error::Result;
use crate::io::Sizes;

/// When storage space is allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocTime {
    Early,
    Late,
    Incremental,
    /// Not stated (old message, or reserved value).
    Default,
}

/// When the fill value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillTime {
    OnAlloc,
    Never,
    IfSet,
}

/// A fill value message (either kind).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FillValue {
    pub alloc_time: AllocTime,
    pub fill_time: FillTime,
    /// False when the fill value is "undefined" (reads as zeros for us).
    pub defined: bool,
    /// The user-defined fill value bytes (one element), if any.
    pub value: Option<Vec<u8>>,
}

impl FillValue {
    /// New fill value message (0x0005).
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<FillValue> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("fill value", "not implemented yet"))
    }

    /// Old fill value message (0x0004): size then value.
    pub fn parse_old(data: &[u8], addr: u64) -> Result<FillValue> {
        let _ = (data, addr);
        Err(crate::error::Error::unsupported("fill value (old)", "not implemented yet"))
    }
}
