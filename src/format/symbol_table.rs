//! Symbol table nodes (`SNOD`, spec "III.C") and symbol table entries (spec "III.B").
//!
//! An old-style group keeps its links in a v1 B-tree (node type 0) whose leaves point at
//! symbol table nodes; each node holds up to 2K entries sorted by name. An entry names its
//! link by an offset into the group's local heap and caches, in a 16-byte scratch pad, either
//! nothing (type 0), the B-tree and heap of a child group (type 1), or the heap offset of a
//! soft link's value (type 2).

use crate::error::{Error, Result};
use crate::io::{Cursor, Sizes, Storage};

/// The scratch-pad of a symbol table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scratch {
    /// Cache type 0.
    None,
    /// Cache type 1: the object is a group with this B-tree and local heap.
    Group { btree_addr: u64, heap_addr: u64 },
    /// Cache type 2: the entry is a soft link; the value is at this local-heap offset.
    SoftLink { value_offset: u32 },
}

/// A symbol table entry (spec "III.B Disk Format: Level 1B - Group Symbol Table Entry").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolTableEntry {
    /// Offset of the link name in the group's local heap.
    pub name_offset: u64,
    /// Object header address (undefined for soft links).
    pub header_addr: u64,
    pub scratch: Scratch,
}

/// Bytes in the scratch-pad field of an entry, whatever the cache type.
const SCRATCH_LEN: usize = 16;

impl SymbolTableEntry {
    /// Size in bytes of one encoded entry.
    pub fn encoded_len(sizes: Sizes) -> usize {
        2 * sizes.offset as usize + 8 + SCRATCH_LEN
    }

    /// Decode one entry (size: 2 × offset + 4 + 4 + 16 bytes).
    pub fn parse(c: &mut Cursor<'_>, sizes: Sizes) -> Result<SymbolTableEntry> {
        let name_offset = c.offset(sizes)?;
        let header_addr = c.offset(sizes)?;
        let cache_type = c.u32()?;
        let _reserved = c.u32()?;
        let mut s = c.sub(SCRATCH_LEN)?;
        let scratch = match cache_type {
            0 => Scratch::None,
            1 => Scratch::Group {
                btree_addr: s.offset(sizes)?,
                heap_addr: s.offset(sizes)?,
            },
            2 => Scratch::SoftLink {
                value_offset: s.u32()?,
            },
            t => return Err(c.corrupt(format!("symbol table entry cache type {t}"))),
        };
        Ok(SymbolTableEntry {
            name_offset,
            header_addr,
            scratch,
        })
    }
}

/// A symbol table node: up to 2K entries, sorted by name (spec "III.C Disk Format: Level 1C -
/// Symbol Table Nodes").
#[derive(Clone, Debug)]
pub struct SymbolTableNode {
    pub entries: Vec<SymbolTableEntry>,
}

const WHAT: &str = "symbol table node";

impl SymbolTableNode {
    /// The entry count in the head of the node at `addr`.
    fn count(storage: &Storage, addr: u64) -> Result<u64> {
        let head = storage.read_vec(addr, 8, WHAT)?;
        let mut c = Cursor::new(&head, addr, WHAT);
        c.signature(b"SNOD")?;
        let version = c.u8()?;
        if version != 1 {
            return Err(Error::corrupt(WHAT, addr, format!("version {version}")));
        }
        c.skip(1)?;
        Ok(c.u16()? as u64)
    }

    /// The bytes the node at `addr` takes that [`Self::read`] reads, from its head alone.
    pub fn extent(storage: &Storage, addr: u64, sizes: Sizes) -> Result<u64> {
        let elen = SymbolTableEntry::encoded_len(sizes) as u64;
        Ok(8 + Self::count(storage, addr)? * elen)
    }

