//! Link message (0x0006).

use crate::error::Result;
use crate::io::Sizes;

/// Where a link points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkTarget {
    /// Object header address.
    Hard(u64),
    /// Path, absolute or relative to the link's group.
    Soft(String),
    /// External link: file name and object path in that file.
    External { file: String, path: String },
    /// User-defined link type (64-255) with its raw data: reported, not followed.
    UserDefined { link_type: u8, data: Vec<u8> },
}

/// A link message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub name: String,
    pub creation_order: Option<u64>,
    pub target: LinkTarget,
}

impl Link {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<Link> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("link", "not implemented yet"))
    }
}
