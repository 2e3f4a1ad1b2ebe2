//! Version 2 B-trees (`BTHD`, `BTIN`, `BTLF`, spec "III.A.2"): records are returned raw, with
//! decoders for the record types h5mount uses (1-4 huge heap objects, 5/6 links, 7 SOHM,
//! 8/9 attributes, 10/11 chunks) in [`records`].
//!
//! The header gives the node size, the record size and the depth; every node occupies
//! `node_size` bytes on disk but only its used prefix is meaningful: signature, version, type,
//! the records, then (internal nodes) one child pointer more than records, then a lookup3
//! checksum. A child pointer is an address, the child's record count and, below depth 1, the
//! total records in the child's subtree. The widths of those counts are not stored: they are
//! the bytes needed for the largest count a node (or subtree) of that depth can hold, which we
//! derive from the node size exactly as the writer does ([`NodeGeometry`]). A node's record
//! count comes from its parent (the root's from the header), so a node is read knowing its
//! depth and count; depth strictly decreases on the way down, which bounds every walk.

pub mod records;

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::format::limits::MAX_TREE_DEPTH;
use crate::io::cursor::bytes_for;
use crate::io::{Cursor, Sizes, Storage, UNDEFINED_ADDR};

/// Signature, version and type before the records of a node, and the checksum after them.
const NODE_PREFIX: usize = 6;
const CHECKSUM: usize = 4;

/// Capacity of the nodes at one depth, derived from the node size (spec "III.A.2", the
/// "Number of Records" and "Total Number of Records" field descriptions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeGeometry {
    /// Most records a node at this depth can hold.
    pub max_records: u64,
    /// Most records the whole subtree rooted at such a node can hold.
    pub cum_max_records: u64,
    /// Width of the "total records in child" field for pointers *to* nodes of this depth.
    pub cum_count_width: usize,
}

/// A v2 B-tree header (spec "III.A.2 Version 2 B-trees", "Layout: Version 2 B-tree Header").
#[derive(Clone, Debug)]
pub struct BtreeV2Header {
    pub addr: u64,
    pub record_type: u8,
    pub node_size: u32,
    pub record_size: u16,
    pub depth: u16,
    pub root_addr: u64,
    pub root_records: u16,
    pub total_records: u64,
    pub split_percent: u8,
    pub merge_percent: u8,
    /// Width of every "number of records in child" field (sized for a full leaf, the largest).
    pub count_width: usize,
    /// Node capacities indexed by depth (0 = leaves), `depth + 1` entries.
    pub geometry: Vec<NodeGeometry>,
}

const WHAT: &str = "v2 B-tree header";

