//! Attribute info message (0x0015, spec "IV.A.2.v"): where an object keeps dense attributes.
//!
//! Layout: version 0, flags (bit 0 creation order tracked, bit 1 indexed), the 2-byte maximum
//! creation index when tracked, the fractal heap address, the v2 B-tree (type 8) address over
//! name hashes and, when indexed, the v2 B-tree (type 9) address over creation order.

use crate::error::Result;
use crate::io::{Cursor, Sizes};

/// Flag bit 0: creation order is tracked.
pub const TRACK_ORDER: u8 = 0x01;
/// Flag bit 1: creation order is indexed.
pub const INDEX_ORDER: u8 = 0x02;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttributeInfo {
    pub track_order: bool,
    pub index_order: bool,
    pub max_creation_index: Option<u16>,
    /// Fractal heap address, undefined when attributes are compact.
    pub heap_addr: u64,
    /// v2 B-tree (type 8) over attribute name hashes.
    pub name_btree_addr: u64,
    /// v2 B-tree (type 9) over creation order, when indexed.
    pub order_btree_addr: Option<u64>,
}

impl AttributeInfo {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<AttributeInfo> {
        let mut c = Cursor::new(data, addr, "attribute info message");
        super::expect_version(&mut c, &[0])?;
        let flags = c.u8()?;
        if flags & !(TRACK_ORDER | INDEX_ORDER) != 0 {
            return Err(c.corrupt(format!("reserved flag bits set ({flags:#04x})")));
        }
        let track_order = flags & TRACK_ORDER != 0;
        let index_order = flags & INDEX_ORDER != 0;
        let max_creation_index = if track_order { Some(c.u16()?) } else { None };
        let heap_addr = c.offset(sizes)?;
        let name_btree_addr = c.offset(sizes)?;
        let order_btree_addr = if index_order {
            Some(c.offset(sizes)?)
        } else {
            None
        };
        Ok(AttributeInfo {
            track_order,
            index_order,
            max_creation_index,
            heap_addr,
            name_btree_addr,
            order_btree_addr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::UNDEFINED_ADDR;

    #[test]
    fn tracked_and_indexed() {
        let mut d = vec![0, 3, 9, 0];
        d.extend_from_slice(&0x40u64.to_le_bytes());
        d.extend_from_slice(&0x80u64.to_le_bytes());
        d.extend_from_slice(&[0xff; 8]);
        let ai = AttributeInfo::parse(&d, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(ai.max_creation_index, Some(9));
        assert_eq!((ai.heap_addr, ai.name_btree_addr), (0x40, 0x80));
        assert_eq!(ai.order_btree_addr, Some(UNDEFINED_ADDR));
        assert!(AttributeInfo::parse(&d[..10], 0, Sizes::DEFAULT).is_err());
    }

    #[test]
    fn untracked() {
        let mut d = vec![0, 0];
        d.extend_from_slice(&[0xff; 16]);
        let ai = AttributeInfo::parse(&d, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(ai.max_creation_index, None);
        assert_eq!(ai.order_btree_addr, None);
        d[1] = 0x10;
        assert!(AttributeInfo::parse(&d, 0, Sizes::DEFAULT).is_err());
    }
}
