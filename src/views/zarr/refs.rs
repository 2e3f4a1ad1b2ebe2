//! Reference manifests (`h5mount refs`): kerchunk's version-1 JSON, which lets zarr-python,
//! xarray and dask read an HDF5 file straight from where it lies (fsspec's
//! `ReferenceFileSystem`), with no mount and no h5mount in between.
//!
//! The manifest is the Zarr v2 store of the Zarr view, written out: every metadata
//! document (`.zgroup`, `.zattrs`, `.zarray`, and all of them consolidated in `.zmetadata`)
//! inline as JSON text, and every chunk key as
//! either a reference `[url, offset, length]` to the bytes of the file it holds
//! ([`ZarrArray::chunk_ref`]) or, when those bytes are nowhere in the file as they are (a
//! chunk encoded again, decoded, or a string chunk) or are small, the bytes themselves
//! (text as it is when it is ASCII, else `base64:`). Chunks no larger than the inline
//! threshold are written inline whatever they are, as kerchunk does, saving a request each.
//!
//! Never a reference that reads back wrong: an array none of whose chunks can be
//! referenced (its chunks must be decoded by h5mount first: the decoded-only cases of the
//! Zarr view) is written inline only if each of its chunks fits the threshold; otherwise
//! it is left out whole, with the reason, in the manifest's own `h5mount.left_out` member
//! and in [`Manifest::left_out`] (an array with some chunks missing would read as fill
//! value where they are). Chunks a pass-through array serves encoded again (a chunk
//! stored otherwise than its dataset's filters say) are rare and written inline whatever
//! their size.

use std::collections::HashSet;
use std::io::Write;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{document_bytes, group_metadata, ChunkRef, ZarrArray, ZarrOptions, ZarrVersion};
use crate::error::Result;
use crate::io::ReadCtx;
use crate::model::{File, LinkTarget, ObjectId, ObjectKind};

/// Chunks at most this long are written inline by default (kerchunk's default).
pub const DEFAULT_INLINE_THRESHOLD: u64 = 500;

/// How a manifest is written.
#[derive(Clone, Debug)]
pub struct RefsOptions {
    /// The URL the references name (where readers will find the file).
    pub url: String,
    /// Chunks at most this long are written inline.
    pub inline_threshold: u64,
}

/// The value of one key of a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Text: a metadata document.
    Text(String),
    /// A chunk's bytes, written inline (in JSON as they are when they are text, else
    /// `base64:`).
    Bytes(Vec<u8>),
    /// `length` bytes of the file from `offset`: `[url, offset, length]`.
    Ref { offset: u64, len: u64 },
}

impl Entry {
    /// The text of a text entry.
    fn text(&self) -> Option<&str> {
        match self {
            Entry::Text(t) => Some(t),
            Entry::Bytes(_) | Entry::Ref { .. } => None,
        }
    }
}

/// A reference manifest and what it left out.
#[derive(Debug)]
pub struct Manifest {
    /// The store keys and their values, in the order of the walk: kerchunk's `refs`.
    pub refs: Vec<(String, Entry)>,
    /// The URL every reference names.
    pub url: String,
    /// `(path, reason)` of each array left out.
    pub left_out: Vec<(String, String)>,
    /// Arrays written, chunks referenced, chunks written inline.
    pub arrays: u64,
    pub referenced: u64,
    pub inlined: u64,
}

