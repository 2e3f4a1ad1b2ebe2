//! The Zarr mapping: one HDF5 dataset as a Zarr array, one group as a Zarr group, in Zarr
//! format 3 or 2. It says what the metadata documents hold (`zarr.json`; `.zarray`,
//! `.zattrs`, `.zgroup`) and what each chunk key's bytes are; the filesystem layer serves
//! it as a tree (`--zarr`), and the same mapping is what reference manifests name.
//!
//! ## Chunks
//! The chunk grid of a chunked dataset is its HDF5 chunk shape, and a chunk key exists
//! exactly for each chunk the file holds: a chunk never written has no key, and reads as
//! the array's fill value, as in HDF5. A contiguous, compact, external or virtual dataset
//! gets a regular grid of virtual chunks along its leading dimension (whole trailing
//! dimensions, a few MiB each), each a slice of its image; a scalar one chunk. An array
//! datatype's dimensions follow the dataset's, one chunk along each ([`dtype`]).
//!
//! ## Codecs
//! A chunk key's bytes are either the stored chunk as it is in the file (pass-through:
//! the dataset's filters map byte for byte onto codecs the Zarr format names, and the
//! client decodes; see [`codecs`]) or the decoded chunk under the plain `bytes` codec (v2:
//! no compressor and no filters). [`ZarrArray::encoding`] says which, and why. Under
//! pass-through, a chunk the chain cannot describe as stored (a filter skipped by its mask,
//! a partial edge chunk stored unfiltered) is encoded again with the chain, so that every
//! chunk key decodes the same way. Variable-length strings are served as `vlen-utf8`
//! ([`strings`]).
//!
//! ## Metadata
//! Data types and fill values: [`dtype`]; attributes: [`attrs`]; dimension names from
//! dimension scales: [`dims`].

pub mod attrs;
pub mod codecs;
pub mod dims;
pub mod dtype;
pub mod parquet;
pub mod refs;
pub mod strings;
#[cfg(test)]
mod tests;
mod warm;
#[cfg(test)]
mod warm_tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value};

use self::codecs::Codec;
use self::dims::Dims;
use self::dtype::ZType;
use crate::error::{Error, Result};
use crate::io::ReadCtx;
use crate::model::{Dataset, File, ObjectId};
use crate::sync::lock;
use crate::views::vlen::{HeapCache, RawVlen};

/// Which Zarr format a store is served in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ZarrVersion {
    V2,
    #[default]
    V3,
}

/// How a store is served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZarrOptions {
    pub version: ZarrVersion,
    /// Every chunk decoded under the plain `bytes` codec, for clients that know few codecs.
    pub decoded: bool,
}

/// Bytes a virtual chunk of a dataset stored in one piece spans, about.
pub const VIRTUAL_CHUNK: u64 = 4 << 20;

/// Chunk lengths kept per array for chunks whose length is known only by producing them
/// (re-encoded chunks, strings); the table is emptied when full.
const KEPT_LENGTHS: usize = 4096;

/// Metadata documents: a file name in the array's or group's directory, and its JSON.
pub type Documents = Vec<(&'static str, Value)>;

/// How the chunks of an array are found.
#[derive(Clone, Debug)]
enum Grid {
    /// The dataset's own HDF5 chunks.
    Stored,
    /// Slices of the image: `rows` of the leading dimension each (a scalar: one chunk).
    Virtual { rows: u64 },
}

/// What a chunk key's bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Encoding {
    /// The stored chunk as it is, decoded by the client with these codecs in this order
    /// (encoding order, as the HDF5 pipeline lists its filters).
    PassThrough { chain: Vec<Codec> },
    /// Decoded chunks, and why.
    Decoded { why: String },
}

/// Where a chunk key's bytes are ([`ZarrArray::chunk_ref`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkRef {
    /// `len` bytes of the file from absolute offset `offset`.
    File { offset: u64, len: u64 },
    /// These bytes, found nowhere in the file as they are.
    Bytes(Vec<u8>),
}

