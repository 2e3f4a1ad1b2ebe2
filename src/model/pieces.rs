//! Where an object's indexes lie beyond its header, for hints to a remote source: a walk
//! that names the pieces of many objects at once ([`File::index_heads`], then
//! [`File::index_pieces`]) has them fetched together rather than one round trip per object
//! and per piece.
//!
//! In two steps, each naming what the next reads: the heads (an old-style group's B-tree
//! root and local heap header, a dense group's fractal heap and name index headers, a
//! chunked dataset's index root or header), then what the heads lead to (an old-style
//! group's symbol table nodes and heap data, a dense group's index root node and heap root
//! block, a fixed array's data block, an extensible array's index block, a v2 B-tree's
//! root node). A v1 B-tree chunk index's lower levels are named by the chunk index itself
//! as it is prepared. Each piece says what of it is surely read (a structure's fixed head
//! where what follows depends on it) and what is worth fetching with it (all it may take,
//! or a bound on its start); a source rounds the latter to its pages anyway. Errors give
//! nothing: the reader that needs the piece reports them.

use super::file::File;
use crate::error::Result;
use crate::format::btree_v1::{self, BtreeV1Node};
use crate::format::btree_v2::BtreeV2Header;
use crate::format::extensible_array::ExtensibleArrayHeader;
use crate::format::fixed_array::FixedArrayHeader;
use crate::format::fractal_heap::FractalHeap;
use crate::format::local_heap::{self, LocalHeap};
use crate::format::messages::layout::{ChunkIndexSpec, LayoutClass};
use crate::format::messages::{types, Message};
use crate::format::object_header::ObjectHeader;
use crate::format::symbol_table::SymbolTableNode;
use crate::io::UNDEFINED_ADDR;

/// Bytes named for a symbol table node (its 8-byte head and up to 2K entries of 40 bytes
/// for K = 4, libhdf5's default, with room for larger K), for a group B-tree node (a
/// 24-byte head, 2K + 1 keys and 2K children: 544 bytes for libhdf5's K = 16), for a local
/// heap's header and the start of its data segment, which most often follows it, and for a
/// dense group's fractal heap header and name index header (a few hundred bytes with
/// filter information).
const SNOD_HINT: u64 = 1024;
const GROUP_NODE_HINT: u64 = 1024;
const HEAP_HINT: u64 = 1024;
const DENSE_HEADER_HINT: u64 = 1024;

/// Bytes named for a chunk index's root or header: a v1 B-tree node of 2K = 64 entries
/// (libhdf5's default K = 32) for up to four dimensions, and more than the header of any
/// other index; and for the start of a fixed array's data block, an extensible array's
/// index block or a fractal heap's indirect root block (their elements past it are read
/// as lookups need them).
const INDEX_HINT: u64 = 4096;

/// Bytes surely read at the start of any structure named here: a symbol table node's head
/// (signature, version, entries), the shortest; every other head is longer.
const HEAD: u64 = 8;

/// A piece of metadata that a reader will read, for a hint: from `addr`, `len` bytes
/// surely read, and `fetch` bytes (at least `len`) worth fetching with them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub addr: u64,
    pub len: u64,
    pub fetch: u64,
}

impl Piece {
    /// `len` bytes at `addr`, and `fetch` worth fetching (at least `len`).
    pub fn new(addr: u64, len: u64, fetch: u64) -> Piece {
        Piece {
            addr,
            len,
            fetch: fetch.max(len),
        }
    }

    /// A structure at `addr` whose head is surely read, taking up to `fetch` bytes.
    fn head(addr: u64, fetch: u64) -> Piece {
        Piece::new(addr, HEAD.min(fetch), fetch)
    }

    /// A node at `addr` taking up to `fetch` bytes, of which `extent` tells from its head
    /// what is read, when the head is here already (else only the head is known to be):
    /// a node whose head is here but whose entries are not is named whole.
    fn node(file: &File, addr: u64, fetch: u64, extent: impl FnOnce() -> Result<u64>) -> Piece {
        let len = match file.storage().cached(&[(addr, HEAD)]) {
            true => extent().unwrap_or(HEAD),
            false => HEAD,
        };
        Piece::new(addr, len, fetch)
    }
}

/// Bytes of a block named at most (a local heap's data segment, a fractal heap's direct
/// root block): what a local heap is read whole up to whatever the number of names
/// ([`local_heap::whole_read_bound`] of none).
fn block_hint() -> u64 {
    local_heap::whole_read_bound(0)
}

/// Where an object keeps what its header points to.
enum Index {
    /// An old-style group: its B-tree root and local heap.
    SymbolTable { btree: u64, heap: u64 },
    /// A dense group: its fractal heap and name index.
    DenseLinks { heap: u64, btree: u64 },
    /// A chunked dataset's index, and the dataset's rank.
    Chunks(ChunkIndexSpec, usize),
}

