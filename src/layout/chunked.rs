//! Layout: chunked storage.
//!
//! The dataset is cut into equal chunks (spec: "Data Layout Message", layout class 2; chunks
//! at the upper edges are stored full size, the part outside the dataset being junk). A read
//! of the byte image goes:
//!
//! 1. Bytes → elements: `[offset, end)` becomes the element range `[e0, e1)` covering it (the
//!    first and last elements may be partial; each copy is clipped to the byte range).
//! 2. Elements → boxes: a range of C-order positions is the union of at most `2·rank − 1`
//!    disjoint boxes (`decompose`): partial rows completing the trailing dimensions, one
//!    slab of whole planes, then the partial rows that end the range.
//! 3. Boxes → chunks: every chunk a box touches is fetched once for that box, through the
//!    shared cache (key: dataset id, linear chunk number in the chunk grid), and the
//!    box ∩ chunk intersection is copied out row run by row run.
//!
//! Row runs are made long by merging trailing dimensions first (`Geometry`): if a chunk
//! spans the whole of dimension `j+1` (chunk dim = dataset dim), dimensions `j` and `j+1` are
//! one dimension for copying, both in the chunk and in the dataset. A dataset whose chunks
//! are whole rows thus copies whole chunks with one `memcpy`.
//!
//! A chunk missing from the index reads as the fill value. A present chunk is read with the
//! size its index record gives and decoded by the filter pipeline, unless the dataset has no
//! filters, or layout flag [`DONT_FILTER_PARTIAL_EDGE_CHUNKS`] is set and the chunk crosses the
//! dataset's upper edge (such chunks are stored raw).
//!
//! Unfiltered chunks skip the cache where it would only cost: chunks with long row runs
//! always (`Chunked::direct`), and on a local file small chunks that the read covers whole
//! (no later read of a reader going on through the image needs them again). Their row runs
//! are copied from the file straight into the reader's buffer, gathered so that runs lying
//! together in the file are one source read (the `gather` module): a read of thousands of
//! adjacent chunks of a few bytes each costs a few reads, not one per chunk.

use std::sync::{Arc, OnceLock};

use crate::cache::{dataset_key, ChunkBytes, ChunkCache};
use crate::error::{Error, Result};
use crate::filters::{Pipeline, ScratchPool};
use crate::format::messages::layout::{
    ChunkIndexSpec, ChunkedLayout, DONT_FILTER_PARTIAL_EDGE_CHUNKS,
};
use crate::io::{ReadCtx, Storage, UNDEFINED_ADDR};

use super::chunk_index::{self, ChunkIndex, ChunkRecord, IndexParams};
use super::gather::Gather;
use super::{fill_pattern, LayoutParams};

/// HDF5 limits a chunk to less than 4 GiB (its size is a 32-bit quantity in the v1 B-tree
/// key and in the library); a larger declared chunk is a corrupt or hostile file.
pub const MAX_CHUNK_BYTES: u64 = u32::MAX as u64;

/// Chunks are decoded whole into a buffer of their full size, which may be no larger than
/// the chunk cache, or this when the cache is smaller: a file cannot make a read allocate
/// more (HDF5 allows chunks of nearly 4 GiB).
pub const MIN_CHUNK_LIMIT: u64 = 64 << 20;

/// Dataset and chunk shapes, with trailing dimensions merged where a chunk spans them whole.
#[derive(Clone, Debug)]
struct Geometry {
    /// Rank of the original dataspace.
    rank: usize,
    /// Merged dataset dims (at least one: a scalar is `[1]`).
    dims: Vec<u64>,
    /// Merged chunk dims.
    chunk: Vec<u64>,
    /// For each merged dim, the original dim carrying its chunk coordinate (the others of the
    /// group have coordinate 0); `None` for the scalar case.
    first: Vec<Option<usize>>,
    /// Element strides of the dataset (C order) over merged dims.
    strides: Vec<u64>,
    /// Element strides within a chunk.
    cstrides: Vec<u64>,
    /// Strides of the chunk grid, giving the linear chunk number.
    nstrides: Vec<u64>,
}

impl Geometry {
    /// `dims` and `chunk` have equal length and chunk dims are non-zero. Products saturate:
    /// they are exact whenever the dataset holds an element (the caller checked that the
    /// product of `dims` fits), and never used otherwise.
    fn new(dims: &[u64], chunk: &[u64]) -> Geometry {
        let mut groups: Vec<(u64, u64, Option<usize>)> = Vec::with_capacity(dims.len().max(1));
        if let (Some(&d), Some(&c)) = (dims.last(), chunk.last()) {
            let (mut gd, mut gc, mut gf) = (d, c, dims.len() - 1);
            for j in (0..dims.len() - 1).rev() {
                if gc == gd {
                    gd = gd.saturating_mul(dims[j]);
                    gc = gc.saturating_mul(chunk[j]);
                } else {
                    groups.push((gd, gc, Some(gf)));
                    (gd, gc) = (dims[j], chunk[j]);
                }
                gf = j;
            }
            groups.push((gd, gc, Some(gf)));
            groups.reverse();
        } else {
            groups.push((1, 1, None));
        }
        let m = groups.len();
        let mut g = Geometry {
            rank: dims.len(),
            dims: groups.iter().map(|x| x.0).collect(),
            chunk: groups.iter().map(|x| x.1).collect(),
            first: groups.iter().map(|x| x.2).collect(),
            strides: vec![1; m],
            cstrides: vec![1; m],
            nstrides: vec![1; m],
        };
        for j in (0..m - 1).rev() {
            g.strides[j] = g.strides[j + 1].saturating_mul(g.dims[j + 1]);
            g.cstrides[j] = g.cstrides[j + 1].saturating_mul(g.chunk[j + 1]);
            let n = g.dims[j + 1].div_ceil(g.chunk[j + 1]);
            g.nstrides[j] = g.nstrides[j + 1].saturating_mul(n);
        }
        g
    }
}

/// A box of merged-dimension element coordinates: `start[j] .. start[j] + count[j]`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Region {
    start: Vec<u64>,
    count: Vec<u64>,
}

/// Cut the C-order element range `[a, b)` of an array of shape `dims` (with C-order
/// `strides`) into disjoint boxes, in increasing order. Requires `b <= product(dims)`.
fn decompose(dims: &[u64], strides: &[u64], a: u64, b: u64) -> Vec<Region> {
    let m = dims.len();
    let mut out = Vec::new();
    if a >= b || m == 0 {
        return out;
    }
    // A box at position `cur` spanning `n` steps of dim `j` and all of the dims after it.
    let region = |cur: u64, j: usize, n: u64| {
        let mut start = vec![0; m];
        let mut count = dims.to_vec();
        for i in 0..=j {
            start[i] = (cur / strides[i]) % dims[i];
            count[i] = 1;
        }
        count[j] = n;
        Region { start, count }
    };
    let mut cur = a;
    let mut level = 0;
    // Complete the partial trailing dimensions, innermost first, while the range goes on.
    for j in (1..m).rev() {
        let up = cur.div_ceil(strides[j - 1]) * strides[j - 1];
        if up >= b {
            level = j;
            break;
        }
        if up > cur {
            out.push(region(cur, j, (up - cur) / strides[j]));
            cur = up;
        }
    }
    // Then take whole slabs, outermost first.
    for (j, &stride) in strides.iter().enumerate().skip(level) {
        let n = (b - cur) / stride;
        if n > 0 {
            out.push(region(cur, j, n));
            cur += n * stride;
        }
    }
    out
}

