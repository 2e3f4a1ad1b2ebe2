//! Chunk indexes behind one interface: given a chunk's coordinates (in chunk units), where is
//! it stored, how big is it and which filters were skipped. Lookups are lazy: only the nodes
//! on the path to the chunk are read, and nodes are cached inside each index (LRUs sharing the mount's byte budget, `budget`).
//!
//! Index types (layout message "chunk indexing type"): the v1 B-tree of layouts v1-3, and
//! for layouts v4/v5 a single chunk, implicit (no index: chunks back to back), a fixed array,
//! an extensible array, or a v2 B-tree. The array indexes and the implicit index number
//! chunks linearly:
//! * implicit and fixed array: row-major over the chunk grid of the **maximum** dimensions,
//!   `ceil(max dim / chunk dim)` per dimension ([`linear_index`] with [`max_chunk_grid`]);
//! * extensible array: the same, after moving the unlimited dimension to the front
//!   ([`ea_linear_index`]); the other dimensions keep their order and their maximum extent.
//!
//! Both were checked against libhdf5 2.0 (files in `testdata/`, written by
//! `testdata/make_testdata.py`).
//!
//! Every read of an index structure from the file (a node, a block, a page; a cache hit
//! reads nothing) is logged at trace level under the target [`READS_TARGET`], with the
//! structure's kind and address (`log_read`): a benchmark runs the daemon with
//! `RUST_LOG=h5mount::chunk_index::reads=trace` and counts structures read more than once,
//! which the daemon's system calls cannot tell apart from its reads of chunk data.

pub mod btree_v1;
pub mod btree_v2;
pub mod extensible_array;
pub mod fixed_array;
pub mod implicit;
mod node_cache;
pub mod single;

use crate::error::{Error, Result};
use crate::format::fixed_array::ChunkElement;
use crate::format::messages::layout::ChunkIndexSpec;
use crate::io::{Sizes, Storage, UNDEFINED_ADDR};

/// The log target of `log_read`.
pub const READS_TARGET: &str = "h5mount::chunk_index::reads";

/// Log, at trace level under [`READS_TARGET`], that the index structure `kind` at file
/// address `addr` is read from the file (`part`: the page of a paged block, else 0), as
/// the line `read KIND ADDR PART`.
pub(crate) fn log_read(kind: &str, addr: u64, part: u64) {
    log::trace!(target: READS_TARGET, "read {kind} {addr} {part}");
}

/// Where one chunk is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRecord {
    /// Relative file address of the stored chunk.
    pub addr: u64,
    /// Stored size in bytes (after filters).
    pub size: u64,
    /// Filters skipped for this chunk (bit i set = filter i of the pipeline not applied).
    pub filter_mask: u32,
}

/// Everything an index needs to know about its dataset.
#[derive(Clone, Debug)]
pub struct IndexParams {
    pub storage: Storage,
    pub sizes: Sizes,
    /// Current dataset dimensions.
    pub dims: Vec<u64>,
    /// Maximum dimensions (`u64::MAX` = unlimited); equal to `dims` when not stored.
    pub max_dims: Vec<u64>,
    /// Chunk dimensions in elements.
    pub chunk_dims: Vec<u64>,
    /// Bytes per element.
    pub element_size: u32,
    /// True when the dataset has a filter pipeline (index entries then carry sizes and masks).
    pub filtered: bool,
    /// Layout message version (5 stores filtered sizes with "Size of Lengths" bytes).
    pub layout_version: u8,
    /// Layout flags (v4/v5).
    pub layout_flags: u8,
    /// What the index's caches may keep, shared by the mount's indexes.
    pub budget: std::sync::Arc<crate::cache::budget::IndexBudget>,
}

impl IndexParams {
    /// Uncompressed size of one full chunk in bytes (`None` on overflow).
    pub fn chunk_bytes(&self) -> Option<u64> {
        self.chunk_dims
            .iter()
            .try_fold(self.element_size as u64, |a, &d| a.checked_mul(d))
    }

    /// Check the shape parameters every index relies on: equal ranks, no zero chunk
    /// dimension, a chunk size that fits in 64 bits. `addr` names the index in errors.
    pub fn validate(&self, what: &'static str, addr: u64) -> Result<()> {
        let rank = self.chunk_dims.len();
        if self.dims.len() != rank || self.max_dims.len() != rank {
            return Err(Error::corrupt(
                what,
                addr,
                format!(
                    "rank mismatch: dims {}, max dims {}, chunk dims {rank}",
                    self.dims.len(),
                    self.max_dims.len()
                ),
            ));
        }
        if rank > crate::format::limits::MAX_RANK {
            return Err(Error::corrupt(what, addr, format!("rank {rank}")));
        }
        if self.chunk_dims.contains(&0) {
            return Err(Error::corrupt(what, addr, "zero chunk dimension"));
        }
        if self.chunk_bytes().is_none() {
            return Err(Error::corrupt(what, addr, "chunk size overflows"));
        }
        Ok(())
    }

