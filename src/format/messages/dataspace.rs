//! Dataspace message (0x0001), versions 1 and 2.

use crate::error::Result;
use crate::io::Sizes;

/// Kind of dataspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataspaceKind {
    Scalar,
    Simple,
    Null,
}

/// A dataspace: rank, current and maximum dimensions.
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

impl Dataspace {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<Dataspace> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("dataspace", "not implemented yet"))
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