/// Step `idx` through the box `lo..=hi` in C order; false when done.
fn advance(idx: &mut [u64], lo: &[u64], hi: &[u64]) -> bool {
    for j in (0..idx.len()).rev() {
        if idx[j] < hi[j] {
            idx[j] += 1;
            return true;
        }
        idx[j] = lo[j];
    }
    false
}

/// A chunked dataset.
#[derive(Debug)]
pub(crate) struct Chunked {
    storage: Storage,
    spec: ChunkIndexSpec,
    index_params: IndexParams,
    index: OnceLock<Box<dyn ChunkIndex>>,
    pipeline: Pipeline,
    filtered: bool,
    raw_edges: bool,
    es: u64,
    chunk_bytes: usize,
    fill: Option<Vec<u8>>,
    cache: Arc<ChunkCache>,
    /// The buffers its decodes reuse (the mount's).
    scratch: Arc<ScratchPool>,
    id: u64,
    /// The file's id in the cache: the high half of this dataset's cache keys.
    cache_file: u64,
    dims: Vec<u64>,
    chunk_dims: Vec<u64>,
    geom: Geometry,
}

impl Chunked {
    pub(crate) fn new(params: &LayoutParams, layout: &ChunkedLayout) -> Result<Chunked> {
        let id = params.cache_id;
        let rank = params.dims.len();
        if layout.chunk_dims.len() != rank {
            return Err(Error::corrupt(
                "chunked layout",
                id,
                format!(
                    "{} chunk dimensions for a dataspace of rank {rank}",
                    layout.chunk_dims.len()
                ),
            ));
        }
        if layout.chunk_dims.contains(&0) {
            return Err(Error::corrupt(
                "chunked layout",
                id,
                format!("zero chunk dimension in {:?}", layout.chunk_dims),
            ));
        }
        let es = params.element_size as u64;
        let chunk_bytes = layout
            .chunk_dims
            .iter()
            .try_fold(es, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= MAX_CHUNK_BYTES)
            .ok_or_else(|| {
                Error::limit(
                    "chunked layout",
                    id,
                    format!(
                        "chunk {:?} of {es}-byte elements exceeds {MAX_CHUNK_BYTES} bytes",
                        layout.chunk_dims
                    ),
                )
            })?;
        let max_dims = if params.max_dims.len() == rank {
            params.max_dims.clone()
        } else {
            params.dims.clone()
        };
        let filtered = !params.filters.filters.is_empty();
        Ok(Chunked {
            storage: params.storage.clone(),
            spec: layout.index.clone(),
            index_params: IndexParams {
                storage: params.storage.clone(),
                sizes: params.sizes,
                dims: params.dims.clone(),
                max_dims,
                chunk_dims: layout.chunk_dims.clone(),
                element_size: params.element_size,
                filtered,
                layout_version: params.layout.version,
                layout_flags: layout.flags,
                budget: params.cache.index_budget(),
            },
            index: OnceLock::new(),
            pipeline: Pipeline::new(&params.filters),
            filtered,
            raw_edges: layout.flags & DONT_FILTER_PARTIAL_EDGE_CHUNKS != 0,
            es,
            chunk_bytes: chunk_bytes as usize,
            fill: params.fill.clone(),
            cache: params.cache.clone(),
            scratch: params.scratch.clone(),
            id,
            cache_file: params.cache_file,
            dims: params.dims.clone(),
            chunk_dims: layout.chunk_dims.clone(),
            geom: Geometry::new(&params.dims, &layout.chunk_dims),
        })
    }

    /// The dataset's chunk shape, one per dimension.
    pub(crate) fn chunk_dims(&self) -> &[u64] {
        &self.chunk_dims
    }

    /// The merged chunk coordinates of the chunk at dataset chunk coordinates `coords`;
    /// `None` when they are not one chunk's (wrong rank, past the grid, or non-zero in a
    /// dimension merged into another).
    fn merged(&self, coords: &[u64]) -> Option<Vec<u64>> {
        if coords.len() != self.geom.rank || coords.is_empty() {
            return None;
        }
        let inside = coords
            .iter()
            .zip(self.dims.iter().zip(&self.chunk_dims))
            .all(|(&c, (&d, &cd))| c < d.div_ceil(cd).max(1));
        if !inside {
            return None;
        }
        let m: Vec<u64> = self
            .geom
            .first
            .iter()
            .map(|f| f.and_then(|i| coords.get(i).copied()).unwrap_or(0))
            .collect();
        (self.full_coords(&m) == coords).then_some(m)
    }

    /// The stored chunk at dataset chunk coordinates `coords`: its index record and whether
    /// it is stored raw (no filter applies to it); `None` when it was never written or the
    /// coordinates are not a chunk's.
    pub(crate) fn stored_chunk(&self, coords: &[u64]) -> Result<Option<(ChunkRecord, bool)>> {
        match self.merged(coords) {
            Some(m) => self.locate(&m),
            None => Ok(None),
        }
    }

    /// The decoded chunk at dataset chunk coordinates `coords` (the whole chunk, edges
    /// included, as HDF5 stores it), through the chunk cache; `None` when never written.
    pub(crate) fn decoded_chunk(&self, ctx: ReadCtx, coords: &[u64]) -> Result<Option<ChunkBytes>> {
        match self.merged(coords) {
            Some(m) => self.fetch(&self.storage.for_read(ctx), &m),
            None => Ok(None),
        }
    }

    /// The stored bytes of chunk record `rec` (as in the file, filtered).
    pub(crate) fn read_stored(&self, ctx: ReadCtx, rec: &ChunkRecord) -> Result<Vec<u8>> {
        if rec.size > self.storage.available(rec.addr) {
            return Err(Error::truncated(
                "chunk",
                rec.addr,
                rec.size,
                self.storage.available(rec.addr),
            ));
        }
        let mut out = vec![0u8; rec.size as usize];
        self.storage
            .for_read(ctx)
            .read_data(rec.addr, &mut out, "chunk")?;
        Ok(out)
    }

    /// Use `index` instead of opening the one the layout message describes.
    pub(crate) fn set_index(&self, index: Box<dyn ChunkIndex>) {
        let _ = self.index.set(index);
    }

    /// The chunk index, opened on first use. Two threads racing here may both open it; one
    /// result is kept. An error is not remembered (the next read retries).
    fn index(&self) -> Result<&dyn ChunkIndex> {
        if self.index.get().is_none() {
            let opened = chunk_index::open(&self.spec, self.index_params.clone())?;
            let _ = self.index.set(opened);
        }
        match self.index.get() {
            Some(i) => Ok(i.as_ref()),
            None => Err(Error::corrupt("chunk index", self.id, "failed to open")),
        }
    }

    /// True when the chunk at original coordinates `coords` crosses an upper dataset edge.
    fn is_partial_edge(&self, coords: &[u64]) -> bool {
        coords
            .iter()
            .zip(&self.chunk_dims)
            .zip(&self.dims)
            .any(|((&c, &cd), &d)| c.saturating_add(1).saturating_mul(cd) > d)
    }

    /// The dataset's chunk coordinates of the (merged-dimension) chunk `mcoords`.
    fn full_coords(&self, mcoords: &[u64]) -> Vec<u64> {
        let mut coords = vec![0u64; self.geom.rank];
        for (&f, &c) in self.geom.first.iter().zip(mcoords) {
            if let Some(slot) = f.and_then(|i| coords.get_mut(i)) {
                *slot = c;
            }
        }
        coords
    }

