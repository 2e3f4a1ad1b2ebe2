//! Groups and their links: one reader over every storage kind.
//!
//! * Old-style groups: a symbol table message → v1 B-tree (type 0) → symbol table nodes, names in
//!   a local heap; cache type 2 entries are soft links.
//! * New-style compact groups: link messages in the object header.
//! * New-style dense groups: link info message → fractal heap of link messages, enumerated
//!   through the v2 B-tree name index (record type 5).
//!
//! A link whose name is longer than [`MAX_NAME`] bytes (or, in an old-style group, whose
//! soft-link value is) is left out of its group's listing, the rest of the group listed: the
//! bound refuses that link, not its neighbours (libhdf5's own test file `tlonglinks.h5` has
//! names of 66,560 bytes beside ordinary ones). Each listing logs what it left out, one line a
//! link up to `LOGGED_LEFT_OUT` and one line for the rest; listings are cached by
//! [`File::links`], so lookups do not repeat it. Looking such a name up is an error for that
//! name alone ([`File::lookup`]).

use super::file::File;
use super::links::{Links, LinksBuilder};
use super::ObjectId;
use crate::error::{Error, Result};
use crate::format::btree_v1;
use crate::format::btree_v2::{self, BtreeV2Header};
use crate::format::fractal_heap::FractalHeap;
use crate::format::local_heap::{self, LocalHeap};
use crate::format::messages::link::{Link as LinkMsg, LinkTarget as LinkMsgTarget};
use crate::format::messages::{types, Message};
use crate::format::object_header::ObjectHeader;
use crate::format::symbol_table::{Scratch, SymbolTableNode};
use crate::io::UNDEFINED_ADDR;

/// Links read from one group at most: far beyond any real file, a guard against loops.
const MAX_LINKS: usize = 10_000_000;

/// The longest link name a group lists: the longest string read from a local heap
/// ([`local_heap::MAX_STRING`], 64 KiB), in every kind of group alike.
pub const MAX_NAME: usize = local_heap::MAX_STRING as usize;

/// The largest dense link record (a link message in the fractal heap) read: version, flags,
/// link type, creation order, character set and an 8-byte name length (20 bytes), a name of
/// [`MAX_NAME`] bytes, and the longest link value (a 2-byte length and 65535 bytes). A larger
/// record holds a longer name, or is corrupt: either way that link alone is left out, unread.
const MAX_LINK_RECORD: u64 = 20 + MAX_NAME as u64 + 2 + u16::MAX as u64;

/// Links left out of one listing that are logged one by one; the rest are counted in one
/// line, so a group of a million such names costs a few log lines, not a million.
const LOGGED_LEFT_OUT: usize = 8;

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
        Link {
            target: target_of(m.target),
            name: m.name,
            creation_order: m.creation_order,
        }
    }
}

/// The target of a link message.
fn target_of(t: LinkMsgTarget) -> LinkTarget {
    match t {
        LinkMsgTarget::Hard(a) => LinkTarget::Hard(ObjectId(a)),
        LinkMsgTarget::Soft(s) => LinkTarget::Soft(s),
        LinkMsgTarget::External { file, path } => LinkTarget::External { file, path },
        LinkMsgTarget::UserDefined { link_type, .. } => LinkTarget::UserDefined(link_type),
    }
}

/// The error for looking up `name` in the group at `group` when it is longer than
/// [`MAX_NAME`] bytes, a link no listing holds; `None` for a name within the bound.
pub(super) fn name_too_long(group: u64, name: &str) -> Option<Error> {
    (name.len() > MAX_NAME).then(|| {
        Error::limit(
            "link name",
            group,
            format!(
                "a name of {} bytes (beginning {:?}) is longer than the {MAX_NAME} bytes a \
                 link name may have; such links are left out of the group",
                name.len(),
                preview(name)
            ),
        )
    })
}

/// The first characters of a long name, for log lines and errors.
fn preview(name: &str) -> String {
    let mut s: String = name.chars().take(24).collect();
    if s.len() < name.len() {
        s.push('…');
    }
    s
}

/// The links a listing leaves out: the first [`LOGGED_LEFT_OUT`] logged each with why, as
/// they are met, the rest counted in one line at the end ([`LeftOut::log`]).
struct LeftOut {
    /// Header address of the group.
    group: u64,
    /// Every link left out.
    count: usize,
}

impl LeftOut {
    fn new(group: u64) -> LeftOut {
        LeftOut { group, count: 0 }
    }

    fn add(&mut self, why: impl FnOnce() -> String) {
        self.count += 1;
        if self.count <= LOGGED_LEFT_OUT {
            log::warn!(
                "group at {:#x}: link left out of its listing: {}",
                self.group,
                why()
            );
        }
    }

