//! Superblock versions 0-3 (spec: "II.A. Level 0A - Format Signature and Superblock") and the
//! superblock extension ("II.C").
//!
//! The superblock is searched for at 0, 512, 1024, 2048, ... (a user block precedes it).
//! Addresses in the file are relative to the base address; when the superblock is found at an
//! offset different from the stored base address, the found offset wins, as
//! libhdf5 does for files whose user block was added or removed after writing.
//!
//! * v0/v1: fixed fields, the B-tree 'K' values, four addresses and the root group's symbol
//!   table entry (whose scratch pad caches the root B-tree and local heap).
//! * v2/v3: widths, four addresses (base, extension, EOF, root object header) and a lookup3
//!   checksum. The extension is an object header whose messages hold what v0/v1 stored inline
//!   (B-tree 'K' values, 0x0013) plus the shared-message table (0x000F).

use super::messages::sohm_table::SohmTable;
use super::messages::types;
use super::object_header::ObjectHeader;
use crate::error::{Error, Result};
use crate::io::checksum::verify_lookup3;
use crate::io::{Cursor, Sizes, Storage, UNDEFINED_ADDR};

/// The 8-byte format signature: `\x89HDF\r\n\x1a\n`.
pub const SIGNATURE: [u8; 8] = [0x89, b'H', b'D', b'F', b'\r', b'\n', 0x1a, b'\n'];

/// First non-zero offset searched; then every power of two above it.
const FIRST_USER_BLOCK_OFFSET: u64 = 512;

/// libhdf5's defaults for the B-tree 'K' values (`H5F_CRT_BTREE_RANK_DEF`,
/// `H5F_CRT_SYM_LEAF_DEF`), used when a v2/v3 file has no B-tree 'K' values message.
const DEFAULT_GROUP_LEAF_K: u16 = 4;
const DEFAULT_GROUP_INTERNAL_K: u16 = 16;
pub const DEFAULT_CHUNK_BTREE_K: u16 = 32;

/// Largest superblock: v0/v1 with 8-byte offsets is 8 + 16 + 4 + 4 × 8 + (2 × 8 + 24) = 96
/// bytes (v1 adds 4); read a little more so the decoder, not the read, reports truncation.
const MAX_SUPERBLOCK_LEN: u64 = 128;

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
    /// Base address as stored in the file (may differ from [`Superblock::base_addr`]).
    pub stored_base_addr: u64,
    /// The shared object header message table, from the superblock extension (0x000F).
    pub sohm_table: Option<SohmTable>,
    /// Driver information block address (v0/v1), if any.
    pub driver_info_addr: Option<u64>,
    /// The page size of a file written with paged aggregation (its metadata is in pages of
    /// this size), from the extension's file space info message.
    pub fs_page_size: Option<u64>,
}

/// B-tree 'K' values message (0x0013, spec "IV.A.2.t"), found in the superblock extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BtreeKValues {
    pub chunk_internal_k: u16,
    pub group_internal_k: u16,
    pub group_leaf_k: u16,
}

impl BtreeKValues {
    /// Decode the message body: version 0, then three 2-byte K values.
    pub fn parse(data: &[u8], addr: u64) -> Result<BtreeKValues> {
        let mut c = Cursor::new(data, addr, "B-tree 'K' values message");
        let version = c.u8()?;
        if version != 0 {
            return Err(c.corrupt(format!("unknown version {version}")));
        }
        Ok(BtreeKValues {
            chunk_internal_k: c.u16()?,
            group_internal_k: c.u16()?,
            group_leaf_k: c.u16()?,
        })
    }
}

