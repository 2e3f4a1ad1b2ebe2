//! The object model: an open HDF5 file, its groups, links, datasets and attributes. This is the
//! library API that `fs` and `inspect` use; it knows nothing about FUSE.

pub mod attribute;
pub mod dataset;
pub mod file;
pub mod group;
pub mod links;
mod pieces;
pub mod resolver;
mod sohm;
pub mod value;
pub mod virtual_ds;

pub use attribute::{AttrResult, Attribute, RefusedAttribute};
pub use dataset::{ChunkIndexKind, Dataset, DatasetInfo, LayoutKind};
pub use file::{File, OpenOptions};
pub use group::{Link, LinkTarget};
pub use links::{LinkRef, Links};
pub use pieces::Piece;
pub use resolver::{FileIdx, Resolver, ResolverOptions};

/// Identity of an object: the relative address of its object header. Hard links to one object
/// share it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId(pub u64);

/// What an object header describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    Group,
    Dataset,
    /// A committed (named) datatype.
    NamedDatatype,
    /// None of the above (no recognizable messages).
    Unknown,
}