    fn log(&self) {
        let rest = self.count.saturating_sub(LOGGED_LEFT_OUT);
        if rest > 0 {
            log::warn!(
                "group at {:#x}: {rest} more links left out of its listing (a name or a \
                 link record over its bound)",
                self.group
            );
        }
    }
}

/// All links of the group whose header is `h`, sorted by name, less those whose names break
/// [`MAX_NAME`] (logged).
pub(super) fn read_links(file: &File, h: &ObjectHeader) -> Result<Links> {
    let mut out = LinksBuilder::new(h.addr);
    let mut left_out = LeftOut::new(h.addr);
    for raw in &h.messages {
        match raw.mtype {
            types::SYMBOL_TABLE => {
                if let Message::SymbolTable(st) = file.decode(raw)? {
                    read_symbol_table(file, st.btree_addr, st.heap_addr, &mut out, &mut left_out)?;
                }
            }
            types::LINK => {
                if let Message::Link(l) = file.decode(raw)? {
                    let at = || format!("link message in the object header at {:#x}", h.addr);
                    keep(l, at, &mut out, &mut left_out)?;
                }
            }
            types::LINK_INFO => {
                if let Message::LinkInfo(info) = file.decode(raw)? {
                    if info.heap_addr != UNDEFINED_ADDR && info.name_btree_addr != UNDEFINED_ADDR {
                        let (heap, btree) = (info.heap_addr, info.name_btree_addr);
                        read_dense(file, heap, btree, &mut out, &mut left_out)?;
                    }
                }
            }
            _ => {}
        }
    }
    left_out.log();
    Ok(out.finish())
}

/// Add the link of message `l` (found where `at` says) to `out`, unless its name is too long.
fn keep(
    l: LinkMsg,
    at: impl FnOnce() -> String,
    out: &mut LinksBuilder,
    left_out: &mut LeftOut,
) -> Result<()> {
    if l.name.len() > MAX_NAME {
        left_out.add(|| {
            format!(
                "{}: name of {} bytes (beginning {:?}), longer than {MAX_NAME}",
                at(),
                l.name.len(),
                preview(&l.name)
            )
        });
        return Ok(());
    }
    out.push(&l.name, l.creation_order, target_of(l.target))
}

fn read_symbol_table(
    file: &File,
    btree: u64,
    heap: u64,
    out: &mut LinksBuilder,
    left_out: &mut LeftOut,
) -> Result<()> {
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
    // A string longer than the bound is a limit error for the link that names it (left out);
    // any other failure is the heap's, and the group's.
    let text = |offset: u64| -> Result<std::result::Result<String, Error>> {
        Ok(heap
            .string_within(storage, offset)?
            .map(|s| String::from_utf8_lossy(&s).into_owned()))
    };
    for e in entries {
        let name = match text(e.name_offset)? {
            Ok(name) => name,
            Err(why) => {
                left_out.add(|| match e.scratch {
                    Scratch::SoftLink { .. } => format!("a soft link's name: {why}"),
                    _ => format!("the name of a link to {:#x}: {why}", e.header_addr),
                });
                continue;
            }
        };
        let target = match e.scratch {
            Scratch::SoftLink { value_offset } => match text(value_offset as u64)? {
                Ok(value) => LinkTarget::Soft(value),
                Err(why) => {
                    left_out.add(|| format!("soft link {:?}, its value: {why}", preview(&name)));
                    continue;
                }
            },
            _ => LinkTarget::Hard(ObjectId(e.header_addr)),
        };
        out.push(&name, None, target)?;
    }
    Ok(())
}

fn read_dense(
    file: &File,
    heap_addr: u64,
    btree_addr: u64,
    out: &mut LinksBuilder,
    left_out: &mut LeftOut,
) -> Result<()> {
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
        let at = || format!("link record in the fractal heap at {heap_addr:#x}");
        match heap.get_at_most(storage, sizes, id, MAX_LINK_RECORD)? {
            Ok(body) => keep(LinkMsg::parse(&body, heap_addr, sizes)?, at, out, left_out)?,
            Err(len) => left_out.add(|| {
                format!(
                    "{}: {len} bytes, more than a link whose name has at most {MAX_NAME} bytes \
                     takes ({MAX_LINK_RECORD})",
                    at()
                )
            }),
        }
        if out.len() + left_out.count > MAX_LINKS {
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
        let mut names: Vec<&str> = links.iter().map(|l| l.name).collect();
        names.sort();
        let mut want: Vec<String> = (0..20).map(|i| format!("n{i:03}")).collect();
        want.push("soft".into());
        assert_eq!(names, want);
        let soft = links.iter().find(|l| l.name == "soft").unwrap();
        assert_eq!(soft.target, LinkTarget::Soft("/g/n001".into()));
        assert!(src.largest_read() <= 64 << 10, "{}", src.largest_read());
    }
}