impl Superblock {
    /// Search for the signature and decode the superblock. Verifies the v2/v3 checksum.
    /// The returned [`Storage`] has its base set to [`Superblock::base_addr`].
    pub fn locate(storage: &Storage) -> Result<(Superblock, Storage)> {
        let file_len = storage.file_len();
        let at_zero = storage.with_base(0);
        let mut offset = 0u64;
        loop {
            if offset.checked_add(8).is_none_or(|end| end > file_len) {
                break;
            }
            let mut sig = [0u8; 8];
            at_zero.read_at(offset, &mut sig, "superblock signature")?;
            if sig == SIGNATURE {
                let bytes = at_zero.read_up_to(offset, MAX_SUPERBLOCK_LEN, "superblock")?;
                let mut sb = Superblock::decode(&bytes, offset)?;
                let based = storage.with_base(offset);
                if let Some(addr) = sb.driver_info_addr {
                    let mut block = [0u8; 16];
                    based.read_at(addr, &mut block, "driver information block")?;
                    // Version (1), reserved (3), size (4), then the driver identification.
                    check_driver(&block[8..16])?;
                }
                sb.read_extension(&based)?;
                return Ok((sb, based));
            }
            offset = match offset {
                0 => FIRST_USER_BLOCK_OFFSET,
                o => match o.checked_mul(2) {
                    Some(next) => next,
                    None => break,
                },
            };
        }
        Err(Error::corrupt(
            "superblock",
            0,
            "HDF5 signature not found (not an HDF5 file)",
        ))
    }

    /// Decode a superblock from `bytes`, which start with the signature found at absolute
    /// offset `found_at`. The superblock extension is not read.
    pub fn decode(bytes: &[u8], found_at: u64) -> Result<Superblock> {
        let mut c = Cursor::new(bytes, found_at, "superblock");
        c.skip(SIGNATURE.len())?;
        let version = c.u8()?;
        match version {
            0 | 1 => Self::decode_v0_v1(c, version, found_at),
            2 | 3 => Self::decode_v2_v3(c, version, found_at),
            v => Err(Error::unsupported(
                "superblock",
                format!("version {v} at {found_at:#x}"),
            )),
        }
    }

    fn decode_v0_v1(mut c: Cursor<'_>, version: u8, found_at: u64) -> Result<Superblock> {
        // Versions of free space storage, root symbol table entry, reserved, shared header
        // message format: not needed to read the file.
        c.skip(4)?;
        let sizes = read_sizes(&mut c, found_at)?;
        c.skip(1)?; // reserved
        let group_leaf_k = c.u16()?;
        let group_internal_k = c.u16()?;
        let flags = c.u32()?;
        let chunk_btree_k = if version == 1 {
            let k = c.u16()?;
            c.skip(2)?; // reserved
            k
        } else {
            DEFAULT_CHUNK_BTREE_K
        };
        let stored_base_addr = c.offset(sizes)?;
        let _free_space_addr = c.offset(sizes)?;
        let eof_addr = c.offset(sizes)?;
        let driver_info_addr = c.offset(sizes)?;
        // Root group symbol table entry (spec "III.C"): link name offset, object header
        // address, cache type, reserved, 16-byte scratch pad.
        let _name_offset = c.offset(sizes)?;
        let root_addr = c.offset(sizes)?;
        let cache_type = c.u32()?;
        c.skip(4)?;
        let scratch = c.sub(16)?;
        let root_symbol_table = if cache_type == 1 {
            let mut s = scratch;
            Some((s.offset(sizes)?, s.offset(sizes)?))
        } else {
            None
        };
        if root_addr == UNDEFINED_ADDR {
            return Err(c.corrupt("root group object header address is undefined"));
        }
        Ok(Superblock {
            version,
            sizes,
            base_addr: found_at,
            eof_addr,
            root_addr,
            extension_addr: None,
            group_leaf_k,
            group_internal_k,
            chunk_btree_k,
            root_symbol_table,
            flags,
            stored_base_addr,
            sohm_table: None,
            fs_page_size: None,
            driver_info_addr: (driver_info_addr != UNDEFINED_ADDR).then_some(driver_info_addr),
        })
    }