/// The indexes the header `h` names (messages that do not decode give none).
fn indexes(file: &File, h: &ObjectHeader) -> Vec<Index> {
    let mut out = Vec::new();
    for raw in &h.messages {
        let wanted = matches!(
            raw.mtype,
            types::SYMBOL_TABLE | types::LINK_INFO | types::LAYOUT
        );
        if !wanted {
            continue;
        }
        match file.decode(raw) {
            Ok(Message::SymbolTable(st)) => out.push(Index::SymbolTable {
                btree: st.btree_addr,
                heap: st.heap_addr,
            }),
            Ok(Message::LinkInfo(info))
                if info.heap_addr != UNDEFINED_ADDR && info.name_btree_addr != UNDEFINED_ADDR =>
            {
                out.push(Index::DenseLinks {
                    heap: info.heap_addr,
                    btree: info.name_btree_addr,
                })
            }
            Ok(Message::Layout(l)) => {
                if let LayoutClass::Chunked(c) = l.class {
                    out.push(Index::Chunks(c.index, c.chunk_dims.len()));
                }
            }
            _ => {}
        }
    }
    out
}

/// Where the indexes of the object whose header is `h` begin (see the module docs); only
/// the header's messages are read.
pub(super) fn heads(file: &File, h: &ObjectHeader) -> Vec<Piece> {
    let (storage, sizes) = (file.storage(), file.sizes());
    let mut out = Vec::new();
    for index in indexes(file, h) {
        match index {
            Index::SymbolTable { btree, heap } => {
                out.push(Piece::node(file, btree, GROUP_NODE_HINT, || {
                    BtreeV1Node::extent(storage, btree, sizes, 0)
                }));
                out.push(Piece::head(heap, HEAP_HINT));
            }
            Index::DenseLinks { heap, btree } => {
                out.push(Piece::head(heap, DENSE_HEADER_HINT));
                out.push(Piece::head(btree, DENSE_HEADER_HINT));
            }
            Index::Chunks(ChunkIndexSpec::BtreeV1 { addr }, rank) if addr != UNDEFINED_ADDR => {
                out.push(Piece::node(file, addr, INDEX_HINT, || {
                    BtreeV1Node::extent(storage, addr, sizes, rank + 1)
                }));
            }
            Index::Chunks(
                ChunkIndexSpec::FixedArray { addr, .. }
                | ChunkIndexSpec::ExtensibleArray { addr, .. }
                | ChunkIndexSpec::BtreeV2 { addr, .. },
                _,
            ) if addr != UNDEFINED_ADDR => out.push(Piece::head(addr, INDEX_HINT)),
            Index::Chunks(..) => {}
        }
    }
    out
}

/// What the heads of the object whose header is `h` lead to (see the module docs); the
/// heads are read here.
pub(super) fn pieces(file: &File, h: &ObjectHeader) -> Vec<Piece> {
    let (storage, sizes) = (file.storage(), file.sizes());
    let mut out = Vec::new();
    let mut add = |piece: Piece| {
        if piece.addr != UNDEFINED_ADDR && piece.len > 0 {
            out.push(piece);
        }
    };
    for index in indexes(file, h) {
        match index {
            Index::SymbolTable { btree, heap } => {
                if let Ok(nodes) = btree_v1::group_symbol_nodes(storage, btree, sizes) {
                    for a in nodes {
                        add(Piece::node(file, a, SNOD_HINT, || {
                            SymbolTableNode::extent(storage, a, sizes)
                        }));
                    }
                }
                if let Ok(heap) = LocalHeap::open(storage, heap, sizes) {
                    let n = heap.size.min(block_hint());
                    add(Piece::new(heap.data_addr, n, n));
                }
            }
            Index::DenseLinks { heap, btree } => {
                if let Ok(bt) = BtreeV2Header::read(storage, btree, sizes) {
                    add(v2_root(&bt));
                }
                if let Ok(heap) = FractalHeap::open(storage, heap, sizes) {
                    let len = match (heap.root_rows, heap.filtered_root_size) {
                        (0, Some(n)) => n.min(block_hint()),
                        (0, None) => heap.start_block_size.min(block_hint()),
                        _ => INDEX_HINT,
                    };
                    add(Piece::head(heap.root_addr, len));
                }
            }
            Index::Chunks(ChunkIndexSpec::FixedArray { addr, .. }, _) if addr != UNDEFINED_ADDR => {
                if let Ok(fa) = FixedArrayHeader::read(storage, addr, sizes) {
                    let len = fa.data_block_prefix_len(sizes).unwrap_or(HEAD);
                    add(Piece::new(fa.data_block, len, INDEX_HINT));
                }
            }
            Index::Chunks(ChunkIndexSpec::ExtensibleArray { addr, .. }, _)
                if addr != UNDEFINED_ADDR =>
            {
                if let Ok(ea) = ExtensibleArrayHeader::read(storage, addr, sizes) {
                    add(Piece::head(ea.index_block, INDEX_HINT));
                }
            }
            Index::Chunks(ChunkIndexSpec::BtreeV2 { addr, .. }, _) if addr != UNDEFINED_ADDR => {
                if let Ok(bt) = BtreeV2Header::read(storage, addr, sizes) {
                    add(v2_root(&bt));
                }
            }
            Index::Chunks(..) => {}
        }
    }
    out
}

/// The root node of the v2 B-tree `bt`, read whole.
fn v2_root(bt: &BtreeV2Header) -> Piece {
    let node = u64::from(bt.node_size);
    Piece::new(bt.root_addr, node, node)
}