/// One dataset as a Zarr array (see the module docs).
#[derive(Debug)]
pub struct ZarrArray {
    file: Arc<File>,
    ds: Arc<Dataset>,
    opts: ZarrOptions,
    /// The dataset's rank (the shape may have an array type's dimensions after it).
    rank: usize,
    shape: Vec<u64>,
    chunks: Vec<u64>,
    grid: Grid,
    /// Bytes of one stored element (a whole array-type element; a vlen reference).
    itemsize: u64,
    ztype: ZType,
    encoding: Encoding,
    attributes: Map<String, Value>,
    dims: Dims,
    /// Lengths of chunks produced to learn them (see [`KEPT_LENGTHS`]).
    lengths: Mutex<HashMap<Vec<u64>, u64>>,
}

impl ZarrArray {
    /// The array of dataset `ds` of `file`.
    pub fn new(file: &Arc<File>, ds: &Arc<Dataset>, opts: ZarrOptions) -> Result<ZarrArray> {
        let info = &ds.info;
        let ztype = dtype::map(&info.dtype, info.fill_value.as_deref())?;
        let itemsize = u64::from(info.dtype.size);
        if itemsize == 0 {
            return Err(Error::unsupported("Zarr data type", "elements of 0 bytes"));
        }
        let base = dims::own_shape(info);
        let rank = base.len();
        let (grid, mut chunks) = match ds.chunk_dims() {
            Some(c) if c.len() == rank => (Grid::Stored, c.to_vec()),
            _ => virtual_grid(&base, itemsize),
        };
        let mut shape = base;
        shape.extend(&ztype.sub);
        chunks.extend(ztype.sub.iter().map(|&d| d.max(1)));
        let mut array = ZarrArray {
            file: file.clone(),
            ds: ds.clone(),
            opts,
            rank,
            shape,
            chunks,
            grid,
            itemsize,
            ztype,
            encoding: Encoding::Decoded { why: String::new() },
            attributes: Map::new(),
            dims: Dims::default(),
            lengths: Mutex::new(HashMap::new()),
        };
        array.encoding = array.choose_encoding();
        // The attribute messages themselves unreadable: the array is still served.
        let all = file.attribute_results(ds.id).unwrap_or_else(|e| {
            log::warn!("Zarr attributes of dataset {:#x}: {e}", ds.id.0);
            Vec::new()
        });
        let readable: Vec<_> = all
            .iter()
            .filter_map(|r| r.as_ref().ok().cloned())
            .collect();
        array.dims = dims::dimensions(file, ds.id, rank, &readable);
        array.attributes = attrs::attributes(file, ds.id, all, &|a| dims::hidden(a, &readable));
        Ok(array)
    }

    /// How chunks are served (see the module docs).
    fn choose_encoding(&self) -> Encoding {
        let decoded = |why: &str| Encoding::Decoded { why: why.into() };
        if self.ztype.vlen_strings.is_some() {
            return decoded("variable-length strings, served as vlen-utf8");
        }
        if self.ztype.space_padded.is_some() {
            return decoded(
                "space-padded strings, served with NULs for padding as libhdf5 reads them",
            );
        }
        if let Grid::Virtual { .. } = self.grid {
            return decoded(&format!(
                "{} layout, served in virtual chunks of its image",
                self.ds.info.layout
            ));
        }
        if self.opts.decoded {
            return decoded("every chunk decoded on request (decoded option)");
        }
        match codecs::chain(&self.ds.info.filters, self.chunk_bytes()) {
            Ok(chain) => Encoding::PassThrough { chain },
            Err(why) => Encoding::Decoded { why },
        }
    }

    /// The array's shape.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The chunk shape.
    pub fn chunks(&self) -> &[u64] {
        &self.chunks
    }

    /// Chunks per dimension.
    pub fn grid_shape(&self) -> Vec<u64> {
        self.shape
            .iter()
            .zip(&self.chunks)
            .map(|(&d, &c)| d.div_ceil(c.max(1)))
            .collect()
    }

    /// Whether chunk keys hold the stored chunks as they are.
    pub fn is_pass_through(&self) -> bool {
        matches!(self.encoding, Encoding::PassThrough { .. })
    }