impl BtreeV2Header {
    /// Read and check the header at `addr` and derive the node geometry.
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<BtreeV2Header> {
        let len = 4 + 1 + 1 + 4 + 2 + 2 + 1 + 1 + sizes.offset as u64 + 2 + sizes.length as u64;
        let buf = storage.read_checksummed(addr, len + CHECKSUM as u64, WHAT)?;
        let mut c = Cursor::new(&buf, addr, WHAT);
        c.signature(b"BTHD")?;
        let version = c.u8()?;
        if version != 0 {
            return Err(c.corrupt(format!("version {version}")));
        }
        let record_type = c.u8()?;
        let node_size = c.u32()?;
        let record_size = c.u16()?;
        let depth = c.u16()?;
        let split_percent = c.u8()?;
        let merge_percent = c.u8()?;
        let root_addr = c.offset(sizes)?;
        let root_records = c.u16()?;
        let total_records = c.length(sizes)?;
        Self::from_fields(
            storage,
            addr,
            sizes,
            [record_type, split_percent, merge_percent],
            node_size,
            record_size,
            depth,
            root_addr,
            root_records,
            total_records,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn from_fields(
        storage: &Storage,
        addr: u64,
        sizes: Sizes,
        [record_type, split_percent, merge_percent]: [u8; 3],
        node_size: u32,
        record_size: u16,
        depth: u16,
        root_addr: u64,
        root_records: u16,
        total_records: u64,
    ) -> Result<BtreeV2Header> {
        if record_size == 0 {
            return Err(Error::corrupt(WHAT, addr, "record size 0"));
        }
        if depth as usize > MAX_TREE_DEPTH {
            return Err(Error::limit(WHAT, addr, format!("depth {depth}")));
        }
        // Every record is stored once, so a tree cannot hold more records than the file has
        // room for; this bounds every walk by the file size.
        if total_records > storage.file_len() / record_size as u64 {
            return Err(Error::corrupt(
                WHAT,
                addr,
                format!("{total_records} records cannot fit in the file"),
            ));
        }
        let geometry = geometry(node_size, record_size, depth, sizes)
            .ok_or_else(|| Error::corrupt(WHAT, addr, format!("node size {node_size} too small for records of {record_size} bytes at depth {depth}")))?;
        let count_width = bytes_for(geometry[0].max_records);
        if root_addr == UNDEFINED_ADDR && total_records != 0 {
            return Err(Error::corrupt(WHAT, addr, "records but no root node"));
        }
        if root_records as u64 > geometry[depth as usize].max_records {
            return Err(Error::corrupt(
                WHAT,
                addr,
                format!("root holds {root_records} records, more than fit"),
            ));
        }
        Ok(BtreeV2Header {
            addr,
            record_type,
            node_size,
            record_size,
            depth,
            root_addr,
            root_records,
            total_records,
            split_percent,
            merge_percent,
            count_width,
            geometry,
        })
    }

    /// Width of one child pointer in an internal node at `depth` (≥ 1).
    fn pointer_width(&self, sizes: Sizes, depth: usize) -> usize {
        pointer_width(
            sizes,
            bytes_for(self.geometry[0].max_records),
            &self.geometry,
            depth,
        )
    }
}

fn pointer_width(sizes: Sizes, count_width: usize, geo: &[NodeGeometry], depth: usize) -> usize {
    let total = if depth > 1 {
        geo[depth - 1].cum_count_width
    } else {
        0
    };
    sizes.offset as usize + count_width + total
}

/// Node capacities for depths `0..=depth`, as the writer computes them; `None` when a node
/// cannot hold a single record.
fn geometry(
    node_size: u32,
    record_size: u16,
    depth: u16,
    sizes: Sizes,
) -> Option<Vec<NodeGeometry>> {
    let node = node_size as u64;
    let rec = record_size as u64;
    let leaf_max = node.checked_sub((NODE_PREFIX + CHECKSUM) as u64)? / rec;
    if leaf_max == 0 {
        return None;
    }
    let mut geo = vec![NodeGeometry {
        max_records: leaf_max,
        cum_max_records: leaf_max,
        cum_count_width: 0,
    }];
    let count_width = bytes_for(leaf_max);
    for d in 1..=depth as usize {
        let ptr = pointer_width(sizes, count_width, &geo, d) as u64;
        let max = node.checked_sub((NODE_PREFIX + CHECKSUM) as u64 + ptr)? / (rec + ptr);
        if max == 0 {
            return None;
        }
        // (max + 1) children each holding a full subtree, plus this node's own records;
        // saturating because a deep tree's theoretical capacity can exceed 64 bits.
        let cum = (max + 1)
            .saturating_mul(geo[d - 1].cum_max_records)
            .saturating_add(max);
        geo.push(NodeGeometry {
            max_records: max,
            cum_max_records: cum,
            cum_count_width: bytes_for(cum),
        });
    }
    Some(geo)
}

/// A pointer from an internal node to a child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChildPointer {
    pub addr: u64,
    /// Records in the child node itself.
    pub records: u64,
    /// Records in the child's whole subtree (equal to `records` for leaves).
    pub total: u64,
}

/// A decoded node (spec "Layout: Version 2 B-tree Internal Node" / "Leaf Node").
#[derive(Clone, Debug)]
pub struct Node {
    pub addr: u64,
    /// Depth of the node (0 = leaf).
    pub depth: u16,
    record_size: usize,
    /// The records, concatenated (`record_size` bytes each).
    pub records: Vec<u8>,
    /// One more than the records for internal nodes; empty for leaves.
    pub children: Vec<ChildPointer>,
}

impl Node {
    /// Number of records in the node.
    pub fn len(&self) -> usize {
        self.records.len() / self.record_size.max(1)
    }

    /// True when the node holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The raw bytes of record `i` (`None` past the end).
    pub fn record(&self, i: usize) -> Option<&[u8]> {
        let rs = self.record_size;
        self.records
            .get(i.checked_mul(rs)?..i.checked_add(1)?.checked_mul(rs)?)
    }

    /// Binary search with `cmp(record)` = how the sought key compares to that record. Returns
    /// `Ok(i)` for a match at `i`, `Err(i)` for the child/insertion index `i`.
    pub fn search(
        &self,
        cmp: &mut dyn FnMut(&[u8]) -> Result<Ordering>,
    ) -> Result<std::result::Result<usize, usize>> {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let rec = self.record(mid).unwrap_or_default();
            match cmp(rec)? {
                Ordering::Equal => return Ok(Ok(mid)),
                Ordering::Less => hi = mid,
                Ordering::Greater => lo = mid + 1,
            }
        }
        Ok(Err(lo))
    }
}