    fn decode_v2_v3(mut c: Cursor<'_>, version: u8, found_at: u64) -> Result<Superblock> {
        let sizes = read_sizes(&mut c, found_at)?;
        let flags = c.u8()? as u32;
        let stored_base_addr = c.offset(sizes)?;
        let extension_addr = c.offset(sizes)?;
        let eof_addr = c.offset(sizes)?;
        let root_addr = c.offset(sizes)?;
        let end = c.pos();
        c.skip(4)?;
        let block = c.data().get(..end + 4).ok_or_else(|| c.truncated())?;
        if !verify_lookup3(block) {
            return Err(Error::Checksum {
                what: "superblock",
                addr: found_at,
            });
        }
        if root_addr == UNDEFINED_ADDR {
            return Err(c.corrupt("root group object header address is undefined"));
        }
        Ok(Superblock {
            version,
            sizes,
            base_addr: found_at,
            eof_addr,
            root_addr,
            extension_addr: (extension_addr != UNDEFINED_ADDR).then_some(extension_addr),
            group_leaf_k: DEFAULT_GROUP_LEAF_K,
            group_internal_k: DEFAULT_GROUP_INTERNAL_K,
            chunk_btree_k: DEFAULT_CHUNK_BTREE_K,
            root_symbol_table: None,
            flags,
            stored_base_addr,
            sohm_table: None,
            fs_page_size: None,
            driver_info_addr: None,
        })
    }

    /// Read the superblock extension (if any) through `storage` (already based) and apply its
    /// B-tree 'K' values and shared message table.
    pub fn read_extension(&mut self, storage: &Storage) -> Result<()> {
        let Some(addr) = self.extension_addr else {
            return Ok(());
        };
        let header = ObjectHeader::read(storage, addr, self.sizes)?;
        if let Some(m) = header.first(types::BTREE_K) {
            let k = BtreeKValues::parse(&m.data, m.addr)?;
            self.chunk_btree_k = k.chunk_internal_k;
            self.group_internal_k = k.group_internal_k;
            self.group_leaf_k = k.group_leaf_k;
        }
        if let Some(m) = header.first(types::DRIVER_INFO) {
            // Driver info message (0x0014): version (1), then the driver identification.
            check_driver(m.data.get(1..9).ok_or(Error::Truncated {
                what: "driver info message",
                addr: m.addr,
                offset: 1,
                need: 8,
                have: m.data.len().saturating_sub(1) as u64,
            })?)?;
        }
        if let Some(m) = header.first(types::FSINFO) {
            self.fs_page_size = file_space_page_size(&m.data, self.sizes);
        }
        if let Some(m) = header.first(types::SOHM_TABLE) {
            self.sohm_table = Some(SohmTable::parse(&m.data, m.addr, self.sizes)?);
        }
        Ok(())
    }
}

/// The page size of a file space info message (0x0017) whose strategy is paged
/// aggregation: version 1 holds the version, the strategy (1: paged), whether free space
/// persists, the free-space section threshold (a length), then the page size (a length).
/// Anything else (version 0, another strategy, a size that is not a power of two from 512
/// to 1 GiB) is no page size: the hint is only an optimisation.
fn file_space_page_size(data: &[u8], sizes: Sizes) -> Option<u64> {
    let mut c = Cursor::new(data, 0, "file space info message");
    let (version, strategy) = (c.u8().ok()?, c.u8().ok()?);
    if version != 1 || strategy != 1 {
        return None;
    }
    c.u8().ok()?;
    c.length(sizes).ok()?;
    let page = c.length(sizes).ok()?;
    (page.is_power_of_two() && (512..=1 << 30).contains(&page)).then_some(page)
}

/// Refuse files whose driver spreads the address space over several files (the family and
/// multi drivers, identified as `NCSAfami` and `NCSAmult`): one file holds only part of the
/// data. Other identifiers (none are written by the default driver) are ignored.
fn check_driver(id: &[u8]) -> Result<()> {
    match id {
        b"NCSAfami" | b"NCSAmult" => Err(Error::unsupported(
            "file driver",
            format!(
                "{} (the file is one member of a multi-file set)",
                String::from_utf8_lossy(id)
            ),
        )),
        _ => Ok(()),
    }
}

