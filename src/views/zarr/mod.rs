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
//! dimensions, a few MiB each), each a slice of its image; a scalar one chunk.
//!
//! ## Codecs
//! A chunk key's bytes are either the stored chunk as it is in the file (pass-through:
//! the dataset's filters map byte for byte onto codecs the Zarr format names, and the
//! client decodes) or the decoded chunk under the plain `bytes` codec (v2: no compressor
//! and no filters). [`ZarrArray::encoding`] says which, and why.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};
use crate::io::ReadCtx;
use crate::model::{Dataset, File, ObjectId};

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
#[allow(dead_code)] // pass-through is built by the codec mapping, next
#[derive(Clone, Debug, PartialEq, Eq)]
enum Encoding {
    /// The stored chunk as it is, decoded by the client with these codecs (v3 `codecs`
    /// after `bytes`; v2 `filters` and `compressor`).
    PassThrough {
        v3: Vec<Value>,
        v2_filters: Vec<Value>,
        v2_compressor: Value,
    },
    /// Decoded chunks, and why.
    Decoded { why: String },
}

/// One dataset as a Zarr array (see the module docs).
#[derive(Debug)]
pub struct ZarrArray {
    ds: Arc<Dataset>,
    opts: ZarrOptions,
    shape: Vec<u64>,
    chunks: Vec<u64>,
    grid: Grid,
    /// Bytes of one element.
    itemsize: u64,
    /// v2 `dtype` (`<f4`) and v3 `data_type` (`float32`).
    dtype_v2: Value,
    dtype_v3: Value,
    /// Little-endian (or one byte) elements: v3 names the endianness in its `bytes` codec.
    little: bool,
    fill_v2: Value,
    fill_v3: Value,
    encoding: Encoding,
    attributes: Map<String, Value>,
    dimension_names: Option<Vec<Value>>,
}

