//! Dataspace message (0x0001), versions 1 and 2 (spec "IV.A.2.b").
//!
//! Both versions store a rank, a flags byte (bit 0: maximum dimensions follow the current
//! ones) and `rank` current sizes of "Size of Lengths" bytes. Version 1 has five reserved
//! bytes and may carry permutation indices (flag bit 1, never implemented by any writer; read
//! past and ignored); rank 0 means scalar. Version 2 adds a type byte (scalar, simple, null).
//! A maximum size of all one bits is the "unlimited" marker, reported as [`UNLIMITED`].

use crate::error::{Error, Result};
use crate::format::limits::MAX_RANK;
use crate::io::{Cursor, Sizes};

/// Kind of dataspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataspaceKind {
    Scalar,
    Simple,
    Null,
}

/// A dataspace (spec "IV.A.2.b"): rank, current and maximum dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dataspace {
    pub kind: DataspaceKind,
    /// Current dimensions (empty for scalar and null).
    pub dims: Vec<u64>,
    /// Maximum dimensions if stored; `u64::MAX` means unlimited.
    pub max_dims: Option<Vec<u64>>,
}

/// Marker for an unlimited maximum dimension.
pub const UNLIMITED: u64 = u64::MAX;

/// Flag bit 0: maximum dimensions are stored.
const FLAG_MAX_DIMS: u8 = 0x01;
/// Flag bit 1 (version 1 only): permutation indices are stored.
const FLAG_PERMUTATION: u8 = 0x02;

impl Dataspace {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<Dataspace> {
        let mut c = Cursor::new(data, addr, "dataspace message");
        let version = c.u8()?;
        let rank = c.u8()? as usize;
        let flags = c.u8()?;
        if rank > MAX_RANK {
            return Err(Error::limit(
                "dataspace message",
                addr,
                format!("rank {rank} exceeds {MAX_RANK}"),
            ));
        }
        let kind = match version {
            1 => {
                c.skip(5)?; // reserved
                if rank == 0 {
                    DataspaceKind::Scalar
                } else {
                    DataspaceKind::Simple
                }
            }
            2 => match c.u8()? {
                0 => DataspaceKind::Scalar,
                1 => DataspaceKind::Simple,
                2 => DataspaceKind::Null,
                t => return Err(c.corrupt(format!("dataspace type {t}"))),
            },
            v => return Err(c.corrupt(format!("dataspace version {v}"))),
        };
        if kind != DataspaceKind::Simple && rank != 0 {
            return Err(c.corrupt(format!("{kind:?} dataspace with rank {rank}")));
        }
        let dims = lengths(&mut c, rank, sizes)?;
        let max_dims = if flags & FLAG_MAX_DIMS != 0 {
            // "Unlimited" is all ones of the length width.
            let all_ones = match sizes.length {
                w @ 1..=8 => Some(u64::MAX >> (64 - 8 * w as u32)),
                _ => None,
            };
            let mut max = lengths(&mut c, rank, sizes)?;
            for m in &mut max {
                if Some(*m) == all_ones {
                    *m = UNLIMITED;
                }
            }
            Some(max)
        } else {
            None
        };
        if version == 1 && flags & FLAG_PERMUTATION != 0 {
            lengths(&mut c, rank, sizes)?;
        }
        Ok(Dataspace {
            kind,
            dims,
            max_dims,
        })
    }

    /// Number of elements: 1 for scalar, 0 for null, the product for simple; `None` on overflow.
    pub fn npoints(&self) -> Option<u64> {
        match self.kind {
            DataspaceKind::Null => Some(0),
            DataspaceKind::Scalar => Some(1),
            DataspaceKind::Simple => self.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)),
        }
    }
}

/// `n` values of "Size of Lengths" bytes (`n` is at most [`MAX_RANK`]).
fn lengths(c: &mut Cursor<'_>, n: usize, sizes: Sizes) -> Result<Vec<u64>> {
    (0..n).map(|_| c.length(sizes)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::io::testutil::hex;

    fn parse(b: &[u8]) -> Result<Dataspace> {
        Dataspace::parse(b, 0x40, Sizes::DEFAULT)
    }

    #[test]
    fn real_v1_simple_with_max() {
        // h5py earliest: shape (10,), maxshape (10,).
        let s = parse(&hex("01010100000000000a000000000000000a00000000000000")).unwrap();
        assert_eq!(s.kind, DataspaceKind::Simple);
        assert_eq!(s.dims, vec![10]);
        assert_eq!(s.max_dims, Some(vec![10]));
        assert_eq!(s.npoints(), Some(10));
    }

    #[test]
    fn real_v2_unlimited() {
        // h5py latest: shape (3, 4), maxshape (None, 4).
        let s = parse(&hex(
            "0202010103000000000000000400000000000000ffffffffffffffff0400000000000000",
        ))
        .unwrap();
        assert_eq!(s.dims, vec![3, 4]);
        assert_eq!(s.max_dims, Some(vec![UNLIMITED, 4]));
    }

    #[test]
    fn v2_scalar_and_null() {
        let s = parse(&[2, 0, 0, 0]).unwrap();
        assert_eq!((s.kind, s.npoints()), (DataspaceKind::Scalar, Some(1)));
        let s = parse(&[2, 0, 0, 2]).unwrap();
        assert_eq!((s.kind, s.npoints()), (DataspaceKind::Null, Some(0)));
        assert!(parse(&[2, 0, 0, 3]).is_err());
        assert!(parse(&[2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]).is_err()); // scalar of rank 1
    }

    #[test]
    fn v1_scalar_permutation_and_small_lengths() {
        assert_eq!(
            parse(&[1, 0, 0, 0, 0, 0, 0, 0]).unwrap().kind,
            DataspaceKind::Scalar
        );
        // 4-byte lengths: all ones of the width is unlimited; permutation indices skipped.
        let sizes = Sizes {
            offset: 4,
            length: 4,
        };
        let mut b = vec![1, 1, 3, 0, 0, 0, 0, 0];
        b.extend_from_slice(&7u32.to_le_bytes());
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        let s = Dataspace::parse(&b, 0, sizes).unwrap();
        assert_eq!(s.max_dims, Some(vec![UNLIMITED]));
        b.truncate(b.len() - 1);
        assert!(matches!(
            Dataspace::parse(&b, 0, sizes),
            Err(Error::Truncated { .. })
        ));
    }

    #[test]
    fn hostile() {
        assert!(matches!(parse(&[2, 33, 0, 1]), Err(Error::Limit { .. })));
        assert!(matches!(parse(&[3, 0, 0, 0]), Err(Error::Corrupt { .. })));
        let s = parse(&hex(
            "020201010000000000000100000000000000010000000000000001",
        ));
        assert!(s.is_err()); // truncated second dimension
        let mut b = vec![2, 2, 0, 1];
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        b.extend_from_slice(&2u64.to_le_bytes());
        assert_eq!(parse(&b).unwrap().npoints(), None);
    }
}
