//! Link info message (0x0002, spec "IV.A.2.c"): where a new-style group keeps dense links.
//!
//! Layout: version 0, flags (bit 0 creation order tracked, bit 1 indexed), the 8-byte maximum
//! creation index when tracked, the fractal heap address, the v2 B-tree (type 5) address over
//! name hashes and, when indexed, the v2 B-tree (type 6) address over creation order. Both
//! first addresses are undefined while the group's links are compact (in its header).

use crate::error::Result;
use crate::io::{Cursor, Sizes};

/// Flag bit 0: creation order is tracked.
pub const TRACK_ORDER: u8 = 0x01;
/// Flag bit 1: creation order is indexed.
pub const INDEX_ORDER: u8 = 0x02;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkInfo {
    /// Creation order is tracked.
    pub track_order: bool,
    /// Creation order is indexed (a type-6 B-tree exists).
    pub index_order: bool,
    pub max_creation_index: Option<u64>,
    /// Fractal heap address, undefined when links are compact.
    pub heap_addr: u64,
    /// v2 B-tree (type 5) over link name hashes.
    pub name_btree_addr: u64,
    /// v2 B-tree (type 6) over creation order, when indexed.
    pub order_btree_addr: Option<u64>,
}

/// The fields link info and attribute info messages share: flags, optional maximum creation
/// index (`order_width` bytes: 8 for links, 2 for attributes), fractal heap, name index and
/// optional creation-order index.
pub(super) struct DenseInfo {
    pub track_order: bool,
    pub index_order: bool,
    pub max_creation_index: Option<u64>,
    pub heap_addr: u64,
    pub name_btree_addr: u64,
    pub order_btree_addr: Option<u64>,
}

impl DenseInfo {
    pub(super) fn parse(
        data: &[u8],
        addr: u64,
        sizes: Sizes,
        what: &'static str,
        order_width: usize,
    ) -> Result<DenseInfo> {
        let mut c = Cursor::new(data, addr, what);
        super::expect_version(&mut c, &[0])?;
        let flags = c.u8()?;
        if flags & !(TRACK_ORDER | INDEX_ORDER) != 0 {
            return Err(c.corrupt(format!("reserved flag bits set ({flags:#04x})")));
        }
        let track_order = flags & TRACK_ORDER != 0;
        let index_order = flags & INDEX_ORDER != 0;
        let max_creation_index = if track_order {
            Some(c.uint(order_width)?)
        } else {
            None
        };
        let heap_addr = c.offset(sizes)?;
        let name_btree_addr = c.offset(sizes)?;
        let order_btree_addr = if index_order {
            Some(c.offset(sizes)?)
        } else {
            None
        };
        Ok(DenseInfo {
            track_order,
            index_order,
            max_creation_index,
            heap_addr,
            name_btree_addr,
            order_btree_addr,
        })
    }
}

impl LinkInfo {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<LinkInfo> {
        let d = DenseInfo::parse(data, addr, sizes, "link info message", 8)?;
        Ok(LinkInfo {
            track_order: d.track_order,
            index_order: d.index_order,
            max_creation_index: d.max_creation_index,
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
    fn compact_untracked() {
        let mut d = vec![0, 0];
        d.extend_from_slice(&[0xff; 16]);
        let li = LinkInfo::parse(&d, 0, Sizes::DEFAULT).unwrap();
        assert!(!li.track_order && !li.index_order);
        assert_eq!(li.heap_addr, UNDEFINED_ADDR);
        assert_eq!(li.name_btree_addr, UNDEFINED_ADDR);
        assert_eq!(li.order_btree_addr, None);
    }

    #[test]
    fn dense_indexed_4byte_offsets() {
        let mut d = vec![0, 3];
        d.extend_from_slice(&12u64.to_le_bytes());
        for a in [0x100u32, 0x200, 0x300] {
            d.extend_from_slice(&a.to_le_bytes());
        }
        let s4 = Sizes {
            offset: 4,
            length: 8,
        };
        let li = LinkInfo::parse(&d, 0, s4).unwrap();
        assert_eq!(li.max_creation_index, Some(12));
        assert_eq!(
            (li.heap_addr, li.name_btree_addr, li.order_btree_addr),
            (0x100, 0x200, Some(0x300))
        );
        // Truncated and bad version.
        assert!(LinkInfo::parse(&d[..d.len() - 1], 0, s4).is_err());
        d[0] = 1;
        assert!(LinkInfo::parse(&d, 0, s4).is_err());
    }
}