    /// The index record of the chunk at merged chunk coordinates `mcoords` (`None`: never
    /// written) and whether it is stored raw (no filters apply); a raw chunk is checked to be
    /// full size and inside the file.
    fn locate(&self, mcoords: &[u64]) -> Result<Option<(ChunkRecord, bool)>> {
        let coords = self.full_coords(mcoords);
        let Some(rec) = self.index()?.lookup(&coords)? else {
            return Ok(None);
        };
        if rec.addr == UNDEFINED_ADDR {
            return Ok(None);
        }
        let full = self.chunk_bytes as u64;
        let raw = !self.filtered || (self.raw_edges && self.is_partial_edge(&coords));
        if !raw && rec.size > max_stored(full) {
            return Err(Error::limit(
                "chunk",
                rec.addr,
                format!(
                    "{} stored bytes for a chunk of {full} bytes: more than its filters can \
                     produce (at most {})",
                    rec.size,
                    max_stored(full)
                ),
            ));
        }
        if raw {
            if rec.size != 0 && rec.size < full {
                return Err(Error::corrupt(
                    "chunk",
                    rec.addr,
                    format!("unfiltered chunk of {} bytes, expected {full}", rec.size),
                ));
            }
            if full > self.storage.available(rec.addr) {
                return Err(Error::truncated(
                    "chunk",
                    rec.addr,
                    full,
                    self.storage.available(rec.addr),
                ));
            }
        }
        Ok(Some((rec, raw)))
    }

    /// Read and decode the chunk at merged chunk coordinates `mcoords`; `None` if the index
    /// has no such chunk. The result is the cache's shared buffer, written in place: an
    /// evicted chunk of the same size when one is free, else a fresh one. While it decodes,
    /// the load holds a cache reservation for the result and, for a filtered chunk, its
    /// stored bytes and one intermediate stage.
    fn load(&self, st: &Storage, mcoords: &[u64]) -> Result<Option<ChunkBytes>> {
        let Some((rec, raw)) = self.locate(mcoords)? else {
            return Ok(None);
        };
        let n = self.chunk_bytes;
        let full = n as u64;
        // The decode buffer is allocated whole before the chunk's bytes are even read: a
        // file may declare chunks of up to 4 GiB, even for a dataset of a few elements.
        let limit = self.cache.capacity().max(MIN_CHUNK_LIMIT);
        if full > limit {
            return Err(Error::limit(
                "chunk",
                rec.addr,
                format!(
                    "a decoded chunk of {full} bytes exceeds the {limit}-byte limit (the chunk \
                     cache size, at least {MIN_CHUNK_LIMIT}); a larger cache size allows it"
                ),
            ));
        }
        let extra = if raw {
            0
        } else {
            rec.size.saturating_add(full)
        };
        let footprint = full.saturating_add(extra);
        let _one_large = self.cache.large_decode(footprint);
        let mut room = self.cache.reserve(footprint, n);
        let mut shared = room
            .take_buffer()
            .filter(ChunkBytes::is_unique)
            .unwrap_or_else(|| ChunkBytes::zeroed(n));
        let Some(out) = shared.get_mut() else {
            return Err(Error::corrupt("chunk", rec.addr, "chunk buffer is shared"));
        };
        // The chunk is kept decoded (or as it is) in the chunk cache: its stored bytes are
        // read once, and a remote source lets their pages go.
        if raw {
            st.read_data_once(rec.addr, out, "chunk")?;
        } else {
            self.pipeline.decode_from(
                st,
                rec.addr,
                rec.size,
                rec.filter_mask,
                out,
                &self.scratch,
            )?;
        }
        drop(room);
        Ok(Some(shared))
    }

    /// Whether reads copy this dataset's chunks from the file straight into the reader's
    /// buffer, uncached: unfiltered chunks with long row runs (a read per run, or per run of
    /// runs adjacent in the file and the buffer; caching
    /// them would cost an extra copy and evict decoded chunks, and the kernel's page cache
    /// already holds the file).
    fn direct(&self) -> bool {
        !self.filtered
            && self.geom.chunk[last_dim(self.geom.dims.len())].saturating_mul(self.es) >= DIRECT_RUN
    }

    /// The regions of image bytes `offset..end` and, for each, the chunks it touches (an
    /// inclusive box of merged chunk coordinates).
    fn regions(&self, offset: u64, end: u64) -> (Vec<Region>, Vec<ChunkBox>) {
        let g = &self.geom;
        let m = g.dims.len();
        let (e0, e1) = (offset / self.es, end.div_ceil(self.es));
        let regions = decompose(&g.dims, &g.strides, e0, e1);
        let spans = regions
            .iter()
            .map(|r| {
                let lo = (0..m).map(|j| r.start[j] / g.chunk[j]).collect();
                let hi = (0..m)
                    .map(|j| (r.start[j] + r.count[j] - 1) / g.chunk[j])
                    .collect();
                (lo, hi)
            })
            .collect();
        (regions, spans)
    }

    /// Tell a remote source which stored chunks image bytes `offset..end` need (see
    /// [`Chunked::hint_chunks`]), before anyone reads them: the prefetch workers that decode
    /// some of a read's chunks then wait for the read's merged requests instead of sending
    /// their own. `read`: the reader who reads these bytes now; their chunks are noted as
    /// its reads (the workers' reads are not the reader's progress). The caller has clipped
    /// the range.
    pub(crate) fn hint(&self, offset: u64, end: u64, read: Option<ReadCtx>) -> Result<()> {
        if !self.storage.wants_hints() || end <= offset {
            return Ok(());
        }
        let (_, spans) = self.regions(offset, end);
        let st = self.storage.for_read(read.unwrap_or(ReadCtx::PREFETCH));
        self.hint_chunks(&st, &spans, self.direct(), true, read.is_some())
    }

    /// Name to a remote source the chunk index nodes that lookups of the chunks of image bytes
    /// `offset..end` will read (see [`ChunkIndex::prepare`]), without looking the chunks up:
    /// the last level's nodes are only named; the levels above it are read here (a round
    /// trip each the first time, cached after). A sequential reader has the index named
    /// further on than its read-ahead, so that when a window's data is named, its chunks'
    /// index nodes are already here and the data's requests go out at once (rather than a
    /// round trip later, on the thread that names them). The caller has clipped the range.
    pub(crate) fn prepare_index(&self, offset: u64, end: u64) -> Result<()> {
        if !self.storage.wants_hints() || end <= offset {
            return Ok(());
        }
        let (_, spans) = self.regions(offset, end);
        self.prepare_spans(&spans)
    }

    /// Name to a remote source the chunks numbered `first..end` in C order of the chunk
    /// grid (last coordinate fastest; the numbers of [`Chunked::stored_chunk`]'s
    /// coordinates): their stored bytes when `data`, which the source fetches together in
    /// the background (merged requests); else only the index nodes that find them (see
    /// [`Chunked::prepare_index`]). For a reader going through chunks one by one in grid
    /// order (a Zarr view's chunk keys), which are not one range of the image. The range is
    /// clipped to the grid. Only a hint: what it cannot read is the reads' to report.
    pub(crate) fn hint_grid(&self, first: u64, end: u64, data: bool) -> Result<()> {
        if !self.storage.wants_hints() || end <= first {
            return Ok(());
        }
        let g = &self.geom;
        let grid: Vec<u64> = g
            .dims
            .iter()
            .zip(&g.chunk)
            .map(|(&d, &c)| d.div_ceil(c))
            .collect();
        let Some(total) = grid.iter().try_fold(1u64, |a, &n| a.checked_mul(n)) else {
            return Ok(());
        };
        let spans: Vec<ChunkBox> = decompose(&grid, &g.nstrides, first, end.min(total))
            .into_iter()
            .map(|r| {
                let hi = r
                    .start
                    .iter()
                    .zip(&r.count)
                    .map(|(s, n)| s + n - 1)
                    .collect();
                (r.start, hi)
            })
            .collect();
        if !data {
            return self.prepare_spans(&spans);
        }
        let st = self.storage.for_read(ReadCtx::PREFETCH);
        self.hint_chunks(&st, &spans, self.direct(), true, false)
    }