/// Size of Offsets and Size of Lengths: only 2, 4 and 8 are accepted (the cursor reads up to
/// 8-byte integers; libhdf5 itself accepts only these widths in practice).
fn read_sizes(c: &mut Cursor<'_>, found_at: u64) -> Result<Sizes> {
    let offset = c.u8()?;
    let length = c.u8()?;
    for (name, w) in [("size of offsets", offset), ("size of lengths", length)] {
        if !matches!(w, 2 | 4 | 8) {
            return Err(Error::corrupt(
                "superblock",
                found_at,
                format!("{name} is {w}; only 2, 4 and 8 are supported"),
            ));
        }
    }
    Ok(Sizes { offset, length })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_size_of_a_file_written_with_paged_aggregation() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/fixtures");
        let paged = Storage::open(&dir.join("paged/paged.h5")).unwrap();
        assert_eq!(
            Superblock::locate(&paged).unwrap().0.fs_page_size,
            Some(256 << 10)
        );
        let plain = Storage::open(&dir.join("data/chunked_many_latest.h5")).unwrap();
        assert_eq!(Superblock::locate(&plain).unwrap().0.fs_page_size, None);
        let sizes = Sizes {
            offset: 8,
            length: 8,
        };
        // Version 0, another strategy, a page size that is not a power of two: none.
        let msg = |v: u8, strategy: u8, page: u64| {
            let mut m = vec![v, strategy, 0];
            m.extend_from_slice(&1u64.to_le_bytes());
            m.extend_from_slice(&page.to_le_bytes());
            m
        };
        assert_eq!(file_space_page_size(&msg(1, 1, 4096), sizes), Some(4096));
        assert_eq!(file_space_page_size(&msg(0, 1, 4096), sizes), None);
        assert_eq!(file_space_page_size(&msg(1, 0, 4096), sizes), None);
        assert_eq!(file_space_page_size(&msg(1, 1, 5000), sizes), None);
        assert_eq!(file_space_page_size(&msg(1, 1, 4096)[..10], sizes), None);
    }
    use crate::format::object_header::testutil::{seal, v2_header, v2_msg};
    use crate::io::testutil::memory_storage;

    /// A v0 (or v1) superblock with 8-byte widths whose stored base is `base`.
    fn v0(version: u8, base: u64, root: u64) -> Vec<u8> {
        let mut v = SIGNATURE.to_vec();
        v.extend_from_slice(&[version, 0, 0, 0, 0, 8, 8, 0]);
        v.extend_from_slice(&4u16.to_le_bytes());
        v.extend_from_slice(&16u16.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        if version == 1 {
            v.extend_from_slice(&[64, 0, 0, 0]);
        }
        for a in [base, u64::MAX, 0x1000, u64::MAX, 0, root] {
            v.extend_from_slice(&a.to_le_bytes());
        }
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&0x88u64.to_le_bytes());
        v.extend_from_slice(&0x2a8u64.to_le_bytes());
        v
    }

    /// A v2/v3 superblock with `offset`-byte addresses.
    fn v2(version: u8, offset: u8, base: u64, ext: u64, root: u64) -> Vec<u8> {
        let mut v = SIGNATURE.to_vec();
        v.extend_from_slice(&[version, offset, 8, 0]);
        for a in [base, ext, 0x1000, root] {
            v.extend_from_slice(&a.to_le_bytes()[..offset as usize]);
        }
        seal(v)
    }

    fn with_user_block(ub: usize, sb: &[u8]) -> Vec<u8> {
        let mut image = vec![0xAB; ub];
        image.extend_from_slice(sb);
        image.resize(ub + 256, 0);
        image
    }

    #[test]
    fn v0_at_zero() {
        let s = memory_storage(&with_user_block(0, &v0(0, 0, 0x60)));
        let (sb, based) = Superblock::locate(&s).unwrap();
        assert_eq!(sb.version, 0);
        assert_eq!(sb.sizes, Sizes::DEFAULT);
        assert_eq!((sb.base_addr, based.base()), (0, 0));
        assert_eq!(sb.root_addr, 0x60);
        assert_eq!(sb.root_symbol_table, Some((0x88, 0x2a8)));
        assert_eq!((sb.group_leaf_k, sb.group_internal_k), (4, 16));
        assert_eq!(sb.chunk_btree_k, 32);
        assert_eq!(sb.eof_addr, 0x1000);
        assert_eq!(sb.extension_addr, None);
    }

    #[test]
    fn v1_at_512_with_base_0_and_base_512() {
        for stored in [0, 512] {
            let s = memory_storage(&with_user_block(512, &v0(1, stored, 0x60)));
            let (sb, based) = Superblock::locate(&s).unwrap();
            assert_eq!(sb.version, 1);
            assert_eq!(sb.base_addr, 512);
            assert_eq!(sb.stored_base_addr, stored);
            assert_eq!(based.base(), 512);
            assert_eq!(sb.chunk_btree_k, 64);
        }
    }

    #[test]
    fn v2_and_v3_checksum() {
        for version in [2, 3] {
            let s = memory_storage(&with_user_block(2048, &v2(version, 8, 0, u64::MAX, 0x30)));
            let (sb, based) = Superblock::locate(&s).unwrap();
            assert_eq!(sb.version, version);
            assert_eq!((sb.base_addr, based.base()), (2048, 2048));
            assert_eq!(sb.root_addr, 0x30);
            assert_eq!(sb.extension_addr, None);
            assert_eq!(sb.root_symbol_table, None);
            assert_eq!(sb.chunk_btree_k, 32);
        }
        let mut bad = v2(2, 8, 0, u64::MAX, 0x30);
        bad[20] ^= 0x01;
        let s = memory_storage(&with_user_block(0, &bad));
        assert!(matches!(
            Superblock::locate(&s),
            Err(Error::Checksum { .. })
        ));
    }

    #[test]
    fn v2_four_byte_offsets_and_extension() {
        // Extension header at 0x40 (relative to the superblock at 512) with a B-tree 'K'
        // values message and a shared message table message.
        let mut msgs = v2_msg(0x13, 0, None, &[0, 8, 0, 24, 0, 6, 0]);
        msgs.extend(v2_msg(0x0F, 0, None, &[0, 0x00, 0x01, 0, 0, 3]));
        let ext = v2_header(0, &msgs);
        let sb = v2(3, 4, 512, 0x40, 0x30);
        let mut image = with_user_block(512, &sb);
        image.truncate(512 + 0x40);
        image.extend(ext);
        let s = memory_storage(&image);
        let (sb, _) = Superblock::locate(&s).unwrap();
        assert_eq!(sb.sizes.offset, 4);
        assert_eq!(sb.extension_addr, Some(0x40));
        assert_eq!(sb.chunk_btree_k, 8);
        assert_eq!((sb.group_internal_k, sb.group_leaf_k), (24, 6));
        assert_eq!(
            sb.sohm_table,
            Some(SohmTable {
                table_addr: 0x100,
                nindexes: 3
            })
        );
    }

    #[test]
    fn family_driver_refused() {
        let mut sb = v0(0, 0, 0x60);
        // Driver information address: fourth address after the 24 fixed bytes.
        sb[48..56].copy_from_slice(&0x80u64.to_le_bytes());
        let mut image = with_user_block(0, &sb);
        image[0x80..0x90].copy_from_slice(b"\0\0\0\0\x08\0\0\0NCSAfami");
        let s = memory_storage(&image);
        let e = Superblock::locate(&s).unwrap_err();
        assert!(e.to_string().contains("NCSAfami"), "{e}");
        // Another driver identification is accepted.
        image[0x88..0x90].copy_from_slice(b"NCSAsec2");
        let s = memory_storage(&image);
        assert_eq!(
            Superblock::locate(&s).unwrap().0.driver_info_addr,
            Some(0x80)
        );
    }

    #[test]
    fn rejects() {
        // Not HDF5.
        let s = memory_storage(&[0u8; 4096]);
        assert!(Superblock::locate(&s).is_err());
        // Size of offsets 3.
        let mut sb = v0(0, 0, 0x60);
        sb[13] = 3;
        let s = memory_storage(&with_user_block(0, &sb));
        let e = Superblock::locate(&s).unwrap_err();
        assert!(e.to_string().contains("size of offsets"), "{e}");
        // Unknown version.
        let mut sb = v0(0, 0, 0x60);
        sb[8] = 9;
        let s = memory_storage(&with_user_block(0, &sb));
        assert!(matches!(
            Superblock::locate(&s),
            Err(Error::Unsupported { .. })
        ));
        // Truncated superblock right after the signature.
        let s = memory_storage(&SIGNATURE);
        assert!(Superblock::locate(&s).is_err());
        // Signature at a non-searched offset is not found.
        let s = memory_storage(&with_user_block(100, &v0(0, 0, 0x60)));
        assert!(Superblock::locate(&s).is_err());
    }
}