impl ZarrArray {
    /// The array of dataset `ds` of `file`.
    pub fn new(file: &Arc<File>, ds: &Arc<Dataset>, opts: ZarrOptions) -> Result<ZarrArray> {
        let _ = file;
        let info = &ds.info;
        let (descr, sub) = crate::views::npy::descr(&info.dtype)?;
        let dtype = descr.trim_matches('\'').to_string();
        if !sub.is_empty() || dtype.starts_with('[') {
            return Err(Error::unsupported(
                "Zarr data type",
                format!("numpy type {descr}"),
            ));
        }
        let (dtype_v3, little) = v3_type(&dtype)
            .ok_or_else(|| Error::unsupported("Zarr data type", format!("numpy type {descr}")))?;
        let itemsize = u64::from(info.dtype.size);
        let shape = info.shape.clone();
        let (grid, chunks) = match ds.chunk_dims() {
            Some(c) => (Grid::Stored, c.to_vec()),
            None => virtual_grid(&shape, itemsize),
        };
        let fill = info.fill_value.as_deref();
        let fill_v3 = fill_json(&dtype, fill, true);
        let fill_v2 = fill_json(&dtype, fill, false);
        Ok(ZarrArray {
            ds: ds.clone(),
            opts,
            shape,
            chunks,
            grid,
            itemsize,
            dtype_v2: Value::String(dtype),
            dtype_v3: Value::String(dtype_v3.to_string()),
            little,
            fill_v2,
            fill_v3,
            encoding: Encoding::Decoded {
                why: "decoded chunks".into(),
            },
            attributes: Map::new(),
            dimension_names: None,
        })
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

    /// One line saying how chunks are served and why (the array directory's xattr).
    pub fn encoding(&self) -> String {
        match &self.encoding {
            Encoding::PassThrough { v3, .. } => format!(
                "pass-through: {}",
                v3.iter()
                    .filter_map(|c| c.get("name").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Encoding::Decoded { why } => format!("decoded: {why}"),
        }
    }

    /// The metadata documents of the array's directory.
    pub fn metadata(&self) -> Documents {
        let shape: Vec<Value> = self.shape.iter().map(|&d| json!(d)).collect();
        let chunks: Vec<Value> = self.chunks.iter().map(|&d| json!(d)).collect();
        match self.opts.version {
            ZarrVersion::V3 => {
                let mut codecs = vec![json!({"name": "bytes", "configuration": {
                    "endian": if self.little { "little" } else { "big" }}})];
                if let Encoding::PassThrough { v3, .. } = &self.encoding {
                    codecs.extend(v3.iter().cloned());
                }
                let mut m = json!({
                    "zarr_format": 3,
                    "node_type": "array",
                    "shape": shape,
                    "data_type": self.dtype_v3,
                    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
                    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                    "fill_value": self.fill_v3,
                    "codecs": codecs,
                    "attributes": self.attributes,
                });
                if let (Some(names), Some(o)) = (&self.dimension_names, m.as_object_mut()) {
                    o.insert("dimension_names".into(), Value::Array(names.clone()));
                }
                vec![("zarr.json", m)]
            }
            ZarrVersion::V2 => {
                let (filters, compressor) = match &self.encoding {
                    Encoding::PassThrough {
                        v2_filters,
                        v2_compressor,
                        ..
                    } => (
                        (!v2_filters.is_empty()).then(|| Value::Array(v2_filters.clone())),
                        v2_compressor.clone(),
                    ),
                    Encoding::Decoded { .. } => (None, Value::Null),
                };
                let zarray = json!({
                    "zarr_format": 2,
                    "shape": shape,
                    "chunks": chunks,
                    "dtype": self.dtype_v2,
                    "compressor": compressor,
                    "fill_value": self.fill_v2,
                    "order": "C",
                    "filters": filters,
                    "dimension_separator": ".",
                });
                let mut attrs = self.attributes.clone();
                if let Some(names) = &self.dimension_names {
                    attrs.insert("_ARRAY_DIMENSIONS".into(), Value::Array(names.clone()));
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
                // Canonical decimal only: `01` or `+1` name no chunk.
                (p == &"0" || !p.starts_with('0'))
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

    /// Bytes of one whole decoded chunk.
    fn chunk_bytes(&self) -> u64 {
        self.chunks
            .iter()
            .fold(self.itemsize, |a, &c| a.saturating_mul(c))
    }

    /// Whether chunk `coords` has a key (a stored chunk that was written; every virtual
    /// chunk).
    pub fn chunk_exists(&self, coords: &[u64]) -> Result<bool> {
        match self.grid {
            Grid::Stored => Ok(self.ds.stored_chunk(coords)?.is_some()),
            Grid::Virtual { .. } => Ok(self.parse_chunk_key(&self.chunk_key(coords)).is_some()),
        }
    }

    /// The length of chunk key `coords` without reading it (a stored chunk's size, or a
    /// decoded chunk's); `None` when it has no key.
    pub fn chunk_len(&self, coords: &[u64]) -> Result<Option<u64>> {
        match self.grid {
            Grid::Stored => Ok(self.ds.stored_chunk(coords)?.map(|(rec, _)| {
                if self.is_pass_through() {
                    rec.size
                } else {
                    self.chunk_bytes()
                }
            })),
            Grid::Virtual { .. } if self.shape.is_empty() => Ok(Some(self.ds.len())),
            Grid::Virtual { .. } => Ok(self.chunk_exists(coords)?.then(|| self.chunk_bytes())),
        }
    }

    /// The bytes of chunk key `coords`, read for `ctx`; `None` when it has no key.
    pub fn chunk(&self, ctx: ReadCtx, coords: &[u64]) -> Result<Option<Vec<u8>>> {
        match self.grid {
            Grid::Stored => {
                if let Encoding::PassThrough { .. } = self.encoding {
                    return match self.ds.stored_chunk(coords)? {
                        Some((rec, _)) => self.ds.read_stored_chunk(ctx, &rec).map(Some),
                        None => Ok(None),
                    };
                }
                Ok(self.ds.decoded_chunk(ctx, coords)?.map(|c| c.to_vec()))
            }
            Grid::Virtual { rows } => {
                if self.shape.is_empty() {
                    let image = crate::io::read_fully(self.ds.len(), "Zarr chunk", |o, b| {
                        self.ds.read_in(ctx, o, b)
                    })?;
                    return Ok(Some(image));
                }
                let Some(&c0) = coords.first() else {
                    return Ok(None);
                };
                let row = self.chunk_bytes() / rows.max(1);
                let start = c0.saturating_mul(rows).saturating_mul(row);
                let full = self.chunk_bytes();
                let have = self.ds.len().saturating_sub(start).min(full);
                let mut out = vec![0u8; full as usize];
                let mut done = 0u64;
                while done < have {
                    let n = self.ds.read_in(
                        ctx,
                        start + done,
                        &mut out[done as usize..have as usize],
                    )?;
                    if n == 0 {
                        return Err(Error::corrupt("Zarr chunk", start, "image ended early"));
                    }
                    done += n as u64;
                }
                Ok(Some(out))
            }
        }
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

/// The v3 `data_type` of numpy type `dtype` (`<f4`), and whether it is little-endian (or
/// one byte).
fn v3_type(dtype: &str) -> Option<(&'static str, bool)> {
    let (order, rest) = dtype.split_at(1);
    let little = order != ">";
    let name = match rest {
        "b1" => "bool",
        "i1" => "int8",
        "i2" => "int16",
        "i4" => "int32",
        "i8" => "int64",
        "u1" => "uint8",
        "u2" => "uint16",
        "u4" => "uint32",
        "u8" => "uint64",
        "f2" => "float16",
        "f4" => "float32",
        "f8" => "float64",
        "c8" => "complex64",
        "c16" => "complex128",
        _ => return None,
    };
    Some((name, little))
}

/// The fill value `bytes` (one element of numpy type `dtype`) as JSON; none: zero.
fn fill_json(dtype: &str, bytes: Option<&[u8]>, v3: bool) -> Value {
    let (order, rest) = dtype.split_at(1);
    let n = rest
        .get(1..)
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(0);
    let zero = vec![0u8; n];
    let b = bytes.filter(|b| b.len() == n).unwrap_or(&zero);
    let mut le = b.to_vec();
    if order == ">" {
        le.reverse();
    }
    let float = |x: f64| -> Value {
        if x.is_nan() {
            json!("NaN")
        } else if x.is_infinite() {
            json!(if x > 0.0 { "Infinity" } else { "-Infinity" })
        } else {
            json!(x)
        }
    };
    let arr = |k: usize| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..k].copy_from_slice(&le[..k]);
        a
    };
    match &rest[..1] {
        "b" => json!(le.first().is_some_and(|&x| x != 0)),
        "i" => {
            let v = i64::from_le_bytes(arr(n));
            let shift = 64 - 8 * n as u32;
            json!((v << shift) >> shift)
        }
        "u" => json!(u64::from_le_bytes(arr(n))),
        "f" => match n {
            2 => float(half_to_f64(u16::from_le_bytes([le[0], le[1]]))),
            4 => float(f64::from(f32::from_le_bytes([le[0], le[1], le[2], le[3]]))),
            _ => float(f64::from_le_bytes(arr(8))),
        },
        "c" => {
            let h = n / 2;
            let part = |s: &[u8]| -> Value {
                if h == 4 {
                    float(f64::from(f32::from_le_bytes([s[0], s[1], s[2], s[3]])))
                } else {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&s[..8]);
                    float(f64::from_le_bytes(a))
                }
            };
            // Byte order was reversed whole for big-endian: the parts swap places.
            let (re, im) = if order == ">" {
                (&le[h..], &le[..h])
            } else {
                (&le[..h], &le[h..])
            };
            json!([part(re), part(im)])
        }
        _ if v3 => json!(0),
        _ => Value::Null,
    }
}

/// An IEEE half as a double.
fn half_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = (h >> 10) & 0x1f;
    let frac = f64::from(h & 0x3ff);
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f64.powi(i32::from(e) - 15),
    }
}

/// The metadata documents of the group `id` of `file` (its attributes: to come).
pub fn group_metadata(file: &Arc<File>, id: ObjectId, opts: ZarrOptions) -> Result<Documents> {
    let _ = (file, id);
    Ok(match opts.version {
        ZarrVersion::V3 => vec![(
            "zarr.json",
            json!({"zarr_format": 3, "node_type": "group", "attributes": {}}),
        )],
        ZarrVersion::V2 => vec![
            (".zgroup", json!({"zarr_format": 2})),
            (".zattrs", json!({})),
        ],
    })
}

/// The bytes of a metadata document as served: pretty JSON, with a final newline.
pub fn document_bytes(v: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(v).unwrap_or_default();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_values_as_json() {
        assert_eq!(
            fill_json("<f4", Some(&f32::NAN.to_le_bytes()), true),
            json!("NaN")
        );
        assert_eq!(
            fill_json(">i2", Some(&(-3i16).to_be_bytes()), true),
            json!(-3)
        );
        assert_eq!(fill_json("<u8", None, true), json!(0));
        assert_eq!(
            fill_json("<f8", Some(&f64::NEG_INFINITY.to_le_bytes()), false),
            json!("-Infinity")
        );
        assert_eq!(fill_json("|b1", Some(&[1]), true), json!(true));
        assert_eq!(half_to_f64(0x3c00), 1.0);
    }

    #[test]
    fn virtual_grids_take_whole_rows() {
        let (_, c) = virtual_grid(&[1000, 1000], 8);
        assert_eq!(c, vec![524, 1000]);
        let (_, c) = virtual_grid(&[3, 1 << 30], 1);
        assert_eq!(c, vec![1, 1 << 30]);
        let (_, c) = virtual_grid(&[], 4);
        assert!(c.is_empty());
    }
}