/// Read the node at `addr`, which its parent says is at `depth` and holds `records` records.
pub fn read_node(
    storage: &Storage,
    header: &BtreeV2Header,
    sizes: Sizes,
    addr: u64,
    depth: u16,
    records: u64,
) -> Result<Node> {
    let what = if depth == 0 {
        "v2 B-tree leaf node"
    } else {
        "v2 B-tree internal node"
    };
    let geo = header
        .geometry
        .get(depth as usize)
        .ok_or_else(|| Error::corrupt(what, addr, format!("depth {depth} below the tree")))?;
    if records > geo.max_records {
        return Err(Error::corrupt(
            what,
            addr,
            format!("{records} records, at most {} fit", geo.max_records),
        ));
    }
    let n = records as usize;
    let rs = header.record_size as usize;
    let ptr = if depth > 0 {
        header.pointer_width(sizes, depth as usize)
    } else {
        0
    };
    let nptr = if depth > 0 { n + 1 } else { 0 };
    // Bounded by node_size through max_records, so no overflow.
    let used = NODE_PREFIX + n * rs + nptr * ptr;
    if used + CHECKSUM > header.node_size as usize {
        return Err(Error::corrupt(
            what,
            addr,
            "node contents exceed the node size",
        ));
    }
    let buf = storage.read_checksummed(addr, (used + CHECKSUM) as u64, what)?;
    let mut c = Cursor::new(&buf, addr, what);
    c.signature(if depth == 0 { b"BTLF" } else { b"BTIN" })?;
    let version = c.u8()?;
    if version != 0 {
        return Err(c.corrupt(format!("version {version}")));
    }
    let ty = c.u8()?;
    if ty != header.record_type {
        return Err(c.corrupt(format!(
            "record type {ty}, header says {}",
            header.record_type
        )));
    }
    let recs = c.bytes(n * rs)?.to_vec();
    let mut children = Vec::with_capacity(nptr);
    for _ in 0..nptr {
        let caddr = c.offset(sizes)?;
        let crecs = c.uint(header.count_width)?;
        let total = if depth > 1 {
            c.uint(header.geometry[depth as usize - 1].cum_count_width)?
        } else {
            crecs
        };
        if caddr == UNDEFINED_ADDR {
            return Err(c.corrupt("child pointer with undefined address"));
        }
        children.push(ChildPointer {
            addr: caddr,
            records: crecs,
            total,
        });
    }
    Ok(Node {
        addr,
        depth,
        record_size: rs,
        records: recs,
        children,
    })
}

/// Read the root node (`None` for an empty tree).
pub fn read_root(storage: &Storage, header: &BtreeV2Header, sizes: Sizes) -> Result<Option<Node>> {
    if header.root_addr == UNDEFINED_ADDR || (header.depth == 0 && header.root_records == 0) {
        return Ok(None);
    }
    read_node(
        storage,
        header,
        sizes,
        header.root_addr,
        header.depth,
        header.root_records as u64,
    )
    .map(Some)
}

/// Call `f` with every record (raw bytes, `record_size` long) in key order; `f` returns
/// `false` to stop early. Bounded in depth and node count.
pub fn for_each_record(
    storage: &Storage,
    header: &BtreeV2Header,
    sizes: Sizes,
    f: &mut dyn FnMut(&[u8]) -> Result<bool>,
) -> Result<()> {
    let Some(root) = read_root(storage, header, sizes)? else {
        return Ok(());
    };
    // A well-formed tree has at most one node per record plus the root; a crafted one that
    // reuses nodes is stopped once it has shown more records than the header announces.
    let mut budget = Budget {
        nodes: header.total_records.saturating_add(1),
        records: header.total_records,
    };
    walk(storage, header, sizes, &root, f, &mut budget).map(|_| ())
}

struct Budget {
    nodes: u64,
    records: u64,
}

fn walk(
    storage: &Storage,
    header: &BtreeV2Header,
    sizes: Sizes,
    node: &Node,
    f: &mut dyn FnMut(&[u8]) -> Result<bool>,
    budget: &mut Budget,
) -> Result<bool> {
    budget.nodes = budget
        .nodes
        .checked_sub(1)
        .ok_or_else(|| Error::limit("v2 B-tree", header.addr, "more nodes than records"))?;
    for i in 0..=node.len() {
        if let Some(child) = node.children.get(i) {
            let depth = node.depth - 1;
            let sub = read_node(storage, header, sizes, child.addr, depth, child.records)?;
            if !walk(storage, header, sizes, &sub, f, budget)? {
                return Ok(false);
            }
        }
        if let Some(rec) = node.record(i) {
            budget.records = budget.records.checked_sub(1).ok_or_else(|| {
                Error::limit(
                    "v2 B-tree",
                    header.addr,
                    "more records than the header counts",
                )
            })?;
            if !f(rec)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Descend from the root comparing records with `cmp` (how the sought key compares to the
/// record: `Less` = the key sorts before it) and return the matching record, if any. Reads one
/// node per level.
pub fn find(
    storage: &Storage,
    header: &BtreeV2Header,
    sizes: Sizes,
    cmp: &mut dyn FnMut(&[u8]) -> Result<Ordering>,
) -> Result<Option<Vec<u8>>> {
    let Some(mut node) = read_root(storage, header, sizes)? else {
        return Ok(None);
    };
    // Depth strictly decreases, so at most `depth + 1` nodes are read.
    loop {
        match node.search(cmp)? {
            Ok(i) => return Ok(node.record(i).map(<[u8]>::to_vec)),
            Err(i) => {
                let Some(child) = node.children.get(i).copied() else {
                    return Ok(None);
                };
                node = read_node(
                    storage,
                    header,
                    sizes,
                    child.addr,
                    node.depth - 1,
                    child.records,
                )?;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
