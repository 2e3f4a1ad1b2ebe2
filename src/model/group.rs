//! Groups and their links: one reader over every storage kind.
//!
//! * Old-style groups: a symbol table message → v1 B-tree (type 0) → symbol table nodes, names in
//!   a local heap; cache type 2 entries are soft links.
//! * New-style compact groups: link messages in the object header.
//! * New-style dense groups: link info message → fractal heap of link messages, enumerated
//!   through the v2 B-tree name index (record type 5).

use super::file::File;
use super::ObjectId;
use crate::error::{Error, Result};
use crate::format::btree_v1;
use crate::format::btree_v2::{self, BtreeV2Header};
use crate::format::fractal_heap::FractalHeap;
use crate::format::local_heap::LocalHeap;
use crate::format::messages::link::{Link as LinkMsg, LinkTarget as LinkMsgTarget};
use crate::format::messages::{types, Message};
use crate::format::object_header::ObjectHeader;
use crate::format::symbol_table::{Scratch, SymbolTableNode};
use crate::io::UNDEFINED_ADDR;

/// Links read from one group at most: far beyond any real file, a guard against loops.
const MAX_LINKS: usize = 10_000_000;

/// Where a link points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkTarget {
    Hard(ObjectId),
    /// Soft link path, as stored.
    Soft(String),
    /// External link: file name and object path.
    External {
        file: String,
        path: String,
    },
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

impl Link {
    /// The index of the link `name` among `links`, a group's links as [`super::File::links`]
    /// gives them (sorted by name, byte by byte).
    pub fn position(links: &[Link], name: &str) -> Option<usize> {
        links
            .binary_search_by(|l| l.name.as_bytes().cmp(name.as_bytes()))
            .ok()
    }
}

impl From<LinkMsg> for Link {
    fn from(m: LinkMsg) -> Link {
        let target = match m.target {
            LinkMsgTarget::Hard(a) => LinkTarget::Hard(ObjectId(a)),
            LinkMsgTarget::Soft(s) => LinkTarget::Soft(s),
            LinkMsgTarget::External { file, path } => LinkTarget::External { file, path },
            LinkMsgTarget::UserDefined { link_type, .. } => LinkTarget::UserDefined(link_type),
        };
        Link {
            name: m.name,
            creation_order: m.creation_order,
            target,
        }
    }
}

/// All links of the group whose header is `h`, in storage order.
pub(super) fn read_links(file: &File, h: &ObjectHeader) -> Result<Vec<Link>> {
    let mut out = Vec::new();
    for raw in &h.messages {
        match raw.mtype {
            types::SYMBOL_TABLE => {
                if let Message::SymbolTable(st) = file.decode(raw)? {
                    read_symbol_table(file, st.btree_addr, st.heap_addr, &mut out)?;
                }
            }
            types::LINK => {
                if let Message::Link(l) = file.decode(raw)? {
                    out.push(l.into());
                }
            }
            types::LINK_INFO => {
                if let Message::LinkInfo(info) = file.decode(raw)? {
                    if info.heap_addr != UNDEFINED_ADDR && info.name_btree_addr != UNDEFINED_ADDR {
                        read_dense(file, info.heap_addr, info.name_btree_addr, &mut out)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

fn read_symbol_table(file: &File, btree: u64, heap: u64, out: &mut Vec<Link>) -> Result<()> {
    let storage = file.storage();
    let sizes = file.sizes();
    // The entries first: how many strings they name bounds what of the heap is read whole.
    let mut entries = Vec::new();
    for node_addr in btree_v1::group_symbol_nodes(storage, btree, sizes)? {
        entries.extend(SymbolTableNode::read(storage, node_addr, sizes)?.entries);
        if out.len() + entries.len() > MAX_LINKS {
            return Err(Error::limit(
                "symbol table",
                btree,
                format!("more than {MAX_LINKS} links"),
            ));
        }
    }
    let strings = entries.len()
        + entries
            .iter()
            .filter(|e| matches!(e.scratch, Scratch::SoftLink { .. }))
            .count();
    let heap = LocalHeap::read_for(storage, heap, sizes, strings)?;
    let text = |offset: u64| -> Result<String> {
        Ok(String::from_utf8_lossy(&heap.string(storage, offset)?).into_owned())
    };
    for e in entries {
        let name = text(e.name_offset)?;
        let target = match e.scratch {
            Scratch::SoftLink { value_offset } => LinkTarget::Soft(text(value_offset as u64)?),
            _ => LinkTarget::Hard(ObjectId(e.header_addr)),
        };
        out.push(Link {
            name,
            creation_order: None,
            target,
        });
    }
    Ok(())
}

fn read_dense(file: &File, heap_addr: u64, btree_addr: u64, out: &mut Vec<Link>) -> Result<()> {
    let storage = file.storage();
    let sizes = file.sizes();
    let heap = FractalHeap::open(storage, heap_addr, sizes)?;
    let bt = BtreeV2Header::read(storage, btree_addr, sizes)?;
    if bt.record_type != 5 {
        return Err(Error::corrupt(
            "link name index",
            btree_addr,
            format!("record type {} (expected 5)", bt.record_type),
        ));
    }
    btree_v2::for_each_record(storage, &bt, sizes, &mut |rec| {
        // Record type 5: name hash (4 bytes), then the heap ID.
        let id = rec
            .get(4..)
            .ok_or_else(|| Error::corrupt("link name record", btree_addr, "record too short"))?;
        let body = heap.get(storage, sizes, id)?;
        let link = LinkMsg::parse(&body, heap_addr, sizes)?;
        out.push(link.into());
        if out.len() > MAX_LINKS {
            return Err(Error::limit("dense links", btree_addr, "too many links"));
        }
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::testutil::Sparse;
    use crate::model::OpenOptions;
    use std::sync::Arc;

    /// An old-style group whose local heap records a 2 GiB data segment (valid: libhdf5 sizes
    /// a heap from the group's estimated links, and free space stays) lists its links by
    /// reading their names, not the segment: no read of the file is larger than 64 KiB.
    #[test]
    fn a_group_heap_far_larger_than_its_names_is_not_read_whole() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/format/testdata/heaps/old_style.h5"
        );
        let mut bytes = std::fs::read(path).unwrap();
        let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        // The heap of /g: the one whose data segment holds "n000".
        let heap = (0..bytes.len() - 32)
            .filter(|&i| &bytes[i..i + 4] == b"HEAP")
            .find(|&i| {
                let (size, data) = (u64_at(&bytes, i + 8), u64_at(&bytes, i + 24) as usize);
                bytes[data..data + size as usize]
                    .windows(5)
                    .any(|w| w == b"n000\0")
            })
            .unwrap();
        let data = u64_at(&bytes, heap + 24);
        bytes[heap + 8..heap + 16].copy_from_slice(&(2u64 << 30).to_le_bytes());
        let src = Arc::new(Sparse::new(bytes, data + (2 << 30)));
        let f = File::from_source(src.clone(), &OpenOptions::default()).unwrap();
        let Some(Link {
            target: LinkTarget::Hard(g),
            ..
        }) = f.lookup(f.root(), "g").unwrap()
        else {
            panic!("no group g")
        };
        let links = f.links(g).unwrap();
        let mut names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
        names.sort();
        let mut want: Vec<String> = (0..20).map(|i| format!("n{i:03}")).collect();
        want.push("soft".into());
        assert_eq!(names, want);
        let soft = links.iter().find(|l| l.name == "soft").unwrap();
        assert_eq!(soft.target, LinkTarget::Soft("/g/n001".into()));
        assert!(src.largest_read() <= 64 << 10, "{}", src.largest_read());
    }
}