/// The manifest of the group or dataset `root` of `file` (its whole tree, following hard
/// links; an object reached twice is written at its first path only).
pub fn manifest(file: &Arc<File>, root: ObjectId, opts: &RefsOptions) -> Result<Manifest> {
    let zopts = ZarrOptions {
        version: ZarrVersion::V2,
        decoded: false,
    };
    let mut m = Manifest {
        refs: Vec::new(),
        url: opts.url.clone(),
        left_out: Vec::new(),
        arrays: 0,
        referenced: 0,
        inlined: 0,
    };
    // On a remote source, the tree's metadata fetched level by level first.
    super::warm::warm_tree(file, root);
    let mut refs: Vec<(String, Entry)> = Vec::new();
    let mut seen = HashSet::new();
    // (path prefix in the store, object, dimension names its group gives it).
    let mut stack = vec![(String::new(), root, None::<Vec<String>>)];
    while let Some((path, id, phony)) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        match file.kind(id)? {
            ObjectKind::Group => {
                for (name, v) in group_metadata(file, id, zopts)? {
                    refs.push((key(&path, name), text(&v)));
                }
                let names = super::dims::phony_names(file, id);
                let links = file.links(id)?;
                for link in links.iter().rev() {
                    if let LinkTarget::Hard(child) = link.target {
                        let sub = key(&path, link.name);
                        stack.push((sub, child, names.get(&child).cloned()));
                    }
                }
            }
            ObjectKind::Dataset => {
                let shown = if path.is_empty() { "/" } else { &path };
                let ds = match file.dataset(id) {
                    Ok(ds) => ds,
                    Err(e) => {
                        m.left_out.push((shown.to_string(), e.to_string()));
                        continue;
                    }
                };
                let mut array = match ZarrArray::new(file, &ds, zopts) {
                    Ok(a) if a.is_dimension_only() => continue,
                    Ok(a) => a,
                    Err(e) => {
                        m.left_out.push((shown.to_string(), e.to_string()));
                        continue;
                    }
                };
                if let Some(names) = phony {
                    array.set_dimension_names(names);
                }
                match array_refs(&array, &path, opts) {
                    Ok((entries, referenced, inlined)) => {
                        m.arrays += 1;
                        m.referenced += referenced;
                        m.inlined += inlined;
                        refs.extend(entries);
                    }
                    Err(why) => m.left_out.push((shown.to_string(), why)),
                }
            }
            ObjectKind::NamedDatatype | ObjectKind::Unknown => {}
        }
    }
    // Consolidated metadata (Zarr v2's `.zmetadata`): every document in one, so that a
    // reader opens the whole tree with one read, and lists groups without listing keys.
    let docs = consolidated_documents(&refs);
    refs.push((
        ".zmetadata".into(),
        Entry::Text(format!(
            "{{\"zarr_consolidated_format\":1,\"metadata\":{docs}}}"
        )),
    ));
    m.refs = refs;
    Ok(m)
}

/// The `metadata` member of consolidated metadata: every document of `refs` by its key, its
/// text as it is (parsed and written again, a float would not always come back the same).
pub(super) fn consolidated_documents(refs: &[(String, Entry)]) -> String {
    let mut out = String::from("{");
    for (k, v) in refs {
        let name = k.rsplit('/').next().unwrap_or(k);
        let Some(t) = v.text() else { continue };
        if matches!(name, ".zgroup" | ".zattrs" | ".zarray") {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&Value::String(k.clone()).to_string());
            out.push(':');
            out.push_str(t);
        }
    }
    out.push('}');
    out
}

impl Manifest {
    /// What was left out, as the manifest's own `h5mount.left_out` member says it.
    pub(super) fn left_out_json(&self) -> Value {
        let left: Map<String, Value> = self
            .left_out
            .iter()
            .map(|(p, why)| (p.clone(), Value::String(why.clone())))
            .collect();
        json!({"left_out": left})
    }

    /// Write kerchunk's Parquet layout as the directory `dir`, `record_size` chunk keys per
    /// file ([`super::parquet`]); the message of a failure names what failed.
    pub fn write_parquet(
        &self,
        dir: &std::path::Path,
        record_size: u64,
    ) -> std::result::Result<(), String> {
        super::parquet::write(self, dir, record_size)
    }

    /// Write kerchunk's version-1 JSON to `w`, entry by entry (a manifest of millions of
    /// chunks is never made into one JSON value).
    pub fn write_json(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut w = std::io::BufWriter::with_capacity(1 << 20, w);
        w.write_all(b"{\"version\":1,\"refs\":{")?;
        for (i, (k, v)) in self.refs.iter().enumerate() {
            if i > 0 {
                w.write_all(b",")?;
            }
            serde_json::to_writer(&mut w, k)?;
            w.write_all(b":")?;
            match v {
                Entry::Text(t) => serde_json::to_writer(&mut w, t)?,
                Entry::Bytes(b) => serde_json::to_writer(&mut w, &inline(b))?,
                Entry::Ref { offset, len } => {
                    w.write_all(b"[")?;
                    serde_json::to_writer(&mut w, &self.url)?;
                    write!(w, ",{offset},{len}]")?;
                }
            }
        }
        w.write_all(b"},\"h5mount\":")?;
        serde_json::to_writer(&mut w, &self.left_out_json())?;
        w.write_all(b"}")?;
        w.flush()
    }