    /// Read the node at `addr`. The entry count is bounded by the file (each entry is read).
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<SymbolTableNode> {
        let count = Self::count(storage, addr)?;
        let elen = SymbolTableEntry::encoded_len(sizes) as u64;
        // At most 65535 entries of at most 48 bytes: no overflow, and read_vec checks the file.
        let body = storage.read_vec(addr + 8, count * elen, WHAT)?;
        let mut c = Cursor::new(&body, addr + 8, WHAT);
        let mut entries = Vec::with_capacity(count as usize);
        for _ in 0..count {
            entries.push(SymbolTableEntry::parse(&mut c, sizes)?);
        }
        Ok(SymbolTableNode { entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::testutil::memory_storage;

    fn entry(name: u64, hdr: u64, ty: u32, scratch: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&name.to_le_bytes());
        b.extend_from_slice(&hdr.to_le_bytes());
        b.extend_from_slice(&ty.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        let mut s = scratch.to_vec();
        s.resize(16, 0);
        b.extend_from_slice(&s);
        b
    }

    #[test]
    fn node_with_three_cache_types() {
        let mut img = b"SNOD\x01\x00\x03\x00".to_vec();
        img.extend(entry(8, 0x300, 0, &[]));
        let mut g = 0x400u64.to_le_bytes().to_vec();
        g.extend_from_slice(&0x500u64.to_le_bytes());
        img.extend(entry(16, 0x600, 1, &g));
        img.extend(entry(24, u64::MAX, 2, &40u32.to_le_bytes()));
        let s = memory_storage(&img);
        let n = SymbolTableNode::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(n.entries.len(), 3);
        assert_eq!(n.entries[0].scratch, Scratch::None);
        assert_eq!(n.entries[0].header_addr, 0x300);
        assert_eq!(
            n.entries[1].scratch,
            Scratch::Group {
                btree_addr: 0x400,
                heap_addr: 0x500
            }
        );
        assert_eq!(n.entries[2].header_addr, crate::io::UNDEFINED_ADDR);
        assert_eq!(n.entries[2].scratch, Scratch::SoftLink { value_offset: 40 });
    }

    #[test]
    fn bad_cache_type_and_truncation() {
        let e = entry(8, 0x300, 7, &[]);
        assert!(SymbolTableEntry::parse(&mut Cursor::new(&e, 0, "t"), Sizes::DEFAULT).is_err());
        let mut img = b"SNOD\x01\x00\x05\x00".to_vec();
        img.extend(entry(8, 0x300, 0, &[]));
        let s = memory_storage(&img);
        assert!(SymbolTableNode::read(&s, 0, Sizes::DEFAULT).is_err());
    }
}

#[cfg(test)]
mod real_file {
    use super::*;
    use crate::format::global_heap::GlobalHeapCollection;
    use crate::format::local_heap::LocalHeap;
    use std::collections::BTreeSet;

    /// h5py (libver earliest) group `g`: every name it lists resolves through a symbol table
    /// node and the group's local heap; the soft link's value is in the heap too. The file's
    /// vlen strings are all objects of its global heap collections.
    #[test]
    fn old_style_group_and_vlen() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/format/testdata/heaps/");
        let path = format!("{dir}old_style.h5");
        let bytes = std::fs::read(&path).unwrap();
        let s = Storage::open(std::path::Path::new(&path)).unwrap();
        let at = |sig: &[u8]| -> Vec<u64> {
            (0..bytes.len() - 4)
                .filter(|&i| &bytes[i..i + 4] == sig)
                .map(|i| i as u64)
                .collect()
        };
        let exp: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(format!("{dir}expected.json")).unwrap())
                .unwrap();
        let strs = |k: &str| -> Vec<Vec<u8>> {
            exp["old_style.h5"][k]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().as_bytes().to_vec())
                .collect()
        };
        let want: BTreeSet<Vec<u8>> = strs("links").into_iter().collect();
        let heaps: Vec<LocalHeap> = at(b"HEAP")
            .into_iter()
            .map(|a| LocalHeap::read(&s, a, Sizes::DEFAULT).unwrap())
            .collect();
        // The same heaps read string by string (not loaded), and loaded for a few strings.
        let lazy: Vec<LocalHeap> = at(b"HEAP")
            .into_iter()
            .map(|a| LocalHeap::open(&s, a, Sizes::DEFAULT).unwrap())
            .collect();
        let bounded: Vec<LocalHeap> = at(b"HEAP")
            .into_iter()
            .map(|a| LocalHeap::read_for(&s, a, Sizes::DEFAULT, 21).unwrap())
            .collect();
        assert!(bounded.iter().all(LocalHeap::is_loaded));
        let mut got = BTreeSet::new();
        let mut soft = vec![];
        for a in at(b"SNOD") {
            let node = SymbolTableNode::read(&s, a, Sizes::DEFAULT).unwrap();
            for e in node.entries {
                // The group's heap is the one that resolves its names.
                for (i, h) in heaps.iter().enumerate() {
                    let Ok(name) = h.string_at(e.name_offset) else {
                        continue;
                    };
                    assert_eq!(&*lazy[i].string(&s, e.name_offset).unwrap(), name);
                    assert_eq!(&*bounded[i].string(&s, e.name_offset).unwrap(), name);
                    if !want.contains(name) {
                        continue;
                    }
                    got.insert(name.to_vec());
                    if let Scratch::SoftLink { value_offset } = e.scratch {
                        let value = h.string_at(value_offset as u64).unwrap().to_vec();
                        let off = value_offset as u64;
                        assert_eq!(&*lazy[i].string(&s, off).unwrap(), value);
                        soft.push(value);
                    }
                }
            }
        }
        assert_eq!(got, want);
        assert_eq!(soft, [b"/g/n001".to_vec()]);
        let mut objects = BTreeSet::new();
        for a in at(b"GCOL") {
            let g = GlobalHeapCollection::read(&s, a, Sizes::DEFAULT).unwrap();
            // Each object again, read alone at the size it has.
            let alone = GlobalHeapCollection::open(&s, a, Sizes::DEFAULT).unwrap();
            for (i, o) in &g.objects {
                assert_eq!(&alone.object(&s, *i, o.len() as u64).unwrap(), o);
            }
            objects.extend(g.objects.into_iter().map(|(_, o)| o));
        }
        for v in strs("vlen") {
            assert!(objects.contains(&v), "{}", String::from_utf8_lossy(&v));
        }
    }
}
