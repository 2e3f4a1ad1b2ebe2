//! Modification time messages: old (0x000E, ASCII "YYYYMMDDhhmmss") and new (0x0012).

use crate::error::Result;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModificationTime {
    /// Seconds since the Unix epoch (UTC).
    pub seconds: u64,
}

impl ModificationTime {
    pub fn parse(data: &[u8], addr: u64) -> Result<ModificationTime> {
        let _ = (data, addr);
        Err(crate::error::Error::unsupported("modification time", "not implemented yet"))
    }

    pub fn parse_old(data: &[u8], addr: u64) -> Result<ModificationTime> {
        let _ = (data, addr);
        Err(crate::error::Error::unsupported("modification time (old)", "not implemented yet"))
    }
}
