//! Shared message table message (0x000F, in the superblock extension): where the SOHM master
//! table lives. The table itself (`SMTB`) and its indexes (`SMLI` lists or v2 B-tree type 7)
//! map message types to a fractal heap of shared bodies.

use crate::error::Result;
use crate::io::Sizes;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SohmTable {
    pub table_addr: u64,
    pub nindexes: u8,
}

impl SohmTable {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<SohmTable> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("shared message table", "not implemented yet"))
    }
}
