//! Superblock versions 0-3 (spec: "Level 0A - Format Signature and Superblock") and the
//! superblock extension.
//!
//! The superblock is searched for at 0, 512, 1024, 2048, ... (a user block precedes it).
//! Addresses in the file are relative to the base address; when the superblock is found at an
//! offset different from the stored base address, the found offset wins (FORMAT-NOTES #8).

use crate::error::Result;
use crate::io::{Sizes, Storage};

/// The decoded superblock.
#[derive(Clone, Debug)]
pub struct Superblock {
    /// Superblock version (0-3).
    pub version: u8,
    /// Widths of addresses and lengths.
    pub sizes: Sizes,
    /// Absolute file offset the superblock was found at; all addresses are relative to it.
    pub base_addr: u64,
    /// Relative end-of-file address as stored.
    pub eof_addr: u64,
    /// Object header address of the root group.
    pub root_addr: u64,
    /// Superblock extension object header address, if any (v2/v3).
    pub extension_addr: Option<u64>,
    /// Group leaf node K (symbol table nodes hold up to 2K entries); v0/v1.
    pub group_leaf_k: u16,
    /// Group internal node K; v0/v1.
    pub group_internal_k: u16,
    /// Indexed-storage (chunk B-tree) internal node K; 32 unless stored (v1) or set in the
    /// extension's B-tree 'K' values message.
    pub chunk_btree_k: u16,
    /// Root symbol table entry scratch pad (v0/v1): cached symbol table B-tree and local heap.
    pub root_symbol_table: Option<(u64, u64)>,
    /// File consistency flags.
    pub flags: u32,
}

impl Superblock {
    /// Search for the signature and decode the superblock. Verifies the v2/v3 checksum.
    /// The returned [`Storage`] has its base set to [`Superblock::base_addr`].
    pub fn locate(storage: &Storage) -> Result<(Superblock, Storage)> {
        let _ = storage;
        Err(crate::error::Error::unsupported("superblock", "not implemented yet"))
    }
}