    /// The manifest as one JSON value (for tests and small files).
    pub fn to_json(&self) -> Value {
        let refs: Map<String, Value> = self
            .refs
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    Entry::Text(t) => Value::String(t.clone()),
                    Entry::Bytes(b) => Value::String(inline(b)),
                    Entry::Ref { offset, len } => json!([self.url, offset, len]),
                };
                (k.clone(), v)
            })
            .collect();
        json!({"version": 1, "refs": refs, "h5mount": self.left_out_json()})
    }
}

/// Manifest entries (key, value), and the counts of chunks referenced and inlined.
type ArrayRefs = (Vec<(String, Entry)>, u64, u64);

/// The manifest entries of `array` at store path `path`, with the counts of chunks
/// referenced and inlined; why it is left out, when it is.
fn array_refs(
    array: &ZarrArray,
    path: &str,
    opts: &RefsOptions,
) -> std::result::Result<ArrayRefs, String> {
    let mut out: Vec<(String, Entry)> = array
        .metadata()
        .iter()
        .map(|(name, v)| (key(path, name), text(v)))
        .collect();
    let (mut referenced, mut inlined) = (0, 0);
    let grid = array.grid_shape();
    let total = grid.iter().try_fold(1u64, |a, &g| a.checked_mul(g));
    let Some(total) = total else {
        return Err("more chunks than can be counted".into());
    };
    array.prepare_index();
    let mut coords = vec![0u64; grid.len()];
    for _ in 0..total {
        let found = array
            .chunk_ref(ReadCtx::default(), &coords)
            .map_err(|e| e.to_string())?;
        if let Some(r) = found {
            let k = key(path, &array.chunk_key(&coords));
            match r {
                ChunkRef::File { offset, len } if len > opts.inline_threshold => {
                    out.push((k, Entry::Ref { offset, len }));
                    referenced += 1;
                }
                ChunkRef::File { .. } => {
                    // Small: the bytes themselves, one request fewer for every reader.
                    let bytes = array
                        .chunk(ReadCtx::default(), &coords)
                        .map_err(|e| e.to_string())?
                        .unwrap_or_default();
                    out.push((k, Entry::Bytes(bytes)));
                    inlined += 1;
                }
                ChunkRef::Bytes(b) => {
                    if !array.is_pass_through() && b.len() as u64 > opts.inline_threshold {
                        return Err(format!(
                            "its chunks must be decoded by h5mount ({}), and chunk {} is {} \
                             bytes, more than the inline threshold ({} bytes)",
                            array.encoding(),
                            array.chunk_key(&coords),
                            b.len(),
                            opts.inline_threshold
                        ));
                    }
                    out.push((k, Entry::Bytes(b)));
                    inlined += 1;
                }
            }
        }
        // The next chunk in C order.
        for (c, &g) in coords.iter_mut().zip(&grid).rev() {
            *c += 1;
            if *c < g {
                break;
            }
            *c = 0;
        }
    }
    Ok((out, referenced, inlined))
}

/// The store key `name` under `path`.
fn key(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}/{name}")
    }
}

/// A metadata document as a manifest holds it: its JSON text.
fn text(v: &Value) -> Entry {
    Entry::Text(String::from_utf8_lossy(&document_bytes(v)).into_owned())
}