    /// [`ChunkIndex::prepare`] for every chunk box of `spans`, span by span: the index nodes
    /// of the chunks from a span's lowest corner to its highest, which are first and last in
    /// any order an index sorts chunks by (coordinates, slowest dimension first, or with the
    /// unlimited dimension moved first). Only a hint: what it cannot read is the lookups' to
    /// report.
    fn prepare_spans(&self, spans: &[ChunkBox]) -> Result<()> {
        let index = self.index()?;
        for (lo, hi) in spans {
            if let Err(e) = index.prepare(&self.full_coords(lo), &self.full_coords(hi)) {
                log::debug!("chunk index prepare: {e}");
                break;
            }
        }
        Ok(())
    }

    /// Fill `buf` with the image bytes from `offset`; the caller has clipped the range.
    /// Fill `buf` with image bytes from `offset` for `ctx` (a prefetch worker's read only
    /// brings the chunks into the cache); the caller has clipped the range.
    pub(crate) fn read(&self, ctx: ReadCtx, offset: u64, buf: &mut [u8]) -> Result<()> {
        let g = &self.geom;
        let m = g.dims.len();
        let end = offset + buf.len() as u64;
        let (regions, spans) = self.regions(offset, end);
        let inside = |k: usize, cc: &[u64]| {
            let (lo, hi) = &spans[k];
            cc.iter()
                .zip(lo.iter().zip(hi))
                .all(|(c, (l, h))| l <= c && c <= h)
        };
        let direct = self.direct();
        // A prefetch worker only wants the chunks in the cache.
        let fetch_only = ctx.prefetch;
        let st = self.storage.for_read(ctx);
        if st.wants_hints() {
            self.hint_chunks(&st, &spans, direct, fetch_only, false)?;
        }
        if fetch_only && direct {
            // Nothing to decode: a remote source fetches the chunks' bytes (just hinted).
            return Ok(());
        }
        // Small unfiltered chunks that this read covers whole are copied from the file as
        // direct ones are, not through the cache: no later read of a reader going on through
        // the image needs them again, and their row runs, gathered, cost a few source reads
        // instead of a cache entry each. Not on a remote source, whose prefetch workers put
        // such chunks in the cache ahead of the reader.
        let whole_direct = !self.filtered && !fetch_only && !st.wants_hints();
        let mut gather = Gather::new(&st);
        let mut cc = vec![0u64; m];
        let mut scratch = Scratch {
            a: vec![0; m],
            b: vec![0; m],
            idx: vec![0; m],
        };
        for (k, (lo, hi)) in spans.iter().enumerate() {
            cc.copy_from_slice(lo);
            loop {
                // A chunk is fetched once per read, by the first region touching it, which
                // also serves the later regions: an uncached chunk is not decoded again.
                if !(0..k).any(|j| inside(j, &cc)) {
                    let held;
                    let src = if direct || (whole_direct && self.covers(offset, end, &cc)) {
                        match self.locate(&cc)? {
                            Some((rec, _)) => Source::File(rec.addr),
                            None => Source::Fill,
                        }
                    } else {
                        held = self.fetch(&st, &cc)?;
                        if fetch_only {
                            if !advance(&mut cc, lo, hi) {
                                break;
                            }
                            continue;
                        }
                        held.as_deref().map_or(Source::Fill, Source::Mem)
                    };
                    for (j, r) in regions.iter().enumerate().skip(k) {
                        if inside(j, &cc) {
                            self.copy_chunk(r, &cc, src, offset, buf, &mut scratch, &mut gather)?;
                        }
                    }
                }
                if !advance(&mut cc, lo, hi) {
                    break;
                }
            }
        }
        gather.finish(buf)
    }

    /// Whether image bytes `offset..end` hold every byte of the chunk at merged chunk
    /// coordinates `cc` that the image shows (its part inside the dataset): its first and
    /// last elements in C order are inside.
    fn covers(&self, offset: u64, end: u64, cc: &[u64]) -> bool {
        let g = &self.geom;
        let (mut first, mut last) = (0u64, 0u64);
        for (j, &c) in cc.iter().enumerate() {
            let lo = c.saturating_mul(g.chunk[j]);
            let hi = lo
                .saturating_add(g.chunk[j])
                .min(g.dims[j])
                .saturating_sub(1);
            first = first.saturating_add(lo.saturating_mul(g.strides[j]));
            last = last.saturating_add(hi.saturating_mul(g.strides[j]));
        }
        first.saturating_mul(self.es) >= offset
            && last.saturating_add(1).saturating_mul(self.es) <= end
    }

    /// Tell a source where every request costs a round trip which chunks the read of the
    /// chunk boxes `spans` is about to fetch (those not cached): it fetches them together,
    /// near ones merged into one request, instead of one request after the other.
    /// `all`: name every chunk, also the one a reader fetches itself (a read names the others
    /// only; a worker's read, or a hint ahead of the read, names all).
    /// `note`: also note every chunk of the boxes, cached or not, to the source as the
    /// reader's progress (chunk by chunk, in file order, as the reader would read them).
    /// `st` is the storage handle of the read (for whom).
    fn hint_chunks(
        &self,
        st: &Storage,
        spans: &[ChunkBox],
        direct: bool,
        all: bool,
        note: bool,
    ) -> Result<()> {
        // The index nodes the lookups below read, named together first: one round trip per
        // level of the index, not one per node.
        self.prepare_spans(spans)?;
        let mut ranges = Vec::new();
        let mut noted = Vec::new();
        let mut cc = vec![0u64; self.geom.dims.len()];
        for (lo, hi) in spans {
            cc.copy_from_slice(lo);
            loop {
                let cached = !direct && self.cache.contains(self.cache_key(&cc));
                if !cached || note {
                    if let Some((rec, raw)) = self.locate(&cc)? {
                        let n = if raw {
                            self.chunk_bytes as u64
                        } else {
                            rec.size
                        };
                        if note {
                            noted.push((rec.addr, n));
                        }
                        if !cached {
                            ranges.push((rec.addr, n));
                        }
                    }
                }
                if ranges.len().max(noted.len()) > MAX_HINTS || !advance(&mut cc, lo, hi) {
                    break;
                }
            }
        }
        // One chunk is fetched by the read itself, unless this is a prefetch worker's.
        if ranges.len() > 1 || (!ranges.is_empty() && all) {
            ranges.sort_unstable();
            ranges.dedup();
            st.prefetch(&ranges);
        }
        noted.sort_unstable();
        noted.dedup();
        for (a, n) in noted {
            st.note_data(a, a.saturating_add(n));
        }
        Ok(())
    }