    /// Whether the dataset is a netCDF dimension without a variable (a dimension scale
    /// netCDF names "not a netCDF variable"): readers of netCDF show it as a dimension
    /// only, not as an array.
    pub fn is_dimension_only(&self) -> bool {
        self.dims.dimension_only
    }

    /// The dimension names, where dimension scales give every dimension one.
    pub fn dimension_names(&self) -> Option<&[String]> {
        self.dims.names.as_deref()
    }

    /// Give the array dimension names where its dimension scales give none (netCDF's
    /// `phony_dim_N`, from [`dims::phony_names`] over the array's group): taken only when
    /// there is one per dimension of the array (an array datatype's too) and the array has
    /// none yet.
    pub fn set_dimension_names(&mut self, names: Vec<String>) {
        if self.dims.names.is_none() && names.len() == self.shape.len() {
            self.dims.names = Some(names);
        }
    }

    /// One line saying how chunks are served and why (the array directory's xattr): the
    /// codecs, in encoding order, after `pass-through: `; the reason after `decoded: `.
    pub fn encoding(&self) -> String {
        match &self.encoding {
            Encoding::PassThrough { chain } => {
                let names: Vec<String> = match self.opts.version {
                    ZarrVersion::V3 => std::iter::once("bytes")
                        .chain(chain.iter().map(Codec::v3_name))
                        .map(String::from)
                        .collect(),
                    ZarrVersion::V2 if chain.is_empty() => vec!["no codec".into()],
                    ZarrVersion::V2 => chain
                        .iter()
                        .map(|c| c.v2()["id"].as_str().unwrap_or("?").to_string())
                        .collect(),
                };
                format!("pass-through: {}", names.join(", "))
            }
            Encoding::Decoded { why } => format!("decoded: {why}"),
        }
    }

    /// The dimension names as JSON, when every dimension has one (an array type's own
    /// dimensions have none: then none is given).
    fn names_json(&self) -> Option<Vec<Value>> {
        let names = self.dims.names.as_ref()?;
        (names.len() == self.shape.len()).then(|| names.iter().map(|n| json!(n)).collect())
    }

    /// The array's attributes as `version` holds them: a `_FillValue` attribute as xarray
    /// reads it (see [`attrs::fill_value_attr`]).
    fn attributes_for(&self, version: ZarrVersion) -> Map<String, Value> {
        let mut attrs = self.attributes.clone();
        if let Some(v) = attrs.get_mut("_FillValue") {
            *v = attrs::fill_value_attr(v, &self.ztype.v3, version == ZarrVersion::V3);
        }
        attrs
    }

    /// The metadata documents of the array's directory.
    pub fn metadata(&self) -> Documents {
        let shape: Vec<Value> = self.shape.iter().map(|&d| json!(d)).collect();
        let chunks: Vec<Value> = self.chunks.iter().map(|&d| json!(d)).collect();
        let chain: &[Codec] = match &self.encoding {
            Encoding::PassThrough { chain } => chain,
            Encoding::Decoded { .. } => &[],
        };
        match self.opts.version {
            ZarrVersion::V3 => {
                let mut codecs = vec![self.ztype.array_codec.clone()];
                codecs.extend(chain.iter().map(Codec::v3));
                let mut m = json!({
                    "zarr_format": 3,
                    "node_type": "array",
                    "shape": shape,
                    "data_type": self.ztype.v3,
                    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
                    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                    "fill_value": self.ztype.fill_v3,
                    "codecs": codecs,
                    "attributes": self.attributes_for(ZarrVersion::V3),
                });
                if let (Some(names), Some(o)) = (self.names_json(), m.as_object_mut()) {
                    o.insert("dimension_names".into(), Value::Array(names));
                }
                vec![("zarr.json", m)]
            }
            ZarrVersion::V2 => {
                // Decoded first: the compressor, then the filters last to first.
                let (compressor, rest) = match chain.split_last() {
                    Some((last, rest)) => (last.v2(), rest),
                    None => (Value::Null, chain),
                };
                let filters: Vec<Value> = self
                    .ztype
                    .v2_object_filter
                    .iter()
                    .cloned()
                    .chain(rest.iter().map(Codec::v2))
                    .collect();
                let zarray = json!({
                    "zarr_format": 2,
                    "shape": shape,
                    "chunks": chunks,
                    "dtype": self.ztype.v2,
                    "compressor": compressor,
                    "fill_value": self.ztype.fill_v2,
                    "order": "C",
                    "filters": (!filters.is_empty()).then_some(Value::Array(filters)),
                    "dimension_separator": ".",
                });
                let mut attrs = self.attributes_for(ZarrVersion::V2);
                if let Some(names) = self.names_json() {
                    attrs.insert("_ARRAY_DIMENSIONS".into(), Value::Array(names));
                }
                vec![(".zarray", zarray), (".zattrs", Value::Object(attrs))]
            }
        }
    }

