//! kerchunk's Parquet layout of a reference manifest: what fsspec's
//! `ReferenceFileSystem` opens lazily (its `LazyReferenceMapper`) when the manifest is a
//! directory, so that a reader of one chunk loads a few thousand references, not millions.
//!
//! The directory holds `.zmetadata`, a JSON object whose `metadata` member holds every
//! metadata document (`.zgroup`, `.zattrs`, `.zarray`, by key) and whose `record_size`
//! member says how many chunk keys a Parquet file holds; and, for each array, a directory
//! at its path holding `refs.<i>.parq`: the rows `i * record_size ..` of the array's chunk
//! keys, numbered in C order over the chunk grid (`ceil(shape / chunks)` per dimension;
//! a scalar's grid is `[1]`), the last file holding what is left. A row's columns are in
//! [`file`]. A file none of whose keys holds a chunk is not written (the reader takes a
//! missing file as missing chunks), nor is anything of an array with no chunks.
//!
//! `.zmetadata` also carries `zarr_consolidated_format: 1`, which zarr-python's
//! consolidated reading asks for, and the manifest's own `h5mount.left_out`.
//!
//! The chunks of an array at the root cannot be placed (a chunk key needs its array's
//! directory), so a manifest of one dataset alone is refused: write its group instead.

mod file;
#[cfg(test)]
mod tests;
mod thrift;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde_json::{Map, Value};

use file::Row;

use super::refs::{consolidated_documents, Entry, Manifest};

/// Chunk keys per Parquet file unless told (fsspec's `LazyReferenceMapper.create`).
pub const DEFAULT_RECORD_SIZE: u64 = 10_000;

/// The most chunk keys per file: a reader holds a whole file in memory, and so does the
/// writer.
pub const MAX_RECORD_SIZE: u64 = 10_000_000;

/// Write manifest `m` in the Parquet layout as the directory `dir`, `record_size` chunk
/// keys per file. A directory `dir` that exists must be empty or such a manifest (only
/// `.zmetadata` and `refs.<i>.parq` files), which is replaced. The message of a failure
/// names what failed.
pub fn write(m: &Manifest, dir: &Path, record_size: u64) -> Result<(), String> {
    if record_size == 0 || record_size > MAX_RECORD_SIZE {
        return Err(format!(
            "record size {record_size}: expected 1 to {MAX_RECORD_SIZE} chunk keys per file"
        ));
    }
    let shown = dir.display();
    let raws: Vec<Option<Cow<[u8]>>> = m
        .refs
        .iter()
        .map(|(_, e)| match e {
            Entry::Bytes(b) => Some(raw_value(b)),
            _ => None,
        })
        .collect();
    // Each array's .zarray, parsed (for its grid), by its path.
    let mut zarrays = Map::new();
    // Each array's chunks, by its path: (chunk key within it, row).
    let mut arrays: BTreeMap<&str, Vec<(&str, Row)>> = BTreeMap::new();
    for ((key, entry), raw) in m.refs.iter().zip(&raws) {
        let row = match entry {
            Entry::Text(t) => {
                if key == ".zarray" || key.ends_with("/.zarray") {
                    let v: Value = serde_json::from_str(t)
                        .map_err(|e| format!("{key}: not a JSON document: {e}"))?;
                    zarrays.insert(key.clone(), v);
                }
                continue;
            }
            Entry::Ref { offset, len } => Row::Ref {
                offset: *offset,
                len: *len,
            },
            Entry::Bytes(b) => Row::Raw(raw.as_deref().unwrap_or(b)),
        };
        let Some((field, chunk)) = key.rsplit_once('/') else {
            return Err(format!(
                "chunk {key} is at the root: a Parquet manifest needs a group at its root \
                 (write the dataset's group, or JSON)"
            ));
        };
        arrays.entry(field).or_default().push((chunk, row));
    }
    prepare(dir)?;
    for (field, chunks) in &arrays {
        let grid = grid(&zarrays, field)?;
        let mut rows = chunks
            .iter()
            .map(|&(chunk, row)| {
                Ok((
                    row_number(chunk, &grid).ok_or_else(|| {
                        format!("{field}/{chunk}: not a chunk key of a grid {grid:?}")
                    })?,
                    row,
                ))
            })
            .collect::<Result<Vec<_>, String>>()?;
        rows.sort_by_key(|r| r.0);
        write_array(dir, &m.url, field, &rows, &grid, record_size)?;
    }
    let text = format!(
        "{{\"metadata\":{},\"record_size\":{record_size},\"zarr_consolidated_format\":1,\
         \"h5mount\":{}}}",
        consolidated_documents(&m.refs),
        m.left_out_json()
    );
    std::fs::write(dir.join(".zmetadata"), text).map_err(|e| format!("{shown}/.zmetadata: {e}"))
}

/// The `raw` value of inline bytes `b`: themselves, unless they begin with `base64:`, which
/// the reader would decode (as in JSON): then encoded.
fn raw_value(b: &[u8]) -> Cow<'_, [u8]> {
    if b.starts_with(b"base64:") {
        Cow::Owned(format!("base64:{}", super::dtype::base64(b)).into_bytes())
    } else {
        Cow::Borrowed(b)
    }
}

