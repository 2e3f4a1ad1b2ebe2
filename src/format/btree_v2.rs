//! Version 2 B-trees (`BTHD`, `BTIN`, `BTLF`, spec "III.A.2"): records are returned raw, with
//! decoders for the record types h5mount uses (1-4 huge heap objects, 5/6 links, 7 SOHM,
//! 8/9 attributes, 10/11 chunks).

use crate::error::Result;
use crate::io::{Sizes, Storage};

/// A v2 B-tree header.
#[derive(Clone, Debug)]
pub struct BtreeV2Header {
    pub addr: u64,
    pub record_type: u8,
    pub node_size: u32,
    pub record_size: u16,
    pub depth: u16,
    pub root_addr: u64,
    pub root_records: u16,
    pub total_records: u64,
}

impl BtreeV2Header {
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<BtreeV2Header> {
        let _ = (storage, addr, sizes);
        Err(crate::error::Error::unsupported("v2 B-tree", "not implemented yet"))
    }
}

/// Call `f` with every record (raw bytes, `record_size` long) in key order; `f` returns
/// `false` to stop early. Bounded in depth and node count.
pub fn for_each_record(
    storage: &Storage,
    header: &BtreeV2Header,
    sizes: Sizes,
    f: &mut dyn FnMut(&[u8]) -> Result<bool>,
) -> Result<()> {
    let _ = (storage, header, sizes, f);
    Err(crate::error::Error::unsupported("v2 B-tree", "not implemented yet"))
}