    /// The key of chunk `coords`, relative to the array's directory (v3 `c/0/1`, v2 `0.1`;
    /// a scalar's: `c`, `0`).
    pub fn chunk_key(&self, coords: &[u64]) -> String {
        let parts: Vec<String> = coords.iter().map(u64::to_string).collect();
        match self.opts.version {
            ZarrVersion::V3 if parts.is_empty() => "c".into(),
            ZarrVersion::V3 => format!("c/{}", parts.join("/")),
            ZarrVersion::V2 if parts.is_empty() => "0".into(),
            ZarrVersion::V2 => parts.join("."),
        }
    }

    /// The chunk coordinates `key` names, if it names a chunk inside the grid.
    pub fn parse_chunk_key(&self, key: &str) -> Option<Vec<u64>> {
        let parts: Vec<&str> = match self.opts.version {
            ZarrVersion::V3 if self.shape.is_empty() => return (key == "c").then(Vec::new),
            ZarrVersion::V3 => key.strip_prefix("c/")?.split('/').collect(),
            ZarrVersion::V2 if self.shape.is_empty() => return (key == "0").then(Vec::new),
            ZarrVersion::V2 => key.split('.').collect(),
        };
        let grid = self.grid_shape();
        if parts.len() != grid.len() {
            return None;
        }
        let coords: Vec<u64> = parts
            .iter()
            .map(|p| {
                // Canonical decimal only: `01`, `+1` or `` name no chunk.
                let digits = !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
                (digits && (p == &"0" || !p.starts_with('0')))
                    .then(|| p.parse::<u64>().ok())
                    .flatten()
            })
            .collect::<Option<_>>()?;
        coords
            .iter()
            .zip(&grid)
            .all(|(c, g)| c < g)
            .then_some(coords)
    }

    /// Bytes of one whole decoded (stored-form) chunk.
    fn chunk_bytes(&self) -> u64 {
        self.chunks[..self.rank]
            .iter()
            .fold(self.itemsize, |a, &c| a.saturating_mul(c))
    }

    /// Elements (of the dataset's type) in one whole chunk.
    fn chunk_elements(&self) -> u64 {
        self.chunk_bytes() / self.itemsize
    }

