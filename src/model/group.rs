//! Groups and their links: one iterator over every storage kind (symbol table, compact link
//! messages, dense links in a fractal heap indexed by v2 B-trees).

use super::ObjectId;

/// Where a link points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkTarget {
    Hard(ObjectId),
    /// Soft link path, as stored.
    Soft(String),
    /// External link: file name and object path.
    External { file: String, path: String },
    /// User-defined link type, not followed.
    UserDefined(u8),
}

/// A link in a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub name: String,
    /// Creation order, where the group tracks it.
    pub creation_order: Option<u64>,
    pub target: LinkTarget,
}
