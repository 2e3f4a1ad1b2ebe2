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
    let heap = LocalHeap::read(storage, heap, sizes)?;
    for node_addr in btree_v1::group_symbol_nodes(storage, btree, sizes)? {
        let node = SymbolTableNode::read(storage, node_addr, sizes)?;
        for e in node.entries {
            let name = String::from_utf8_lossy(heap.string_at(e.name_offset)?).into_owned();
            let target = match e.scratch {
                Scratch::SoftLink { value_offset } => LinkTarget::Soft(
                    String::from_utf8_lossy(heap.string_at(value_offset as u64)?).into_owned(),
                ),
                _ => LinkTarget::Hard(ObjectId(e.header_addr)),
            };
            out.push(Link {
                name,
                creation_order: None,
                target,
            });
            if out.len() > MAX_LINKS {
                return Err(Error::limit("symbol table", btree, "too many links"));
            }
        }
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