    /// The dataset chunk coordinates of chunk `coords` (an array type's dimensions, always
    /// chunk 0, dropped); `None` when `coords` name no chunk of the grid.
    fn dataset_coords<'a>(&self, coords: &'a [u64]) -> Option<&'a [u64]> {
        let grid = self.grid_shape();
        let inside = coords.len() == grid.len() && coords.iter().zip(&grid).all(|(c, g)| c < g);
        inside.then(|| &coords[..self.rank])
    }

    /// Whether chunk `coords` has a key (a stored chunk that was written; every virtual
    /// chunk).
    pub fn chunk_exists(&self, coords: &[u64]) -> Result<bool> {
        let Some(dc) = self.dataset_coords(coords) else {
            return Ok(false);
        };
        match self.grid {
            Grid::Stored => Ok(self.ds.stored_chunk(dc)?.is_some()),
            Grid::Virtual { .. } => Ok(true),
        }
    }

    /// The length of chunk key `coords`; `None` when it has no key. A stored chunk served as
    /// it is, and a decoded chunk, are known without reading; a chunk encoded again and a
    /// chunk of strings only by producing it (its length is then kept).
    pub fn chunk_len(&self, coords: &[u64]) -> Result<Option<u64>> {
        let Some(dc) = self.dataset_coords(coords) else {
            return Ok(None);
        };
        let produce = || -> Result<Option<u64>> {
            if let Some(&n) = lock(&self.lengths).get(coords) {
                return Ok(Some(n));
            }
            let Some(bytes) = self.chunk(ReadCtx::default(), coords)? else {
                return Ok(None);
            };
            let n = bytes.len() as u64;
            let mut kept = lock(&self.lengths);
            if kept.len() >= KEPT_LENGTHS {
                kept.clear();
            }
            kept.insert(coords.to_vec(), n);
            Ok(Some(n))
        };
        if self.ztype.vlen_strings.is_some() {
            return produce();
        }
        match (&self.grid, &self.encoding) {
            (Grid::Stored, Encoding::PassThrough { chain }) => match self.ds.stored_chunk(dc)? {
                // No filter: the chunk as stored is the decoded chunk.
                Some(_) if chain.is_empty() => Ok(Some(self.chunk_bytes())),
                Some((rec, false)) if rec.filter_mask == 0 => Ok(Some(rec.size)),
                Some(_) => produce(),
                None => Ok(None),
            },
            (Grid::Stored, Encoding::Decoded { .. }) => {
                Ok(self.ds.stored_chunk(dc)?.map(|_| self.chunk_bytes()))
            }
            (Grid::Virtual { .. }, _) if self.rank == 0 => Ok(Some(self.ds.len())),
            (Grid::Virtual { .. }, _) => Ok(Some(self.chunk_bytes())),
        }
    }

    /// The bytes of chunk key `coords`, read for `ctx`; `None` when it has no key.
    pub fn chunk(&self, ctx: ReadCtx, coords: &[u64]) -> Result<Option<Vec<u8>>> {
        let Some(dc) = self.dataset_coords(coords) else {
            return Ok(None);
        };
        if let Some(pad) = self.ztype.vlen_strings {
            let Some(refs) = self.stored_form(ctx, dc)? else {
                return Ok(None);
            };
            let heaps = HeapCache::default();
            let n = self.chunk_elements();
            let rs = self.itemsize as usize;
            return strings::vlen_utf8(&self.file, &heaps, &refs, rs, n, pad).map(Some);
        }
        match &self.encoding {
            Encoding::PassThrough { chain } => {
                if let Some((rec, false)) = self.ds.stored_chunk(dc)? {
                    if rec.filter_mask == 0 && !chain.is_empty() {
                        let stored = self.ds.read_stored_chunk(ctx, &rec)?;
                        if chain.last() == Some(&Codec::Fletcher32) {
                            return codecs::fix_fletcher32(stored)
                                .map(Some)
                                .map_err(|e| self.chunk_error(rec.addr, e));
                        }
                        return Ok(Some(stored));
                    }
                }
                // Stored otherwise than the chain says (or unfiltered): encode again.
                let Some(decoded) = self.stored_form(ctx, dc)? else {
                    return Ok(None);
                };
                let addr = self.ds.stored_chunk(dc)?.map_or(0, |(r, _)| r.addr);
                codecs::encode(chain, decoded)
                    .map(Some)
                    .map_err(|e| self.chunk_error(addr, e))
            }
            Encoding::Decoded { .. } => {
                let mut chunk = self.stored_form(ctx, dc)?;
                if let (Some(c), Some(n)) = (chunk.as_mut(), self.ztype.space_padded) {
                    dtype::unpad_spaces(c, n);
                }
                Ok(chunk)
            }
        }
    }

    /// Name the whole chunk index to a remote source, which fetches it a level at a time in
    /// few merged requests, before the chunks are looked up one by one (a manifest looks up
    /// every chunk). Nothing for a local file; only a hint (what it cannot read, the lookups
    /// report).
    pub fn prepare_index(&self) {
        let _ = self.ds.prepare_index(0, self.ds.len());
    }

    /// Whether every read of its chunks costs a request (a remote source).
    pub fn is_remote(&self) -> bool {
        self.ds.is_remote()
    }

    /// The stored bytes of chunk `coords`, about (for sizing what to read ahead): a stored
    /// chunk's size in the file (0 when never written), else a whole chunk's decoded size.
    pub fn stored_len(&self, coords: &[u64]) -> Result<u64> {
        let Some(dc) = self.dataset_coords(coords) else {
            return Ok(0);
        };
        match self.grid {
            Grid::Stored => Ok(match self.ds.stored_chunk(dc)? {
                Some((_, true)) => self.chunk_bytes(),
                Some((rec, false)) => rec.size,
                None => 0,
            }),
            Grid::Virtual { .. } => Ok(self.chunk_bytes()),
        }
    }

    /// Name to a remote source the chunks of the keys numbered `first..end` in grid order
    /// (C order; [`ZarrArray::grid_shape`]): their stored bytes when `data`, which the
    /// source fetches together in the background, else the chunk index nodes that find
    /// them. Nothing for a local file; only a hint (what it cannot read, the reads report).
    pub fn hint_keys(&self, first: u64, end: u64, data: bool) {
        let _ = match self.grid {
            // An array type's dimensions are one chunk each: the key numbers are the
            // dataset's chunk numbers.
            Grid::Stored => self.ds.hint_grid(first, end, data),
            Grid::Virtual { .. } if !data => Ok(()),
            // Whole rows of the image each, one after the other.
            Grid::Virtual { .. } => {
                let bytes = self.chunk_bytes();
                let at = first.saturating_mul(bytes);
                self.ds
                    .hint(at, end.saturating_sub(first).saturating_mul(bytes), None)
            }
        };
    }

    /// Where chunk key `coords`'s bytes are, for a reference manifest: a byte range of the
    /// file when the key holds exactly those bytes (a stored chunk served as it is, an
    /// unfiltered chunk, a whole-row slice of a contiguous block), else the bytes themselves
    /// (chunks encoded again, decoded, strings, slices of other layouts). `None` when the
    /// key does not exist. A slice at the end of a contiguous block names a whole chunk's
    /// length when the file holds that many bytes from its start: what lies past the
    /// block's end is past the array's edge, which a reader never uses.
    pub fn chunk_ref(&self, ctx: ReadCtx, coords: &[u64]) -> Result<Option<ChunkRef>> {
        let Some(dc) = self.dataset_coords(coords) else {
            return Ok(None);
        };
        let storage = self.file.storage();
        let in_file = |rel: u64, len: u64| -> Option<ChunkRef> {
            let offset = storage.base().checked_add(rel)?;
            (offset.checked_add(len)? <= storage.file_len())
                .then_some(ChunkRef::File { offset, len })
        };
        let plain = self.ztype.vlen_strings.is_none() && self.ztype.space_padded.is_none();
        let found = match (&self.grid, &self.encoding) {
            (Grid::Stored, Encoding::PassThrough { chain }) if plain => {
                match self.ds.stored_chunk(dc)? {
                    None => return Ok(None),
                    Some((rec, _)) if chain.is_empty() => in_file(rec.addr, self.chunk_bytes()),
                    Some((rec, false))
                        if rec.filter_mask == 0 && chain.last() != Some(&Codec::Fletcher32) =>
                    {
                        in_file(rec.addr, rec.size)
                    }
                    Some((rec, false)) if rec.filter_mask == 0 => {
                        // A Fletcher-32 sum in the old swapped form is served fixed.
                        let stored = self.ds.read_stored_chunk(ctx, &rec)?;
                        let served = codecs::fix_fletcher32(stored.clone())
                            .map_err(|e| self.chunk_error(rec.addr, e))?;
                        if served == stored {
                            in_file(rec.addr, rec.size)
                        } else {
                            return Ok(Some(ChunkRef::Bytes(served)));
                        }
                    }
                    Some(_) => None,
                }
            }
            (Grid::Virtual { rows }, _) if plain && self.rank > 0 => {
                match self.ds.contiguous_addr() {
                    Some(addr) => {
                        let full = self.chunk_bytes();
                        let row = full / (*rows).max(1);
                        let start = dc[0].saturating_mul(*rows).saturating_mul(row);
                        addr.checked_add(start).and_then(|a| in_file(a, full))
                    }
                    None => None,
                }
            }
            _ => None,
        };
        match found {
            Some(r) => Ok(Some(r)),
            None => Ok(self.chunk(ctx, coords)?.map(ChunkRef::Bytes)),
        }
    }

    /// A failure to serve the chunk at `addr` (one log line, by the caller's error path).
    fn chunk_error(&self, addr: u64, detail: String) -> Error {
        Error::corrupt("Zarr chunk", addr, detail)
    }

    /// The whole chunk at dataset chunk coordinates `dc` in the dataset's stored element
    /// form (decoded; for variable-length types the references), edges included: a stored
    /// chunk as HDF5 decodes it, a virtual chunk sliced from the image and padded with
    /// zeros past its end.
    fn stored_form(&self, ctx: ReadCtx, dc: &[u64]) -> Result<Option<Vec<u8>>> {
        let rows = match self.grid {
            Grid::Stored => return Ok(self.ds.decoded_chunk(ctx, dc)?.map(|c| c.to_vec())),
            Grid::Virtual { rows } => rows,
        };
        let c0 = dc.first().copied().unwrap_or(0);
        let full = self.chunk_bytes();
        let row = full / rows.max(1);
        let start = c0.saturating_mul(rows).saturating_mul(row);
        let have = self.ds.len().saturating_sub(start).min(full);
        if self.ztype.vlen_strings.is_some() {
            let raw = RawVlen::open(self.ds.clone(), self.file.sizes().offset)?;
            let mut refs = Vec::new();
            raw.read_elements(start / self.itemsize, have / self.itemsize, &mut refs)?;
            return Ok(Some(refs));
        }
        let n = usize::try_from(full)
            .map_err(|_| Error::unsupported("Zarr chunk", "larger than memory"))?;
        let mut out = vec![0u8; n];
        let mut done = 0u64;
        while done < have {
            let got = self
                .ds
                .read_in(ctx, start + done, &mut out[done as usize..have as usize])?;
            if got == 0 {
                return Err(Error::corrupt("Zarr chunk", start, "image ended early"));
            }
            done += got as u64;
        }
        Ok(Some(out))
    }
}

