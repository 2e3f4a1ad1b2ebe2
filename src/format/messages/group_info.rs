//! Group info message (0x000A).

use crate::error::Result;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupInfo {
    pub max_compact: Option<u16>,
    pub min_dense: Option<u16>,
    pub est_entries: Option<u16>,
    pub est_name_len: Option<u16>,
}

impl GroupInfo {
    pub fn parse(data: &[u8], addr: u64) -> Result<GroupInfo> {
        let _ = (data, addr);
        Err(crate::error::Error::unsupported("group info", "not implemented yet"))
    }
}