    /// True when `coords` name a chunk inside the current dataset extent.
    pub fn in_grid(&self, coords: &[u64]) -> bool {
        coords.len() == self.dims.len()
            && coords
                .iter()
                .zip(self.dims.iter().zip(&self.chunk_dims))
                .all(|(&c, (&d, &cd))| c < d.div_ceil(cd))
    }

    /// Turn an array-index element into a record: `None` when never written; unfiltered
    /// elements get the full chunk size and mask 0.
    pub(crate) fn record(&self, e: ChunkElement) -> Option<ChunkRecord> {
        if e.addr == UNDEFINED_ADDR {
            return None;
        }
        Some(ChunkRecord {
            addr: e.addr,
            // validate() made sure chunk_bytes() is Some.
            size: e.size.or_else(|| self.chunk_bytes()).unwrap_or(0),
            filter_mask: e.filter_mask,
        })
    }
}

/// Chunks per dimension over `extent`: `ceil(extent / chunk)`; an unlimited extent
/// (`u64::MAX`) stays unlimited. `None` when a chunk dimension is 0 or ranks differ.
pub fn chunk_grid(extent: &[u64], chunk_dims: &[u64]) -> Option<Vec<u64>> {
    if extent.len() != chunk_dims.len() {
        return None;
    }
    extent
        .iter()
        .zip(chunk_dims)
        .map(|(&e, &c)| match (e, c) {
            (_, 0) => None,
            (u64::MAX, _) => Some(u64::MAX),
            (e, c) => Some(e.div_ceil(c)),
        })
        .collect()
}

/// The chunk grid of the maximum dimensions, which the implicit, fixed-array and
/// extensible-array indexes number their chunks over.
pub fn max_chunk_grid(params: &IndexParams) -> Option<Vec<u64>> {
    chunk_grid(&params.max_dims, &params.chunk_dims)
}

/// Row-major linear number of the chunk at `coords` in a grid of `grid` chunks per dimension.
/// The first dimension may be unlimited (`u64::MAX`): it is the slowest and never bounds the
/// others. `None` when a coordinate is outside the grid or the number overflows.
pub fn linear_index(coords: &[u64], grid: &[u64]) -> Option<u64> {
    if coords.len() != grid.len() {
        return None;
    }
    let mut idx = 0u64;
    for (i, (&c, &g)) in coords.iter().zip(grid).enumerate() {
        if c >= g || (g == u64::MAX && i != 0) {
            return None;
        }
        idx = idx.checked_mul(g)?.checked_add(c)?;
    }
    Some(idx)
}

/// The extensible array's chunk number: the unlimited dimension is moved to the front, the
/// others keep their order, and the number is row-major over the maximum chunk grid (libhdf5
/// "swizzled" coordinates). `None` when there is not exactly one unlimited dimension, or the
/// coordinates are outside the grid.
pub fn ea_linear_index(coords: &[u64], params: &IndexParams) -> Option<u64> {
    let grid = max_chunk_grid(params)?;
    let mut unlimited = grid.iter().enumerate().filter(|(_, &g)| g == u64::MAX);
    let (u, _) = unlimited.next()?;
    if unlimited.next().is_some() || coords.len() != grid.len() {
        return None;
    }
    let mut sg = Vec::with_capacity(grid.len());
    let mut sc = Vec::with_capacity(grid.len());
    sg.push(grid[u]);
    sc.push(coords[u]);
    for i in (0..grid.len()).filter(|&i| i != u) {
        sg.push(grid[i]);
        sc.push(coords[i]);
    }
    linear_index(&sc, &sg)
}

/// Most index nodes (or blocks) [`ChunkIndex::prepare`] names at one level: of a wider
/// range, the first from its start (the lookups reach the rest themselves).
pub const MAX_PREPARED: usize = 256;

/// A chunk index.
pub trait ChunkIndex: Send + Sync + std::fmt::Debug {
    /// Find the chunk whose coordinates, in chunk units, are `coords` (one per dimension).
    /// `Ok(None)` means the chunk was never written (read as fill value).
    fn lookup(&self, coords: &[u64]) -> Result<Option<ChunkRecord>>;

    /// On a source where every read costs a round trip (remote), name to it the parts of
    /// the index that lookups of the chunks from `lo` to `hi` (chunk coordinates, in the
    /// order the index sorts them) will read, so that they are fetched together: one round
    /// trip per level of a tree rather than one per node. What this reads itself is the
    /// nodes above the last level; the last level's are only named (the lookups read them).
    /// Only a hint: the default names nothing, and at most [`MAX_PREPARED`] nodes are named
    /// at a level.
    fn prepare(&self, lo: &[u64], hi: &[u64]) -> Result<()> {
        let _ = (lo, hi);
        Ok(())
    }
}

