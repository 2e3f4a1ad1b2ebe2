//! Attribute info message (0x0015, spec "IV.A.2.v"): where an object keeps dense attributes.
//!
//! Layout: version 0, flags (bit 0 creation order tracked, bit 1 indexed), the 2-byte maximum
//! creation index when tracked, the fractal heap address, the v2 B-tree (type 8) address over
//! name hashes and, when indexed, the v2 B-tree (type 9) address over creation order.

use super::link_info::DenseInfo;
use crate::error::Result;
use crate::io::Sizes;

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
        let d = DenseInfo::parse(data, addr, sizes, "attribute info message", 2)?;
        Ok(AttributeInfo {
            track_order: d.track_order,
            index_order: d.index_order,
            // Read from two bytes, so it fits.
            max_creation_index: d.max_creation_index.map(|v| v as u16),
            heap_addr: d.heap_addr,
            name_btree_addr: d.name_btree_addr,
            order_btree_addr: d.order_btree_addr,
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