    /// The cached decoded chunk that holds image bytes `offset..offset + len` as one
    /// contiguous run, and where the run starts in it: the answer to a read without a copy.
    /// `None` (nothing fetched) when the range crosses a chunk or a row boundary of its
    /// chunk, when the dataset's unfiltered chunks are read from the file directly, or when
    /// the chunk was never written. The caller has clipped the range to the image.
    pub(crate) fn shared_run(
        &self,
        ctx: ReadCtx,
        offset: u64,
        len: u64,
    ) -> Result<Option<(ChunkBytes, usize)>> {
        let g = &self.geom;
        let m = g.dims.len();
        if len == 0 || self.direct() {
            return Ok(None);
        }
        let (e0, e1) = (offset / self.es, (offset + len - 1) / self.es);
        let mut cc = vec![0u64; m];
        let (mut chk0, mut chk1) = (0u64, 0u64);
        let (mut r0, mut r1) = (e0, e1);
        for (j, slot) in cc.iter_mut().enumerate() {
            let (i0, i1) = (r0 / g.strides[j], r1 / g.strides[j]);
            (r0, r1) = (r0 % g.strides[j], r1 % g.strides[j]);
            let c = i0 / g.chunk[j];
            // One row of the last (merged) dimension at most: trailing dimensions whose chunk
            // spans the whole extent are merged into it, so any other dimension that differs
            // between the ends crosses a chunk edge or the chunk's padding beyond the extent
            // (a chunk longer than its dimension), even when the element counts agree.
            if i1 / g.chunk[j] != c || (j + 1 < m && i0 != i1) {
                return Ok(None);
            }
            *slot = c;
            chk0 += (i0 - c * g.chunk[j]) * g.cstrides[j];
            chk1 += (i1 - c * g.chunk[j]) * g.cstrides[j];
        }
        // Within one row of one chunk, image order and chunk order agree element for element.
        if chk1 - chk0 != e1 - e0 {
            return Ok(None);
        }
        let Some(data) = self.fetch(&self.storage.for_read(ctx), &cc)? else {
            return Ok(None);
        };
        let start = chk0 * self.es + (offset - e0 * self.es);
        match usize::try_from(start) {
            Ok(s) if (s as u64).saturating_add(len) <= data.len() as u64 => Ok(Some((data, s))),
            _ => Err(Error::corrupt(
                "chunk",
                self.id,
                format!("decoded chunk {cc:?} holds {} bytes", data.len()),
            )),
        }
    }

    /// The decoded chunk at merged chunk coordinates `cc`, through the cache; `None` when the
    /// chunk was never written.
    fn fetch(&self, st: &Storage, cc: &[u64]) -> Result<Option<ChunkBytes>> {
        self.cache
            .get_or_try_load_shared(self.cache_key(cc), || self.load(st, cc))
    }

    /// The chunk cache's key of the chunk at merged chunk coordinates `cc`.
    fn cache_key(&self, cc: &[u64]) -> crate::cache::CacheKey {
        let linear = cc
            .iter()
            .zip(&self.geom.nstrides)
            .fold(0u64, |a, (&c, &n)| a + c * n);
        (dataset_key(self.cache_file, self.id), linear)
    }

    /// Copy region `r` ∩ chunk `cc` (merged coordinates), whose decoded bytes are `chunk`
    /// (`None`: fill value), into `buf` (image bytes from `offset`), one row run at a time;
    /// runs of a chunk read from the file go to `gather`, read by the caller's
    /// [`Gather::finish`].
    #[allow(clippy::too_many_arguments)]
    fn copy_chunk(
        &self,
        r: &Region,
        cc: &[u64],
        chunk: Source<'_>,
        offset: u64,
        buf: &mut [u8],
        s: &mut Scratch,
        gather: &mut Gather<'_>,
    ) -> Result<()> {
        let g = &self.geom;
        let m = g.dims.len();
        let last = m - 1;
        for (j, &c) in cc.iter().enumerate() {
            let cs = c * g.chunk[j];
            s.a[j] = r.start[j].max(cs);
            // Inclusive upper corner of the intersection.
            s.b[j] = (r.start[j] + r.count[j]).min(cs.saturating_add(g.chunk[j])) - 1;
        }
        let es = self.es;
        let end = offset + buf.len() as u64;
        let run = s.b[last] - s.a[last] + 1;
        s.idx.copy_from_slice(&s.a);
        loop {
            let mut img = 0u64;
            let mut chk = 0u64;
            for (j, &i) in s.idx.iter().enumerate() {
                img += i * g.strides[j];
                chk += (i - cc[j] * g.chunk[j]) * g.cstrides[j];
            }
            let img_lo = img * es;
            let lo = img_lo.max(offset);
            let hi = (img_lo + run * es).min(end);
            if lo < hi {
                let (d0, d1) = ((lo - offset) as usize, (hi - offset) as usize);
                let dst = &mut buf[d0..d1];
                match chunk {
                    Source::Fill => fill_pattern(dst, lo, self.fill.as_deref()),
                    Source::File(addr) => {
                        // `locate` checked that the whole chunk lies inside the file.
                        let from = chk * es + (lo - img_lo);
                        gather.add(buf, addr + from, d0, d1 - d0)?;
                    }
                    Source::Mem(data) => {
                        let from = chk * es + (lo - img_lo);
                        let src = usize::try_from(from)
                            .ok()
                            .and_then(|f| data.get(f..f.checked_add(dst.len())?))
                            .ok_or_else(|| {
                                Error::corrupt(
                                    "chunk",
                                    self.id,
                                    format!("decoded chunk {cc:?} holds {} bytes", data.len()),
                                )
                            })?;
                        dst.copy_from_slice(src);
                    }
                }
            }
            if !advance(&mut s.idx[..last], &s.a[..last], &s.b[..last]) {
                break;
            }
        }
        Ok(())
    }
}

/// Where the bytes of one chunk come from during a read.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// Never written: the fill value.
    Fill,
    /// Decoded, from the cache.
    Mem(&'a [u8]),
    /// Stored raw at this relative file address.
    File(u64),
}

/// An inclusive box of merged chunk coordinates: its lowest and highest corners.
type ChunkBox = (Vec<u64>, Vec<u64>);

/// Most chunks one read names in a prefetch hint: a whole prefetch window (at most 64 MiB
/// of image) of chunks of 8 KiB or more. With fewer, the end of a large window was never
/// named, and the workers fetched it a piece at a time, one round trip per two pieces.
const MAX_HINTS: usize = 8192;

/// The most stored bytes a filtered chunk of `full` decoded bytes may have: three times its
/// size plus 64 KiB, more than any chain of the supported filters produces (ZFP at its
/// highest rate doubles float32 data, szip's raw blocks and the block headers of LZ4,
/// bzip2, Blosc and the like add a few percent, checksums a few bytes). A larger size in the
/// chunk index is corrupt, refused before it sizes a buffer or a read (otherwise one bad
/// record in a large file costs an allocation and a read as big as the file).
fn max_stored(full: u64) -> u64 {
    full.saturating_mul(3).saturating_add(64 << 10)
}

/// Index of the last merged dimension (`m` >= 1).
fn last_dim(m: usize) -> usize {
    m.saturating_sub(1)
}

/// Shortest row run (bytes) for which unfiltered chunks are read straight from the file
/// instead of through the chunk cache: below it, one `pread` per run costs more than copying
/// from a cached chunk.
const DIRECT_RUN: u64 = 16 << 10;

/// Per-read buffers reused across chunks: the intersection corners and the row cursor.
struct Scratch {
    a: Vec<u64>,
    b: Vec<u64>,
    idx: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::messages::filter_pipeline::{FilterPipeline, FilterSpec};
    use crate::format::messages::layout::{Layout, LayoutClass};
    use crate::io::Sizes;
    use crate::layout::chunk_index::ChunkRecord;
    use crate::layout::DataReader;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// The test index: the real interface over a map filled by the fixture.
    #[derive(Debug)]
    struct MapIndex(HashMap<Vec<u64>, ChunkRecord>);