/// The index of a dataset whose index was never written: libhdf5 creates a chunk index with
/// the first chunk it writes, so until then the layout message holds the undefined address,
/// whatever the index type. Every chunk is unallocated and reads as the fill value.
#[derive(Debug)]
struct Unwritten;

impl ChunkIndex for Unwritten {
    fn lookup(&self, _coords: &[u64]) -> Result<Option<ChunkRecord>> {
        Ok(None)
    }
}

/// Where the index `spec` describes lies (its header, root node or first chunk).
fn index_addr(spec: &ChunkIndexSpec) -> u64 {
    match *spec {
        ChunkIndexSpec::BtreeV1 { addr }
        | ChunkIndexSpec::SingleChunk { addr, .. }
        | ChunkIndexSpec::Implicit { addr }
        | ChunkIndexSpec::FixedArray { addr, .. }
        | ChunkIndexSpec::ExtensibleArray { addr, .. }
        | ChunkIndexSpec::BtreeV2 { addr, .. } => addr,
    }
}

/// Open the index described by a layout message. Cheap: at most the index header is read.
pub fn open(spec: &ChunkIndexSpec, params: IndexParams) -> Result<Box<dyn ChunkIndex>> {
    if index_addr(spec) == UNDEFINED_ADDR {
        params.validate("chunk index", UNDEFINED_ADDR)?;
        return Ok(Box::new(Unwritten));
    }
    Ok(match *spec {
        ChunkIndexSpec::BtreeV1 { addr } => Box::new(btree_v1::BtreeV1Index::open(params, addr)?),
        ChunkIndexSpec::SingleChunk {
            addr,
            filtered_size,
            filter_mask,
        } => Box::new(single::SingleChunkIndex::open(
            params,
            addr,
            filtered_size,
            filter_mask,
        )?),
        ChunkIndexSpec::Implicit { addr } => Box::new(implicit::ImplicitIndex::open(params, addr)?),
        ChunkIndexSpec::FixedArray { addr, .. } => {
            Box::new(fixed_array::FixedArrayIndex::open(params, addr)?)
        }
        ChunkIndexSpec::ExtensibleArray { addr, .. } => {
            Box::new(extensible_array::ExtensibleArrayIndex::open(params, addr)?)
        }
        ChunkIndexSpec::BtreeV2 { addr, .. } => {
            Box::new(btree_v2::BtreeV2Index::open(&params, addr)?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use sha2::{Digest, Sha256};
    use std::num::NonZeroUsize;
    use std::path::{Path, PathBuf};

    #[test]
    fn linear_numbering() {
        assert_eq!(linear_index(&[1, 2], &[3, 4]), Some(6));
        assert_eq!(linear_index(&[3, 0], &[3, 4]), None);
        assert_eq!(linear_index(&[5, 1], &[u64::MAX, 4]), Some(21));
        assert_eq!(linear_index(&[0, 1], &[4, u64::MAX]), None);
        assert_eq!(
            chunk_grid(&[10, u64::MAX], &[3, 2]),
            Some(vec![4, u64::MAX])
        );
        assert_eq!(chunk_grid(&[10], &[0]), None);
    }

    fn empty_params(filtered: bool) -> IndexParams {
        let storage = crate::io::testutil::memory_storage(&[]);
        IndexParams {
            storage,
            sizes: Sizes::DEFAULT,
            dims: vec![10, 6],
            max_dims: vec![u64::MAX, 6],
            chunk_dims: vec![5, 3],
            element_size: 4,
            filtered,
            layout_version: 4,
            layout_flags: 0,
            budget: Default::default(),
        }
    }

    #[test]
    fn unallocated_indexes_have_no_chunks() {
        // An index never written (the undefined address), whatever its type: the file is
        // empty, so any read of an index structure would fail.
        let p = empty_params(false);
        let u = UNDEFINED_ADDR;
        for spec in [
            ChunkIndexSpec::BtreeV1 { addr: u },
            ChunkIndexSpec::ExtensibleArray {
                addr: u,
                max_bits: 32,
                index_elements: 4,
                min_pointers: 4,
                min_elements: 16,
                page_bits: 10,
            },
            ChunkIndexSpec::SingleChunk {
                addr: u,
                filtered_size: None,
                filter_mask: 0,
            },
            ChunkIndexSpec::Implicit { addr: u },
            ChunkIndexSpec::FixedArray {
                addr: u,
                page_bits: 10,
            },
            ChunkIndexSpec::BtreeV2 {
                addr: u,
                node_size: 2048,
                split_percent: 100,
                merge_percent: 40,
            },
        ] {
            let index = open(&spec, p.clone()).unwrap_or_else(|e| panic!("{spec:?}: {e}"));
            assert_eq!(index.lookup(&[1, 1]).unwrap(), None, "{spec:?}");
        }
        // A fixed array or implicit index cannot serve an unlimited dimension.
        assert!(open(&ChunkIndexSpec::Implicit { addr: 0 }, p.clone()).is_err());
        let mut bad = p.clone();
        bad.chunk_dims = vec![0, 3];
        assert!(open(&ChunkIndexSpec::BtreeV1 { addr: u }, bad).is_err());
    }

    #[test]
    fn single_chunk_sizes() {
        let p = empty_params(true);
        let spec = ChunkIndexSpec::SingleChunk {
            addr: 0x800,
            filtered_size: Some(33),
            filter_mask: 2,
        };
        let index = open(&spec, p.clone()).unwrap();
        let rec = ChunkRecord {
            addr: 0x800,
            size: 33,
            filter_mask: 2,
        };
        assert_eq!(index.lookup(&[0, 0]).unwrap(), Some(rec));
        assert_eq!(index.lookup(&[0, 1]).unwrap(), None);
        let spec = ChunkIndexSpec::SingleChunk {
            addr: 0x800,
            filtered_size: None,
            filter_mask: 0,
        };
        let index = open(&spec, p).unwrap();
        assert_eq!(index.lookup(&[0, 0]).unwrap().unwrap().size, 60);
    }

    #[test]
    fn ea_numbering_puts_the_unlimited_dimension_first() {
        let mut p = empty_params(false);
        p.max_dims = vec![10, u64::MAX];
        // Grid over max dims: 2 (dim 0) x unlimited (dim 1); swizzled (dim 1, dim 0).
        assert_eq!(ea_linear_index(&[1, 0], &p), Some(1));
        assert_eq!(ea_linear_index(&[0, 3], &p), Some(6));
        assert_eq!(ea_linear_index(&[2, 0], &p), None);
        p.max_dims = vec![u64::MAX, u64::MAX];
        assert_eq!(ea_linear_index(&[0, 0], &p), None);
    }

    fn params(storage: Storage, d: &Value) -> IndexParams {
        let v = |k: &str| -> Vec<u64> {
            d[k].as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    x.as_i64()
                        .map_or(u64::MAX, |i| if i < 0 { u64::MAX } else { i as u64 })
                })
                .collect()
        };
        IndexParams {
            storage,
            sizes: Sizes::DEFAULT,
            dims: v("dims"),
            max_dims: v("max_dims"),
            chunk_dims: v("chunk_dims"),
            element_size: d["element_size"].as_u64().unwrap() as u32,
            filtered: d["filtered"].as_bool().unwrap(),
            layout_version: d["index"]["version"].as_u64().unwrap() as u8,
            layout_flags: d["index"]["flags"].as_u64().unwrap() as u8,
            budget: Default::default(),
        }
    }

    fn spec(ix: &Value) -> Option<ChunkIndexSpec> {
        let addr = ix["addr"].as_u64().unwrap();
        let b = |k: &str| ix[k].as_u64().unwrap() as u8;
        Some(match ix["type"].as_str().unwrap() {
            "btree_v1" => ChunkIndexSpec::BtreeV1 { addr },
            "single" => ChunkIndexSpec::SingleChunk {
                addr,
                filtered_size: ix["filtered_size"].as_u64(),
                filter_mask: ix["filter_mask"].as_u64().unwrap() as u32,
            },
            "implicit" => ChunkIndexSpec::Implicit { addr },
            "fa" => ChunkIndexSpec::FixedArray {
                addr,
                page_bits: b("page_bits"),
            },
            "ea" => ChunkIndexSpec::ExtensibleArray {
                addr,
                max_bits: b("max_bits"),
                index_elements: b("index_elements"),
                min_pointers: b("min_pointers"),
                min_elements: b("min_elements"),
                page_bits: b("page_bits"),
            },
            "bt2" => ChunkIndexSpec::BtreeV2 {
                addr,
                node_size: ix["node_size"].as_u64().unwrap() as u32,
                split_percent: b("split_percent"),
                merge_percent: b("merge_percent"),
            },
            _ => return None,
        })
    }

    /// A source (a file, or bytes in memory) that asks for hints, as a remote source does,
    /// and records them and its reads.
    #[derive(Debug)]
    pub(crate) struct Recording {
        file: Box<dyn crate::io::ByteSource>,
        /// Ranges named by `prefetch` (true) and ranges read (false), as (offset, length),
        /// in the order they came.
        events: std::sync::Mutex<Vec<(bool, u64, u64)>>,
    }

    impl crate::io::ByteSource for Recording {
        fn len(&self) -> u64 {
            self.file.len()
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
            crate::sync::lock(&self.events).push((false, offset, buf.len() as u64));
            self.file.read_at(offset, buf)
        }
        fn identity(&self) -> String {
            self.file.identity()
        }
        fn name(&self) -> String {
            self.file.name()
        }
        fn remote(&self) -> Option<&dyn crate::io::RemoteSource> {
            Some(self)
        }
    }

    impl crate::io::RemoteSource for Recording {
        fn read_data_at(
            &self,
            offset: u64,
            buf: &mut [u8],
            _: &crate::io::DataHint,
            _: crate::io::ReadCtx,
        ) -> std::io::Result<usize> {
            crate::io::ByteSource::read_at(self, offset, buf)
        }
        fn note_data(&self, _: u64, _: u64, _: &crate::io::DataHint, _: crate::io::ReadCtx) {}
        fn prefetch(&self, ranges: &[(u64, u64)]) {
            let mut e = crate::sync::lock(&self.events);
            e.extend(ranges.iter().map(|&(a, n)| (true, a, n)));
        }
        fn page_size_hint(&self, _: u64) {}
        fn warm_up(&self) {}
        fn current_identity(&self) -> std::io::Result<String> {
            Ok(crate::io::ByteSource::identity(self))
        }
        fn requests(&self) -> crate::io::RequestCounts {
            crate::io::RequestCounts::default()
        }
    }

    impl Recording {
        fn take(&self) -> Vec<(bool, u64, u64)> {
            std::mem::take(&mut *crate::sync::lock(&self.events))
        }
    }

    /// The index reads `rec` recorded (data reads left out): how many, and how many of them
    /// distinct (offset and length).
    fn index_reads(rec: &Recording) -> (usize, usize) {
        let mut reads: Vec<(u64, u64)> = take(rec)
            .into_iter()
            .filter(|e| !e.0)
            .map(|e| (e.1, e.2))
            .collect();
        let n = reads.len();
        reads.sort_unstable();
        reads.dedup();
        (n, reads.len())
    }

    /// What `rec` recorded since last asked: (hint, offset, length), in order.
    pub(crate) fn take(rec: &Recording) -> Vec<(bool, u64, u64)> {
        rec.take()
    }

    /// A [`Recording`] of `path`, and a storage reading through it.
    pub(crate) fn recording(path: &Path) -> (Storage, std::sync::Arc<Recording>) {
        recording_of(Box::new(crate::io::LocalFile::open(path).unwrap()))
    }

    /// A [`Recording`] of the byte image `image` held in memory, and a storage reading
    /// through it.
    pub(crate) fn recording_bytes(image: &[u8]) -> (Storage, std::sync::Arc<Recording>) {
        recording_of(Box::new(crate::io::Memory::new(
            image.to_vec(),
            "test image",
        )))
    }

    fn recording_of(file: Box<dyn crate::io::ByteSource>) -> (Storage, std::sync::Arc<Recording>) {
        let r = std::sync::Arc::new(Recording {
            file,
            events: Default::default(),
        });
        (Storage::from_source(r.clone()), r)
    }

    /// Reads prepare may make of what it did not name first: the index's top (a B-tree's
    /// root, in two reads; an array's index or data block).
    const UNNAMED_TOP_READS: usize = 2;

    /// Check [`ChunkIndex::prepare`] on `index` (opened cold by `open`, over `rec`): for
    /// windows of `window` chunks along the grid, `prepare` of a window's bounding box
    /// reads only what it named before, but for the index's top, and the lookups of every
    /// chunk in the box then read nothing that `prepare` did not read or name. Returns how
    /// many reads the lookups made, all of them named.
    pub(crate) fn check_prepare(
        grid: &[u64],
        rec: &Recording,
        window: u64,
        open: &dyn Fn() -> Box<dyn ChunkIndex>,
    ) -> usize {
        let total: u64 = grid.iter().product();
        let at = |mut k: u64| {
            let mut c = vec![0u64; grid.len()];
            for i in (0..grid.len()).rev() {
                c[i] = k % grid[i];
                k /= grid[i];
            }
            c
        };
        let within = |named: &[(u64, u64)], off: u64, n: u64| {
            named.iter().any(|&(a, m)| a <= off && off + n <= a + m)
        };
        let mut checked = 0;
        let mut k = 0;
        while k < total {
            let (a, b) = (at(k), at((k + window - 1).min(total - 1)));
            let lo: Vec<u64> = a.iter().zip(&b).map(|(x, y)| *x.min(y)).collect();
            let hi: Vec<u64> = a.iter().zip(&b).map(|(x, y)| *x.max(y)).collect();
            let index = open();
            rec.take();
            index.prepare(&lo, &hi).unwrap();
            let mut named = Vec::new();
            let mut unnamed = 0;
            for (hint, off, n) in rec.take() {
                if !hint && !within(&named, off, n) {
                    unnamed += 1;
                }
                named.push((off, n));
            }
            assert!(
                unnamed <= UNNAMED_TOP_READS,
                "chunks {lo:?}..={hi:?}: prepare made {unnamed} reads it had not named"
            );
            // Every chunk of the box, last dimension fastest.
            let mut c = lo.clone();
            loop {
                index.lookup(&c).unwrap();
                let mut i = c.len();
                while i > 0 {
                    i -= 1;
                    if c[i] < hi[i] {
                        c[i] += 1;
                        break;
                    }
                    c[i] = lo[i];
                }
                if c == lo {
                    break;
                }
            }
            for (_, off, n) in rec.take() {
                assert!(
                    within(&named, off, n),
                    "chunks {lo:?}..={hi:?}: a lookup read {n} bytes at {off} that prepare \
                     did not name (named {named:?})"
                );
                checked += 1;
            }
            k += window;
        }
        checked
    }

    #[test]
    fn prepare_names_what_the_lookups_read() {
        // Fixtures whose lookups read more than one block or node: a v1 B-tree of two levels,
        // extensible arrays with super blocks and paged data blocks, fixed arrays.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/layout/chunk_index/testdata");
        let mut total = 0;
        for name in [
            "bt1_3d_lzf",
            "bt1_2d_sparse",
            "ea_1d_140000_page_gap",
            "ea_1d_700_sparse",
            "ea_2d_dim1_250_gzip",
            "ea_3d_mid_lzf",
            "fa_1d_2000_paged",
            "fa_1d_3000_page_gap",
            "fa_3d_sparse_lzf",
        ] {
            let h5 = dir.join(format!("{name}.h5"));
            let d: Value =
                serde_json::from_str(&std::fs::read_to_string(h5.with_extension("json")).unwrap())
                    .unwrap();
            let spec = spec(&d["index"]).unwrap();
            let (storage, rec) = recording(&h5);
            let p = params(storage, &d);
            let grid = chunk_grid(&p.dims, &p.chunk_dims).unwrap();
            let open_cold = || open(&spec, p.clone()).unwrap();
            for window in [1, 7, 64, 500] {
                total += check_prepare(&grid, &rec, window, &open_cold);
            }
        }
        // The lookups did read (what prepare named): the check is not empty.
        assert!(total > 0);
    }

    /// Compare every chunk of the grid with what libhdf5 reported; returns chunks checked.
    fn check_file(h5: &Path) -> usize {
        check_file_with(h5, false) + check_file_with(h5, true)
    }

    /// One pass over a file; `tiny_cache` opens the array and B-tree indexes with caches of
    /// one entry, so every lookup path also runs through eviction.
    fn check_file_with(h5: &Path, tiny_cache: bool) -> usize {
        let d: Value =
            serde_json::from_str(&std::fs::read_to_string(h5.with_extension("json")).unwrap())
                .unwrap();
        let Some(spec) = spec(&d["index"]) else {
            return 0;
        };
        let p = params(Storage::open(h5).unwrap(), &d);
        let grid = chunk_grid(&p.dims, &p.chunk_dims).unwrap();
        let addrs: std::collections::HashSet<u64> = d["addrs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_u64().unwrap())
            .collect();
        let mut expected = std::collections::HashMap::new();
        for c in d["chunks"].as_array().unwrap() {
            let coords: Vec<u64> = c["coords"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            expected.insert(coords, c.clone());
        }
        let storage = p.storage.clone();
        let one = NonZeroUsize::MIN;
        let index: Box<dyn ChunkIndex> = match spec {
            ChunkIndexSpec::BtreeV1 { addr } if tiny_cache => {
                Box::new(btree_v1::BtreeV1Index::with_cache(p, addr, one).unwrap())
            }
            ChunkIndexSpec::FixedArray { addr, .. } if tiny_cache => {
                Box::new(fixed_array::FixedArrayIndex::with_cache(p, addr, one).unwrap())
            }
            ChunkIndexSpec::ExtensibleArray { addr, .. } if tiny_cache => {
                Box::new(extensible_array::ExtensibleArrayIndex::with_cache(p, addr, one).unwrap())
            }
            _ => open(&spec, p).unwrap(),
        };
        let total: u64 = grid.iter().product();
        let mut coords = vec![0u64; grid.len()];
        for _ in 0..total {
            let got = index.lookup(&coords).unwrap();
            let want = expected.get(&coords);
            assert_eq!(
                got.is_some(),
                want.is_some(),
                "{h5:?} chunk {coords:?}: {got:?}"
            );
            if let (Some(got), Some(want)) = (got, want) {
                let ctx = format!("{h5:?} chunk {coords:?}: {got:?} vs {want}");
                assert_eq!(Some(got.size), want["size"].as_u64(), "{ctx}");
                assert_eq!(Some(got.filter_mask as u64), want["mask"].as_u64(), "{ctx}");
                match want["addr"].as_u64() {
                    Some(a) => assert_eq!(got.addr, a, "{ctx}"),
                    None => assert!(addrs.contains(&got.addr), "{ctx}"),
                }
                let bytes = storage.read_vec(got.addr, got.size, "chunk").unwrap();
                let sha: String = Sha256::digest(&bytes)[..8]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                assert_eq!(Some(sha.as_str()), want["sha"].as_str(), "{ctx}");
            }
            // Odometer increment, last dimension fastest.
            for i in (0..coords.len()).rev() {
                coords[i] += 1;
                if coords[i] < grid[i] {
                    break;
                }
                coords[i] = 0;
            }
        }
        // Outside the grid: no chunk, no panic.
        let mut beyond = grid.clone();
        assert_eq!(index.lookup(&beyond).unwrap(), None);
        beyond[0] = u64::MAX;
        assert!(index.lookup(&beyond).is_ok_and(|r| r.is_none()));
        expected.len()
    }

    /// Each node of a v1 B-tree is read once in a pass over every chunk, even with caches
    /// of one entry (the leaves no longer push out the root), and by eight threads looking
    /// up the same chunks at once (one reads a node, the others wait for it).
    #[test]
    fn btree_v1_nodes_are_read_once() {
        let h5 = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/layout/chunk_index/testdata/bt1_3d_lzf.h5");
        let d: Value =
            serde_json::from_str(&std::fs::read_to_string(h5.with_extension("json")).unwrap())
                .unwrap();
        let Some(ChunkIndexSpec::BtreeV1 { addr }) = spec(&d["index"]) else {
            panic!("not a v1 B-tree");
        };
        let all = |index: &btree_v1::BtreeV1Index, grid: &[u64]| {
            let total: u64 = grid.iter().product();
            let mut found = 0;
            for i in 0..total {
                let (mut rest, mut coords) = (i, vec![0; grid.len()]);
                for (c, g) in coords.iter_mut().zip(grid).rev() {
                    (*c, rest) = (rest % g, rest / g);
                }
                found += usize::from(index.lookup(&coords).unwrap().is_some());
            }
            found
        };
        let reads_once = |rec: &Recording, what: &str| {
            let (n, distinct) = index_reads(rec);
            assert_eq!(n, distinct, "{what}: a node read more than once");
            n
        };
        let (storage, rec) = recording(&h5);
        let p = params(storage.clone(), &d);
        let grid = chunk_grid(&p.dims, &p.chunk_dims).unwrap();
        let tiny = btree_v1::BtreeV1Index::with_cache(p, addr, NonZeroUsize::MIN).unwrap();
        assert_eq!(all(&tiny, &grid), d["chunks"].as_array().unwrap().len());
        let nodes = reads_once(&rec, "one entry per cache");
        assert!(nodes >= 3, "a root and two leaves at least: {nodes} reads");
        let shared = btree_v1::BtreeV1Index::open(params(storage, &d), addr).unwrap();
        let start = std::sync::Barrier::new(8);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    start.wait();
                    all(&shared, &grid)
                });
            }
        });
        assert_eq!(reads_once(&rec, "eight threads"), nodes);
    }

    /// Every index node, block and page is read once when two threads look up interleaved
    /// stripes of a dataset of many small chunks, one from the front and one from the back
    /// (as two readers of the kernel at different places, or a reader and its prefetch):
    /// each leaf is reached by both, more than a hundred other leaves apart, so the caches
    /// must keep them all, which the mount's index budget allows and entry counts of a few
    /// dozen did not. Files written by libhdf5 through h5py (skipped without it).
    #[test]
    fn interleaved_readers_read_each_node_once() {
        let ok = std::process::Command::new("python3")
            .args(["-c", "import h5py"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: python3 with h5py is needed to write the files");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/layout/chunk_index/testdata");
        let make = "import sys; sys.path.insert(0, sys.argv[1]); from make_testdata import make; \
             o = sys.argv[2]; \
             make(o, 'bt1', 'earliest', (20000,), (1,)); \
             make(o, 'bt2', 'latest', (150, 150), (1, 1), maxshape=(None, None)); \
             make(o, 'fa', 'latest', (100000,), (1,)); \
             make(o, 'ea', 'latest', (100000,), (1,), maxshape=(None,))";
        let st = std::process::Command::new("python3")
            .args(["-c", make])
            .arg(&script)
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "writing the files failed");
        // The budget of a mount with the default `--cache-size` (256 MiB).
        let budget = std::sync::Arc::new(crate::cache::budget::IndexBudget::for_cache(256 << 20));
        for name in ["bt1", "bt2", "fa", "ea"] {
            let h5 = dir.path().join(name).with_extension("h5");
            let d: Value =
                serde_json::from_str(&std::fs::read_to_string(h5.with_extension("json")).unwrap())
                    .unwrap();
            let (storage, rec) = recording(&h5);
            let mut p = params(storage, &d);
            p.budget = budget.clone();
            let grid = chunk_grid(&p.dims, &p.chunk_dims).unwrap();
            let index = open(&spec(&d["index"]).unwrap(), p).unwrap();
            let total: u64 = grid.iter().product();
            const STRIPE: u64 = 7;
            let stripes = total.div_ceil(STRIPE);
            let at = |mut k: u64| {
                let mut c = vec![0u64; grid.len()];
                for (c, g) in c.iter_mut().zip(&grid).rev() {
                    (*c, k) = (k % g, k / g);
                }
                c
            };
            let read = |s: u64| {
                let mut found = 0usize;
                for k in s * STRIPE..((s + 1) * STRIPE).min(total) {
                    found += usize::from(index.lookup(&at(k)).unwrap().is_some());
                }
                found
            };
            let found: usize = std::thread::scope(|sc| {
                let front = sc.spawn(|| (0..stripes).step_by(2).map(read).sum::<usize>());
                let back = sc.spawn(|| {
                    (0..stripes)
                        .rev()
                        .filter(|s| s % 2 == 1)
                        .map(read)
                        .sum::<usize>()
                });
                front.join().unwrap() + back.join().unwrap()
            });
            assert_eq!(found as u64, total, "{name}: every chunk found");
            let (n, distinct) = index_reads(&rec);
            assert!(n > 64, "{name}: only {n} index reads");
            assert_eq!(
                n, distinct,
                "{name}: an index structure read more than once"
            );
            assert!(
                budget.used() <= budget.limit(),
                "{name}: {} bytes kept",
                budget.used()
            );
            drop(index);
            assert_eq!(
                budget.used(),
                0,
                "{name}: a closed index gives its bytes back"
            );
        }
    }

    fn check_dir(dir: &Path) -> usize {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "h5"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no test files in {dir:?}");
        files.iter().map(|f| check_file(f)).sum()
    }

    /// Every committed file (testdata/make_testdata.py): each index type, filtered and not.
    #[test]
    fn real_files_match_libhdf5() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/layout/chunk_index/testdata");
        assert!(check_dir(&dir) > 1000);
    }

    /// Flipping any byte of the first 400 bytes of an index never panics (v1 B-tree nodes
    /// have no checksum, so this reaches the tree walk with hostile keys and addresses).
    #[test]
    fn corrupt_index_bytes_do_not_panic() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/layout/chunk_index/testdata");
        for name in [
            "bt1_3d_lzf",
            "bt1_2d_sparse",
            "fa_3d_sparse_lzf",
            "ea_1d_700_sparse",
            "ea_1d_140000_page_gap",
            "fa_1d_2000_paged",
        ] {
            let h5 = dir.join(name).with_extension("h5");
            let d: Value =
                serde_json::from_str(&std::fs::read_to_string(h5.with_extension("json")).unwrap())
                    .unwrap();
            let spec = spec(&d["index"]).unwrap();
            let orig = std::fs::read(&h5).unwrap();
            let start = d["index"]["addr"].as_u64().unwrap() as usize;
            for pos in start..(start + 400).min(orig.len()) {
                let mut bytes = orig.clone();
                bytes[pos] ^= 0x5a;
                // Over a source that asks for hints, so that prepare runs too.
                let (storage, _rec) = recording_bytes(&bytes);
                let p = params(storage, &d);
                let grid = chunk_grid(&p.dims, &p.chunk_dims).unwrap();
                let Ok(index) = open(&spec, p) else { continue };
                let total: u64 = grid.iter().product();
                let last: Vec<u64> = grid.iter().map(|g| g - 1).collect();
                let _ = index.prepare(&vec![0; grid.len()], &last);
                let _ = index.prepare(&last, &vec![u64::MAX; grid.len()]);
                for n in 0..total.min(150) {
                    let mut rest = n;
                    let coords: Vec<u64> = grid
                        .iter()
                        .rev()
                        .map(|&g| {
                            let c = rest % g;
                            rest /= g;
                            c
                        })
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    let _ = index.lookup(&coords);
                }
            }
        }
    }

    /// The large dev-only cases: set H5MOUNT_CHUNKIDX_LARGE to a directory written by
    /// `make_testdata.py DIR --large`.
    #[test]
    fn large_files_match_libhdf5() {
        if let Some(dir) = std::env::var_os("H5MOUNT_CHUNKIDX_LARGE") {
            check_dir(Path::new(&dir));
        }
    }
}
