//! Pure parsers of the on-disk structures of the HDF5 file format (specification version 4.0,
//! `H5.format.4.0.dox`). Nothing here caches or knows about datasets as a whole: each function
//! decodes one structure from bytes (or reads one structure through [`crate::io::Storage`]).

pub mod btree_v1;
pub mod btree_v2;
pub mod extensible_array;
pub mod fixed_array;
pub mod fractal_heap;
pub mod global_heap;
pub mod local_heap;
pub mod messages;
pub mod object_header;
pub mod superblock;
pub mod symbol_table;
pub mod vds;

/// Upper bounds that protect every walk from hostile files.
pub mod limits {
    /// Object header continuation blocks followed per header.
    pub const MAX_CONTINUATIONS: usize = 4096;
    /// Messages accepted in one object header.
    pub const MAX_MESSAGES: usize = 65536;
    /// Depth of any B-tree (v1 or v2) or heap indirect-block nesting.
    pub const MAX_TREE_DEPTH: usize = 64;
    /// Rank of a dataspace (the format stores it in one byte).
    pub const MAX_RANK: usize = 32;
    /// Nesting depth of datatypes (compound of array of compound ...).
    pub const MAX_TYPE_DEPTH: usize = 32;
}