    impl ChunkIndex for MapIndex {
        fn lookup(&self, coords: &[u64]) -> Result<Option<ChunkRecord>> {
            Ok(self.0.get(coords).copied())
        }
    }

    fn unravel(mut i: u64, shape: &[u64]) -> Vec<u64> {
        let mut v = vec![0; shape.len()];
        for j in (0..shape.len()).rev() {
            v[j] = i % shape[j];
            i /= shape[j];
        }
        v
    }

    fn ravel(idx: &[u64], shape: &[u64]) -> u64 {
        idx.iter().zip(shape).fold(0, |a, (&i, &d)| a * d + i)
    }

    /// Byte `k` of element `i` of the test data.
    fn value(i: u64, k: u64) -> u8 {
        (i.wrapping_mul(31).wrapping_add(k * 7) % 251) as u8
    }

    struct Fixture {
        reader: DataReader,
        expect: Vec<u8>,
        cache: Arc<ChunkCache>,
    }

    #[derive(Clone)]
    struct Spec<'a> {
        dims: &'a [u64],
        chunk: &'a [u64],
        es: u32,
        fill: Option<Vec<u8>>,
        flags: u8,
        filters: FilterPipeline,
        cache: u64,
    }

    impl<'a> Spec<'a> {
        /// Unfiltered, no fill value, no flags, a 1 MiB cache.
        fn plain(dims: &'a [u64], chunk: &'a [u64], es: u32) -> Spec<'a> {
            Spec {
                dims,
                chunk,
                es,
                fill: None,
                flags: 0,
                filters: FilterPipeline::default(),
                cache: 1 << 20,
            }
        }
    }

    /// The layout parameters of `spec`'s dataset, whose chunks are in `storage`.
    fn layout_params(spec: Spec, storage: Storage, max_dims: Vec<u64>) -> LayoutParams {
        LayoutParams {
            storage,
            sizes: Sizes::DEFAULT,
            layout: Layout {
                version: 3,
                class: LayoutClass::Chunked(ChunkedLayout {
                    flags: spec.flags,
                    chunk_dims: spec.chunk.to_vec(),
                    element_size: spec.es,
                    index: ChunkIndexSpec::BtreeV1 { addr: 0 },
                }),
                legacy_dims: None,
            },
            dims: spec.dims.to_vec(),
            max_dims,
            npoints: spec.dims.iter().product(),
            element_size: spec.es,
            fill: spec.fill,
            filters: spec.filters,
            external: None,
            cache: Arc::new(ChunkCache::new(spec.cache)),
            scratch: Arc::default(),
            cache_id: 0x800,
            cache_file: 0,
        }
    }

    type Counted = crate::io::Counting<crate::io::Memory>;

    /// Write every present chunk (full size, junk 0xEE outside the dataset) to a byte image,
    /// index them in a map, and compute the expected image element by element.
    fn fixture(spec: Spec, present: impl Fn(&[u64]) -> bool) -> Fixture {
        fixture_counted(spec, present, u64::MAX).0
    }

    /// [`fixture`], with 2 KiB of junk (0x77, as an index node would be) after every
    /// `gap_every` chunks written, read through a source that counts its reads.
    fn fixture_counted(
        spec: Spec,
        present: impl Fn(&[u64]) -> bool,
        gap_every: u64,
    ) -> (Fixture, Arc<Counted>) {
        let (dims, chunk) = (spec.dims, spec.chunk);
        let es = spec.es as u64;
        let grid: Vec<u64> = dims
            .iter()
            .zip(chunk)
            .map(|(d, c)| d.div_ceil(*c))
            .collect();
        let chunk_elems: u64 = chunk.iter().product();
        let mut file = vec![0x55u8; 16];
        let mut map = HashMap::new();
        for n in 0..grid.iter().product::<u64>() {
            let cc = unravel(n, &grid);
            if !present(&cc) {
                continue;
            }
            if map.len() as u64 % gap_every == gap_every - 1 {
                file.extend_from_slice(&[0x77; 2048]);
            }
            let addr = file.len() as u64;
            for p in 0..chunk_elems {
                let pos = unravel(p, chunk);
                let global: Vec<u64> = pos
                    .iter()
                    .zip(&cc)
                    .zip(chunk)
                    .map(|((p, c), k)| c * k + p)
                    .collect();
                let inside = global.iter().zip(dims).all(|(g, d)| g < d);
                for k in 0..es {
                    file.push(if inside {
                        value(ravel(&global, dims), k)
                    } else {
                        0xee
                    });
                }
            }
            let size = chunk_elems * es;
            map.insert(
                cc,
                ChunkRecord {
                    addr,
                    size,
                    filter_mask: 0,
                },
            );
        }
        let npoints: u64 = dims.iter().product();
        let mut expect = Vec::new();
        for i in 0..npoints {
            let idx = unravel(i, dims);
            let cc: Vec<u64> = idx.iter().zip(chunk).map(|(i, c)| i / c).collect();
            for k in 0..es {
                expect.push(match (map.contains_key(&cc), &spec.fill) {
                    (true, _) => value(i, k),
                    (false, Some(f)) => f[k as usize],
                    (false, None) => 0,
                });
            }
        }
        let max_dims = dims.to_vec();
        let counted = Arc::new(Counted::new(crate::io::Memory::new(file, "test image")));
        let storage = Storage::from_source(counted.clone());
        let params = layout_params(spec, storage, max_dims);
        let cache = params.cache.clone();
        let reader = DataReader::with_chunk_index(params, Box::new(MapIndex(map))).unwrap();
        let f = Fixture {
            reader,
            expect,
            cache,
        };
        (f, counted)
    }

    fn check_range(f: &Fixture, off: u64, n: usize) {
        let mut buf = vec![0xccu8; n];
        let got = f.reader.read_at(off, &mut buf).unwrap();
        let len = f.expect.len() as u64;
        let want = if off >= len {
            &[][..]
        } else {
            &f.expect[off as usize..(off as usize + n).min(len as usize)]
        };
        assert_eq!(got, want.len(), "count at {off}+{n}");
        assert_eq!(&buf[..got], want, "bytes at {off}+{n}");
    }

    /// Shapes of rank 0-4 with chunk dims smaller than, equal to (so dims merge) or larger
    /// than the dataset's.
    fn shapes() -> impl Strategy<Value = (Vec<u64>, Vec<u64>)> {
        prop::collection::vec((0u64..6, 1u64..7, any::<bool>()), 0..5).prop_map(|v| {
            let dims = v.iter().map(|x| x.0).collect();
            let chunk = v
                .iter()
                .map(|x| if x.2 && x.0 > 0 { x.0 } else { x.1 })
                .collect();
            (dims, chunk)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn runs_match_elementwise_reference(
            (dims, chunk) in shapes(),
            es in 1u32..4,
            seed in any::<u64>(),
            fill in any::<bool>(),
            ranges in prop::collection::vec((0u64..1400, 0usize..1400), 1..6),
            cache in prop::sample::select(vec![0u64, 64, 1 << 20]),
        ) {
            let fill = fill.then(|| (0..es as u8).map(|b| 0xf0 | b).collect());
            let spec = Spec { dims: &dims, chunk: &chunk, es, fill, flags: 0, filters: FilterPipeline::default(), cache };
            let f = fixture(spec, |cc| (cc.iter().fold(seed, |a, &c| a.rotate_left(7) ^ c.wrapping_mul(0x9e37_79b9)) % 4) != 0);
            check_range(&f, 0, f.expect.len() + 3);
            let len = f.expect.len() as u64;
            for (off, n) in ranges {
                check_range(&f, off % (len + 2), n);
                check_shared(&f, off % (len + 2), n as u64);
            }
        }
    }

    /// A shared answer, when given, holds exactly the expected bytes.
    fn check_shared(f: &Fixture, off: u64, n: u64) -> bool {
        match f.reader.read_shared(ReadCtx::default(), off, n).unwrap() {
            Some((data, s)) => {
                let want = &f.expect[off as usize..(off + n) as usize];
                assert_eq!(&data[s..s + n as usize], want, "shared bytes at {off}+{n}");
                true
            }
            None => false,
        }
    }

    /// A pipeline of deflate alone.
    fn deflated() -> FilterPipeline {
        FilterPipeline {
            filters: vec![FilterSpec {
                id: 1,
                flags: 0,
                name: None,
                client_data: vec![4],
            }],
        }
    }

    /// A reader of `params` whose index holds one chunk, at (0, 0): `size` stored bytes at
    /// `addr`.
    fn one_chunk(params: LayoutParams, addr: u64, size: u64) -> DataReader {
        let rec = ChunkRecord {
            addr,
            size,
            filter_mask: 0,
        };
        let map = HashMap::from([(vec![0, 0], rec)]);
        DataReader::with_chunk_index(params, Box::new(MapIndex(map))).unwrap()
    }

    #[test]
    fn chunks_larger_than_the_cache_and_the_floor_are_refused_before_allocating() {
        // 2^23 x 4 four-byte elements: 128 MiB per deflated chunk, for a dataset of 8
        // elements, whose stored bytes are 64.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        std::fs::write(&path, [0u8; 64]).unwrap();
        let open = |cache: u64| {
            let spec = Spec {
                filters: deflated(),
                cache,
                ..Spec::plain(&[2, 4], &[1 << 23, 4], 4)
            };
            let storage = Storage::open(&path).unwrap();
            one_chunk(layout_params(spec, storage, vec![u64::MAX, 4]), 0, 64)
        };
        let mut buf = [0u8; 32];
        let e = open(4 << 20).read_at(0, &mut buf).unwrap_err();
        assert!(e.to_string().contains("exceeds"), "{e}");
        assert!(open(4 << 20)
            .read_shared(ReadCtx::default(), 0, 16)
            .is_err());
        // A cache that large allows it; the stored bytes then fail to inflate.
        let e = open(128 << 20).read_at(0, &mut buf).unwrap_err();
        assert!(!e.to_string().contains("exceeds"), "{e}");
    }

    #[test]
    fn a_stored_size_no_filter_chain_can_produce_is_refused_before_reading() {
        // A deflated chunk of 1 KiB whose index record claims 4 GiB of stored bytes, in a
        // (sparse) file that long: refused without a 4 GiB buffer or read.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        std::fs::File::create(&path)
            .unwrap()
            .set_len((4 << 30) + 4096)
            .unwrap();
        let spec = Spec {
            filters: deflated(),
            ..Spec::plain(&[16, 16], &[16, 16], 4)
        };
        let open = |size: u64| {
            let params = layout_params(spec.clone(), Storage::open(&path).unwrap(), vec![16, 16]);
            one_chunk(params, 4096, size)
        };
        let mut buf = [0u8; 64];
        let e = open(4 << 30).read_at(0, &mut buf).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("4294967296 stored bytes for a chunk of 1024 bytes"),
            "{e}"
        );
        assert!(
            text.contains(&format!("at most {}", 3 * 1024 + (64 << 10))),
            "{e}"
        );
        // Within the bound the bytes are read (zeros, which do not inflate).
        let e = open(2048).read_at(0, &mut buf).unwrap_err();
        assert!(!e.to_string().contains("stored bytes for a chunk"), "{e}");
    }

    #[test]
    fn a_chunk_that_fails_to_decode_keeps_resident_only_what_was_written() {
        const NAME: &str = "layout::chunked::tests::\
                            a_chunk_that_fails_to_decode_keeps_resident_only_what_was_written";
        let Some(rise) = crate::peak::rise_kib(NAME, || {
            // A deflated chunk of 2^22 x 4 four-byte elements (64 MiB, within the floor of
            // the chunk limit) for a dataset of 8 elements, whose 64 stored bytes do not
            // inflate: the decode fails on its first bytes.
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f.bin");
            std::fs::write(&path, [0u8; 64]).unwrap();
            let spec = Spec {
                filters: deflated(),
                cache: 4 << 20,
                ..Spec::plain(&[2, 4], &[1 << 22, 4], 4)
            };
            let storage = Storage::open(&path).unwrap();
            let r = one_chunk(layout_params(spec, storage, vec![u64::MAX, 4]), 0, 64);
            let mut buf = [0u8; 32];
            let e = r.read_at(0, &mut buf).unwrap_err();
            assert!(!e.to_string().contains("exceeds"), "{e}");
        }) else {
            return;
        };
        // With the chunk buffer written with zeros before the decode: 64 MiB.
        assert!(rise < 16 << 10, "peak rose by {rise} KiB");
    }

    #[test]
    fn shared_answers_only_for_one_run_of_one_written_chunk() {
        // Chunks of whole rows merge into one dimension: any range inside a chunk is a run.
        let spec = Spec::plain(&[8, 6], &[2, 6], 2);
        let f = fixture(spec, |cc| cc[0] != 3);
        assert!(check_shared(&f, 0, 24));
        assert!(check_shared(&f, 25, 20));
        assert!(!check_shared(&f, 20, 8), "crosses chunks");
        assert!(!check_shared(&f, 72, 4), "never written");
        assert!(!check_shared(&f, 90, 8), "past the end");
        assert!(!check_shared(&f, 0, 0));
        // Chunks of half rows: runs end at each chunk row.
        let spec = Spec::plain(&[6, 6], &[2, 3], 4);
        let f = fixture(spec, |_| true);
        assert!(check_shared(&f, 13, 11));
        assert!(!check_shared(&f, 8, 8), "crosses chunks");
        assert!(
            !check_shared(&f, 8, 20),
            "both ends in one chunk, but the row between them leaves it"
        );
        // Unfiltered chunks with long rows are read from the file, not the cache.
        let spec = Spec::plain(&[4, 8192], &[1, 8192], 4);
        let f = fixture(spec, |_| true);
        assert!(!check_shared(&f, 0, 4096));
    }

    #[test]
    fn merging_trailing_dims() {
        let g = Geometry::new(&[5, 4, 3], &[2, 4, 3]);
        assert_eq!(
            (g.dims, g.chunk, g.first),
            (vec![60], vec![24], vec![Some(0)])
        );
        let g = Geometry::new(&[5, 4, 3], &[2, 2, 3]);
        assert_eq!((g.dims.clone(), g.chunk.clone()), (vec![5, 12], vec![2, 6]));
        assert_eq!(g.nstrides, vec![2, 1]);
        let g = Geometry::new(&[], &[]);
        assert_eq!((g.dims, g.first), (vec![1], vec![None]));
    }

    #[test]
    fn decompose_into_few_boxes() {
        // 4 x 5 x 6: from (1,2,3) to (3,1,2) exclusive.
        let dims = [4, 5, 6];
        let strides = [30, 6, 1];
        let boxes = decompose(&dims, &strides, 30 + 12 + 3, 90 + 6 + 2);
        let counts: Vec<_> = boxes
            .iter()
            .map(|b| b.count.iter().product::<u64>())
            .collect();
        assert_eq!(counts.iter().sum::<u64>(), 98 - 45);
        assert_eq!(boxes.len(), 5);
        assert_eq!(boxes[0].start, vec![1, 2, 3]);
        assert_eq!(boxes[0].count, vec![1, 1, 3]);
    }

    #[test]
    fn sparse_large_read_and_cache_use() {
        let dims = [300u64, 70];
        let spec = Spec {
            fill: Some(vec![1, 2, 3, 4]),
            ..Spec::plain(&dims, &[16, 9], 4)
        };
        let f = fixture(spec, |cc| cc[0] % 3 != 1);
        check_range(&f, 0, 84_000);
        check_range(&f, 1001, 50_000);
        check_range(&f, 83_990, 100);
        check_range(&f, 84_000, 1);
        let mut b = [0u8; 3];
        assert_eq!(f.reader.read_at(u64::MAX, &mut b).unwrap(), 0);
    }

    #[test]
    fn long_unfiltered_runs_read_from_the_file_not_the_cache() {
        // Chunks of 2 x 5000 four-byte elements span whole rows: 40,000-byte runs, read
        // straight from the file. The middle chunk is missing (fill value).
        let spec = Spec {
            fill: Some(vec![9, 8, 7, 6]),
            ..Spec::plain(&[6, 5000], &[2, 5000], 4)
        };
        let f = fixture(spec, |cc| cc[0] != 1);
        check_range(&f, 0, 120_000);
        check_range(&f, 39_998, 4096);
        check_range(&f, 79_999, 40_003);
        check_range(&f, 119_000, 5000);
        assert_eq!(f.cache.stats().misses + f.cache.stats().hits, 0);
        // Columns split in two chunks: runs of 10,000 bytes go through the cache.
        let spec = Spec::plain(&[6, 5000], &[2, 2500], 4);
        let f = fixture(spec, |_| true);
        check_range(&f, 1, 100_000);
        assert!(f.cache.stats().misses > 0);
    }

    /// Chunks of 16 bytes back to back, 2 KiB of junk after every 64 (an index node), every
    /// 97th never written (fill value): a read of many of them costs a few source reads,
    /// through no cache entry, and each reads back exactly, 1-D (runs in order in the file
    /// and the image) and 2-D (chunks of 2 x 2: each chunk's two rows go to two image rows).
    #[test]
    fn adjacent_small_chunks_cost_few_source_reads() {
        for (dims, chunk) in [(&[16_384u64][..], &[4u64][..]), (&[128, 128], &[2, 2])] {
            let spec = Spec {
                fill: Some(vec![1, 2, 3, 4]),
                ..Spec::plain(dims, chunk, 4)
            };
            let grid: Vec<u64> = dims.iter().zip(chunk).map(|(d, c)| d / c).collect();
            let (f, src) = fixture_counted(spec, |cc| ravel(cc, &grid) % 97 != 5, 64);
            let len = f.expect.len();
            // 4,096 chunks, 62 gaps: 190 KiB of file, within one span.
            check_range(&f, 0, len);
            assert!(src.reads() <= 2, "{dims:?}: {} reads", src.reads());
            assert_eq!(f.cache.stats().misses, 0, "{dims:?}: through the cache");
            // In 4 KiB reads: a few each.
            let before = src.reads();
            for off in (0..len).step_by(4096) {
                check_range(&f, off as u64, 4096);
            }
            let reads = src.reads() - before;
            assert!(
                reads <= 2 * len / 4096,
                "{dims:?}: {reads} reads in 4 KiB reads"
            );
            // Reads that split chunks (and rows of the 2-D one) still read back exactly.
            for off in (0..len).step_by(1000) {
                check_range(&f, off as u64 + 3, 1001);
            }
        }
    }

    #[test]
    fn fetch_only_fills_the_cache_and_leaves_the_buffer() {
        let spec = Spec::plain(&[300, 70], &[16, 9], 4);
        let f = fixture(spec, |_| true);
        let mut buf = vec![0xccu8; 20_000];
        let n = f.reader.read_in(ReadCtx::PREFETCH, 100, &mut buf).unwrap();
        assert_eq!(n, 20_000);
        assert!(buf.iter().all(|&b| b == 0xcc));
        let loaded = f.cache.stats().misses;
        assert!(loaded > 0);
        // Outside `fetch_only` the same range is served from the cache, correctly.
        check_range(&f, 100, 20_000);
        assert_eq!(f.cache.stats().misses, loaded);
    }

    #[test]
    fn each_chunk_decoded_once_per_read() {
        // Elements (1,7) to (6,3) of 10 x 12 in 4 x 5 chunks: three regions (end of row 1,
        // rows 2-5, start of row 6) over six distinct chunks. With no cache room, each chunk
        // must still be loaded only once.
        let spec = Spec {
            cache: 0,
            ..Spec::plain(&[10, 12], &[4, 5], 1)
        };
        let f = fixture(spec, |_| true);
        check_range(&f, 19, 75 - 19);
        assert_eq!(f.cache.stats().misses, 6);
    }

    #[test]
    fn zero_sized_dimension_reads_nothing() {
        let spec = Spec {
            cache: 100,
            ..Spec::plain(&[4, 0, 3], &[2, 2, 2], 2)
        };
        let f = fixture(spec, |_| true);
        assert!(f.reader.is_empty());
        assert_eq!(f.reader.read_at(0, &mut [0u8; 8]).unwrap(), 0);
    }

    #[test]
    fn partial_edge_chunks_stored_raw_when_flagged() {
        // A filter this test never implements: full chunks would have to be decoded, but
        // partial edge chunks (flag bit 0) are read raw.
        let filters = FilterPipeline {
            filters: vec![FilterSpec {
                id: 1,
                flags: 0,
                name: None,
                client_data: vec![6],
            }],
        };
        let spec = Spec {
            dims: &[5, 3],
            chunk: &[2, 3],
            es: 1,
            fill: None,
            flags: DONT_FILTER_PARTIAL_EDGE_CHUNKS,
            filters,
            cache: 100,
        };
        let f = fixture(spec, |_| true);
        // Row 4 lies in chunk (2, 0), which crosses the edge of dim 0.
        check_range(&f, 12, 3);
    }

    #[test]
    fn bad_chunk_shapes_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [0u8; 4]).unwrap();
        let mk = |chunk: Vec<u64>| LayoutParams {
            storage: Storage::open(&path).unwrap(),
            sizes: Sizes::DEFAULT,
            layout: Layout {
                version: 3,
                class: LayoutClass::Chunked(ChunkedLayout {
                    flags: 0,
                    chunk_dims: chunk,
                    element_size: 8,
                    index: ChunkIndexSpec::BtreeV1 { addr: 0 },
                }),
                legacy_dims: None,
            },
            dims: vec![10, 10],
            max_dims: vec![10, 10],
            npoints: 100,
            element_size: 8,
            fill: None,
            filters: FilterPipeline::default(),
            external: None,
            cache: Arc::new(ChunkCache::new(0)),
            scratch: Arc::default(),
            cache_id: 0x42,
            cache_file: 0,
        };
        assert!(matches!(
            DataReader::new(mk(vec![2])),
            Err(Error::Corrupt { addr: 0x42, .. })
        ));
        assert!(matches!(
            DataReader::new(mk(vec![2, 0])),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            DataReader::new(mk(vec![1 << 20, 1 << 20])),
            Err(Error::Limit { .. })
        ));
    }
}