/// Bytes written inline in JSON: as text when they are printable ASCII that cannot be
/// mistaken for an encoding prefix, else `base64:`.
fn inline(b: &[u8]) -> String {
    let printable = b
        .iter()
        .all(|&c| c == b'\n' || c == b'\t' || (0x20..0x7f).contains(&c));
    if printable && !b.starts_with(b"base64:") {
        String::from_utf8_lossy(b).into_owned()
    } else {
        format!("base64:{}", super::dtype::base64(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::OpenOptions;

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("mount-tests/fixtures/zarr")
            .join(name)
    }

    fn unbase64(s: &str) -> Vec<u8> {
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let s: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
        let mut out = Vec::new();
        for q in s.chunks(4) {
            let n =
                q.iter().fold(0u32, |a, &c| (a << 6) | u32::from(val(c))) << (6 * (4 - q.len()));
            let bytes = n.to_be_bytes();
            out.extend_from_slice(&bytes[1..q.len()]);
        }
        out
    }

    /// Every chunk key of every array, resolved through the manifest (a reference read from
    /// the file, inline bytes decoded), holds what the Zarr view serves for it.
    #[test]
    fn every_chunk_reads_back_as_the_view_serves_it() {
        for name in ["zarr_latest.h5", "zarr_earliest.h5", "netcdf.h5"] {
            let path = fixture(name);
            let bytes = std::fs::read(&path).unwrap();
            let file = File::open(&path, &OpenOptions::default()).unwrap();
            for threshold in [0, DEFAULT_INLINE_THRESHOLD, 1 << 30] {
                let opts = RefsOptions {
                    url: "file.h5".into(),
                    inline_threshold: threshold,
                };
                let m = manifest(&file, file.root(), &opts).unwrap();
                let json = m.to_json();
                let mut written = Vec::new();
                m.write_json(&mut written).unwrap();
                let parsed: Value = serde_json::from_slice(&written).unwrap();
                assert_eq!(parsed, json, "{name}: written as it is");
                let refs = json["refs"].as_object().unwrap();
                assert!(refs.contains_key(".zgroup"), "{name}");
                let mut checked = 0;
                for (k, v) in refs {
                    let got: Vec<u8> = match v {
                        Value::Array(a) => {
                            assert_eq!(a[0], "file.h5");
                            let (o, n) = (a[1].as_u64().unwrap(), a[2].as_u64().unwrap());
                            assert!(n > threshold, "{k}: {n} bytes referenced");
                            bytes[o as usize..(o + n) as usize].to_vec()
                        }
                        Value::String(s) => match s.strip_prefix("base64:") {
                            Some(b) => unbase64(b),
                            None => s.as_bytes().to_vec(),
                        },
                        _ => panic!("{k}: {v}"),
                    };
                    let Some((array_path, chunk)) = split_chunk_key(k) else {
                        continue;
                    };
                    let id = file.resolve(&format!("/{array_path}")).unwrap();
                    let ds = file.dataset(id).unwrap();
                    let zopts = ZarrOptions {
                        version: ZarrVersion::V2,
                        decoded: false,
                    };
                    let a = ZarrArray::new(&file, &ds, zopts).unwrap();
                    let coords = a.parse_chunk_key(chunk).unwrap();
                    let want = a.chunk(ReadCtx::default(), &coords).unwrap().unwrap();
                    if a.ztype.vlen_strings.is_none() && matches!(v, Value::Array(_)) {
                        // A reference may run past the array's edge (a contiguous block's
                        // last slice): the key's bytes are its start.
                        assert_eq!(&got[..want.len().min(got.len())], &want[..], "{name} {k}");
                        assert!(got.len() >= want.len(), "{name} {k}");
                    } else {
                        assert_eq!(got, want, "{name} {k}");
                    }
                    checked += 1;
                }
                assert!(checked > 0, "{name}: no chunks");
                if threshold == 1 << 30 {
                    assert!(m.left_out.is_empty(), "{name}: {:?}", m.left_out);
                    assert_eq!(m.referenced, 0);
                }
                if threshold == 0 {
                    assert!(m.referenced > 0, "{name}");
                }
            }
        }
    }

    /// `a/b/0.1` as (`a/b`, `0.1`) when the last part is a chunk key (no metadata name).
    fn split_chunk_key(k: &str) -> Option<(&str, &str)> {
        let (dir, last) = k.rsplit_once('/').unwrap_or(("", k));
        (!last.starts_with('.')).then_some((dir, last))
    }

    #[test]
    fn decoded_arrays_too_large_to_inline_are_left_out_with_the_reason() {
        let path = fixture("zarr_latest.h5");
        let file = File::open(&path, &OpenOptions::default()).unwrap();
        let opts = RefsOptions {
            url: "f".into(),
            inline_threshold: 0,
        };
        let m = manifest(&file, file.root(), &opts).unwrap();
        assert!(!m.left_out.is_empty());
        let json = m.to_json();
        let listed = json["h5mount"]["left_out"].as_object().unwrap();
        for (p, why) in &m.left_out {
            assert!(why.contains("decoded") || !why.is_empty(), "{p}: {why}");
            assert_eq!(listed[p.as_str()], Value::String(why.clone()));
            // Nothing of it in the manifest.
            let refs = json["refs"].as_object().unwrap();
            let prefix = format!("{}/", p.trim_start_matches('/'));
            assert!(!refs.keys().any(|k| k.starts_with(&prefix)), "{p}");
        }
    }
}
