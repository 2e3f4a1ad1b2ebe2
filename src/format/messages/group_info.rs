//! Group info message (0x000A, spec "IV.A.2.k"): a new-style group's storage policy.
//!
//! Layout: version 0, flags; when bit 0 is set the link phase change values (maximum compact
//! links, minimum dense links, 2 bytes each); when bit 1 is set the estimated number of
//! entries and estimated link name length (2 bytes each). Nothing here is needed to read
//! links; it is decoded for completeness and inspection.

use crate::error::Result;
use crate::io::Cursor;

/// Flag bit 0: link phase change values are stored.
pub const PHASE_CHANGE: u8 = 0x01;
/// Flag bit 1: estimated entry information is stored.
pub const ESTIMATES: u8 = 0x02;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupInfo {
    pub max_compact: Option<u16>,
    pub min_dense: Option<u16>,
    pub est_entries: Option<u16>,
    pub est_name_len: Option<u16>,
}

impl GroupInfo {
    pub fn parse(data: &[u8], addr: u64) -> Result<GroupInfo> {
        let mut c = Cursor::new(data, addr, "group info message");
        super::expect_version(&mut c, &[0])?;
        let flags = c.u8()?;
        if flags & !(PHASE_CHANGE | ESTIMATES) != 0 {
            return Err(c.corrupt(format!("reserved flag bits set ({flags:#04x})")));
        }
        let mut g = GroupInfo::default();
        if flags & PHASE_CHANGE != 0 {
            g.max_compact = Some(c.u16()?);
            g.min_dense = Some(c.u16()?);
        }
        if flags & ESTIMATES != 0 {
            g.est_entries = Some(c.u16()?);
            g.est_name_len = Some(c.u16()?);
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(GroupInfo::parse(&[0, 0], 0).unwrap(), GroupInfo::default());
        let g = GroupInfo::parse(&[0, 3, 8, 0, 6, 0, 4, 0, 8, 0], 0).unwrap();
        assert_eq!(
            g,
            GroupInfo {
                max_compact: Some(8),
                min_dense: Some(6),
                est_entries: Some(4),
                est_name_len: Some(8)
            }
        );
        let g = GroupInfo::parse(&[0, 2, 4, 0, 8, 0], 0).unwrap();
        assert_eq!((g.max_compact, g.est_entries), (None, Some(4)));
        assert!(GroupInfo::parse(&[0, 1, 8, 0], 0).is_err());
        assert!(GroupInfo::parse(&[1, 0], 0).is_err());
    }
}