/// The chunk grid of the array at `field` (its `.zarray` in `zarrays`), as the reader
/// computes it:
/// `ceil(shape / chunks)` per dimension, `[1]` for a scalar.
fn grid(zarrays: &Map<String, Value>, field: &str) -> Result<Vec<u64>, String> {
    let zarray = zarrays
        .get(&format!("{field}/.zarray"))
        .ok_or_else(|| format!("{field}: chunks without a .zarray"))?;
    if zarray
        .get("dimension_separator")
        .and_then(Value::as_str)
        .unwrap_or(".")
        != "."
    {
        return Err(format!("{field}: chunk keys not separated by '.'"));
    }
    let dims = |name: &str| -> Option<Vec<u64>> {
        zarray
            .get(name)?
            .as_array()?
            .iter()
            .map(Value::as_u64)
            .collect()
    };
    let (Some(shape), Some(chunks)) = (dims("shape"), dims("chunks")) else {
        return Err(format!("{field}/.zarray: no shape and chunks"));
    };
    if shape.len() != chunks.len() || chunks.contains(&0) {
        return Err(format!(
            "{field}/.zarray: shape {shape:?} and chunks {chunks:?} disagree"
        ));
    }
    let grid: Vec<u64> = shape
        .iter()
        .zip(&chunks)
        .map(|(s, c)| s.div_ceil(*c))
        .collect();
    Ok(if grid.is_empty() { vec![1] } else { grid })
}

/// The row of chunk key `chunk` (`i.j.k`) in C order over `grid`; `None` when it is not
/// one of its keys.
fn row_number(chunk: &str, grid: &[u64]) -> Option<u64> {
    let coords: Vec<u64> = chunk
        .split('.')
        .map(|c| c.parse().ok())
        .collect::<Option<_>>()?;
    if coords.len() != grid.len() {
        return None;
    }
    coords.iter().zip(grid).try_fold(0u64, |n, (&c, &g)| {
        (c < g).then_some(())?;
        n.checked_mul(g)?.checked_add(c)
    })
}

/// Write the files of the array at `field`: its `rows` (row number, row), in order, over a
/// grid `grid`, the references naming `url`.
fn write_array(
    dir: &Path,
    url: &str,
    field: &str,
    rows: &[(u64, Row)],
    grid: &[u64],
    record_size: u64,
) -> Result<(), String> {
    let total = grid
        .iter()
        .try_fold(1u64, |a, &g| a.checked_mul(g))
        .ok_or_else(|| format!("{field}: more chunks than can be counted"))?;
    let sub = dir.join(field);
    std::fs::create_dir_all(&sub).map_err(|e| format!("{}: {e}", sub.display()))?;
    let mut seen = HashSet::new();
    let mut rest = rows;
    while let Some(&(first, _)) = rest.first() {
        let record = first / record_size;
        let start = record * record_size;
        let len = record_size.min(total - start);
        let n = rest.iter().take_while(|r| r.0 < start + len).count();
        let mut all = vec![Row::Missing; len as usize];
        for &(i, row) in &rest[..n] {
            if !seen.insert(i) {
                return Err(format!("{field}: chunk {i} given twice"));
            }
            all[(i - start) as usize] = row;
        }
        let path = sub.join(format!("refs.{record}.parq"));
        let bytes = file::write(url, &all).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        rest = &rest[n..];
    }
    Ok(())
}

/// Whether manifest may be written as `dir`: it does not exist, or is an empty directory
/// or a previous Parquet manifest (which writing replaces); the line to print if not.
/// (Checked again when writing.)
pub fn check_target(dir: &Path) -> Result<(), String> {
    replaceable(dir).map(|_| ())
}

/// [`check_target`]; whether `dir` exists and is not empty.
fn replaceable(dir: &Path) -> Result<bool, String> {
    let shown = dir.display();
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(format!("{shown}: {e}")),
        Ok(meta) if !meta.is_dir() => Err(format!("{shown}: exists and is not a directory")),
        Ok(_) => {
            let empty = std::fs::read_dir(dir)
                .map_err(|e| format!("{shown}: {e}"))?
                .next()
                .is_none();
            if !empty && (!dir.join(".zmetadata").is_file() || !only_manifest_files(dir, 0)?) {
                return Err(format!(
                    "{shown}: exists and is not a Parquet reference manifest (only \
                     .zmetadata and refs.N.parq files): not replaced"
                ));
            }
            Ok(!empty)
        }
    }
}

/// Make `dir` an empty directory: create it, or empty a previous Parquet manifest there;
/// anything else that exists is refused, not replaced.
fn prepare(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    if replaceable(dir)? {
        std::fs::remove_dir_all(dir).map_err(|e| format!("{shown}: {e}"))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{shown}: {e}"))
}

/// Whether `dir` holds only directories, `refs.<i>.parq` files and (at the top) one
/// `.zmetadata`: what a Parquet manifest is made of. Bounded in depth.
fn only_manifest_files(dir: &Path, depth: usize) -> Result<bool, String> {
    const MAX_DEPTH: usize = 64;
    if depth > MAX_DEPTH {
        return Ok(false);
    }
    for e in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        let ft = e.file_type().map_err(|e| format!("{}: {e}", e))?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        let ok = if ft.is_dir() {
            only_manifest_files(&e.path(), depth + 1)?
        } else if ft.is_file() {
            (depth == 0 && name == ".zmetadata")
                || name
                    .strip_prefix("refs.")
                    .and_then(|n| n.strip_suffix(".parq"))
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        } else {
            false
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}
