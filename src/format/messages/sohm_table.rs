//! Shared message table message (0x000F, spec "IV.A.2.p", in the superblock extension): where
//! the SOHM master table lives. The table itself (`SMTB`) and its indexes (`SMLI` lists or v2
//! B-tree type 7) map message types to a fractal heap of shared bodies.
//!
//! Layout: version 0, the master table address, the number of indexes (1 byte).

use crate::error::Result;
use crate::io::{Cursor, Sizes};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SohmTable {
    pub table_addr: u64,
    pub nindexes: u8,
}

impl SohmTable {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<SohmTable> {
        let mut c = Cursor::new(data, addr, "shared message table message");
        super::expect_version(&mut c, &[0])?;
        Ok(SohmTable {
            table_addr: c.offset(sizes)?,
            nindexes: c.u8()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        let mut d = vec![0];
        d.extend_from_slice(&0x3c0u64.to_le_bytes());
        d.push(2);
        let t = SohmTable::parse(&d, 0, Sizes::DEFAULT).unwrap();
        assert_eq!((t.table_addr, t.nindexes), (0x3c0, 2));
        assert!(SohmTable::parse(&d[..9], 0, Sizes::DEFAULT).is_err());
        d[0] = 1;
        assert!(SohmTable::parse(&d, 0, Sizes::DEFAULT).is_err());
    }
}