/// A grid of virtual chunks for an image of `shape` in elements of `itemsize` bytes: whole
/// trailing dimensions, about [`VIRTUAL_CHUNK`] bytes of the leading one.
fn virtual_grid(shape: &[u64], itemsize: u64) -> (Grid, Vec<u64>) {
    let Some((&d0, rest)) = shape.split_first() else {
        return (Grid::Virtual { rows: 1 }, Vec::new());
    };
    let row = rest
        .iter()
        .fold(itemsize, |a, &d| a.saturating_mul(d))
        .max(1);
    let rows = (VIRTUAL_CHUNK / row).clamp(1, d0.max(1));
    let mut chunks = vec![rows];
    chunks.extend(rest.iter().map(|&d| d.max(1)));
    (Grid::Virtual { rows }, chunks)
}

/// The metadata documents of the group `id` of `file`: its attributes (netCDF's own
/// bookkeeping left out, see [`dims`]).
pub fn group_metadata(file: &Arc<File>, id: ObjectId, opts: ZarrOptions) -> Result<Documents> {
    let all = file.attribute_results(id)?;
    let readable: Vec<_> = all
        .iter()
        .filter_map(|r| r.as_ref().ok().cloned())
        .collect();
    let attributes = attrs::attributes(file, id, all, &|a| dims::hidden(a, &readable));
    Ok(match opts.version {
        ZarrVersion::V3 => vec![(
            "zarr.json",
            json!({"zarr_format": 3, "node_type": "group", "attributes": attributes}),
        )],
        ZarrVersion::V2 => vec![
            (".zgroup", json!({"zarr_format": 2})),
            (".zattrs", Value::Object(attributes)),
        ],
    })
}

/// The bytes of a metadata document as served: pretty JSON, with a final newline.
pub fn document_bytes(v: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).unwrap_or_default();
    out.push(b'\n');
    out
}
