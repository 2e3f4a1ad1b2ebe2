//! Tests of the Zarr mapping over real files: the fixture corpus
//! (`mount-tests/fixtures/data`) and the Zarr fixtures with their expectations
//! (`mount-tests/fixtures/zarr`, made by `make_zarr.py`, which proves each pass-through
//! expectation against numcodecs).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::filters::{ids, Pipeline};
use crate::format::messages::filter_pipeline::{FilterPipeline, FilterSpec};
use crate::model::{LinkTarget, ObjectKind, OpenOptions};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mount-tests/fixtures")
}

fn open(path: &Path) -> Arc<File> {
    File::open(path, &OpenOptions::default()).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// Every dataset of `file` reachable by hard links, once each, with a path.
fn datasets(file: &File) -> Vec<(String, Arc<Dataset>)> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut todo = vec![(String::new(), file.root())];
    while let Some((path, g)) = todo.pop() {
        if !seen.insert(g) {
            continue;
        }
        let Ok(links) = file.links(g) else { continue };
        for l in links.iter() {
            let LinkTarget::Hard(id) = l.target else {
                continue;
            };
            let p = format!("{path}/{}", l.name);
            match file.kind(id) {
                Ok(ObjectKind::Group) => todo.push((p, id)),
                Ok(ObjectKind::Dataset) if seen.insert(id) => {
                    if let Ok(d) = file.dataset(id) {
                        out.push((p, d));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The HDF5 filter a declared codec object stands for (v3 `name`/`configuration`, v2 `id`).
fn filter_of(c: &Value) -> FilterSpec {
    let (name, conf) = match c.get("name") {
        Some(n) => (n.as_str().unwrap(), c["configuration"].clone()),
        None => (c["id"].as_str().unwrap(), c.clone()),
    };
    let num = |k: &str| conf[k].as_i64().unwrap() as u32;
    let (id, cd) = match name {
        "numcodecs.zlib" | "zlib" => (ids::DEFLATE, vec![]),
        "numcodecs.shuffle" | "shuffle" => (ids::SHUFFLE, vec![num("elementsize")]),
        "numcodecs.fletcher32" | "fletcher32" => (ids::FLETCHER32, vec![]),
        "numcodecs.bz2" | "bz2" => (ids::BZIP2, vec![]),
        "zstd" => (ids::ZSTD, vec![]),
        "blosc" => (ids::BLOSC, vec![2, 2, 1, 0]),
        other => panic!("unexpected codec {other}"),
    };
    FilterSpec {
        id,
        flags: 0,
        name: None,
        client_data: cd,
    }
}

/// The decoding pipeline the metadata documents declare (in encoding order): v3 `codecs`
/// after the array→bytes codec; v2 `filters` then `compressor`.
fn declared(docs: &Documents) -> Pipeline {
    let (_, m) = &docs[0];
    let codecs: Vec<Value> = if m["zarr_format"] == 3 {
        m["codecs"].as_array().unwrap()[1..].to_vec()
    } else {
        let mut v: Vec<Value> = m["filters"].as_array().cloned().unwrap_or_default();
        v.retain(|f| f["id"] != "vlen-utf8");
        if !m["compressor"].is_null() {
            v.push(m["compressor"].clone());
        }
        v
    };
    Pipeline::new(&FilterPipeline {
        filters: codecs.iter().map(filter_of).collect(),
    })
}

/// Chunk coordinates of a grid, in C order, at most `max`.
fn coords(grid: &[u64], max: usize) -> Vec<Vec<u64>> {
    let total: u64 = grid.iter().product();
    (0..total.min(max as u64))
        .map(|mut k| {
            let mut c = vec![0; grid.len()];
            for (i, &g) in grid.iter().enumerate().rev() {
                c[i] = k % g;
                k /= g;
            }
            c
        })
        .collect()
}

#[derive(Debug, Default)]
struct Counts {
    arrays: usize,
    pass_through: usize,
    chunks_checked: usize,
    reencoded: usize,
}

/// Check every chunk key of `a` (array of `ds`): its length is [`ZarrArray::chunk_len`]'s,
/// and, under pass-through, decoding it with h5mount's own filters in the declared codec
/// order gives the decoded chunk; decoded arrays serve the decoded chunk (or image slice).
fn check_chunks(what: &str, ds: &Dataset, a: &ZarrArray, n: &mut Counts) {
    let docs = a.metadata();
    let pipe = declared(&docs);
    let strings = a.ztype.vlen_strings.is_some();
    let ctx = ReadCtx::default();
    for c in coords(&a.grid_shape(), 64) {
        let key = a.chunk_key(&c);
        assert_eq!(
            a.parse_chunk_key(&key).as_deref(),
            Some(&c[..]),
            "{what} {key}"
        );
        if !a.chunk_exists(&c).unwrap() {
            assert_eq!(a.chunk_len(&c).unwrap(), None, "{what} {key}");
            assert_eq!(a.chunk(ctx, &c).unwrap(), None, "{what} {key}");
            continue;
        }
        let bytes = match a.chunk(ctx, &c) {
            Ok(b) => b.unwrap(),
            // A dataset h5mount cannot read fails its chunks, as it fails its reads.
            Err(_) if ds.unreadable_reason().is_some() || ds.read_all().is_err() => return,
            Err(e) => panic!("{what} {key}: {e}"),
        };
        assert_eq!(
            a.chunk_len(&c).unwrap(),
            Some(bytes.len() as u64),
            "{what} {key}"
        );
        n.chunks_checked += 1;
        if strings {
            continue;
        }
        let dc = &c[..a.rank];
        let mut want = match a.grid {
            Grid::Stored => ds.decoded_chunk(ctx, dc).unwrap().unwrap().to_vec(),
            Grid::Virtual { .. } => a.stored_form(ctx, dc).unwrap().unwrap(),
        };
        if let Some(n) = a.ztype.space_padded {
            dtype::unpad_spaces(&mut want, n);
        }
        let got = if a.is_pass_through() {
            if let Some((rec, raw)) = ds.stored_chunk(dc).unwrap() {
                if !pipe.is_empty() && (raw || rec.filter_mask != 0) {
                    n.reencoded += 1;
                }
            }
            pipe.decode(bytes, 0, want.len(), 0)
                .unwrap_or_else(|e| panic!("{what} {key}: {e}"))
        } else {
            assert!(pipe.is_empty(), "{what}: decoded with codecs declared");
            bytes
        };
        assert!(got == want, "{what} {key}: chunk differs");
    }
}

/// Every dataset of every corpus file, in both versions: each mapping that is made gives
/// documents of the right shape and chunk keys that decode to the data.
#[test]
fn corpus_chunks_decode_to_the_data_in_the_declared_codec_order() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("data"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "h5"))
        .collect();
    files.extend(
        [
            "zarr/zarr_earliest.h5",
            "zarr/zarr_latest.h5",
            "zarr/netcdf.h5",
        ]
        .map(|f| root().join(f)),
    );
    files.sort();
    let mut n = Counts::default();
    let mut kinds = HashSet::new();
    for path in &files {
        let file = open(path);
        for (p, ds) in datasets(&file) {
            for version in [ZarrVersion::V3, ZarrVersion::V2] {
                let opts = ZarrOptions {
                    version,
                    decoded: false,
                };
                let what = format!("{}:{p} {version:?}", path.display());
                let Ok(a) = ZarrArray::new(&file, &ds, opts) else {
                    continue;
                };
                n.arrays += 1;
                let docs = a.metadata();
                match version {
                    ZarrVersion::V3 => {
                        assert_eq!(docs.len(), 1);
                        let m = &docs[0].1;
                        assert_eq!(m["shape"].as_array().unwrap().len(), a.shape().len());
                        let first = m["codecs"][0]["name"].as_str().unwrap();
                        assert!(first == "bytes" || first == "vlen-utf8", "{what}");
                    }
                    ZarrVersion::V2 => {
                        assert_eq!(docs[0].0, ".zarray");
                        assert_eq!(docs[1].0, ".zattrs");
                    }
                }
                if a.is_pass_through() {
                    n.pass_through += 1;
                    if let Encoding::PassThrough { chain } = &a.encoding {
                        kinds.extend(chain.iter().map(|c| c.v3_name()));
                    }
                }
                check_chunks(&what, &ds, &a, &mut n);
                // Decoded on request: no codec, the same decoded bytes.
                let d = ZarrArray::new(
                    &file,
                    &ds,
                    ZarrOptions {
                        decoded: true,
                        ..opts
                    },
                )
                .unwrap();
                assert!(!d.is_pass_through() && d.encoding().starts_with("decoded: "));
                check_chunks(&what, &ds, &d, &mut n);
            }
        }
    }
    eprintln!("{n:?} {kinds:?}");
    for k in [
        "numcodecs.zlib",
        "numcodecs.shuffle",
        "numcodecs.fletcher32",
        "numcodecs.bz2",
        "zstd",
        "blosc",
    ] {
        assert!(kinds.contains(k), "no pass-through array uses {k}");
    }
    assert!(n.reencoded > 10, "{n:?}");
    assert!(n.arrays > 400 && n.pass_through > 100, "{n:?}");
}

fn expected() -> Value {
    let text = std::fs::read_to_string(root().join("zarr/expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn array(file: &Arc<File>, path: &str, version: ZarrVersion) -> ZarrArray {
    let id = file.resolve(path).unwrap();
    let ds = file.dataset(id).unwrap();
    let opts = ZarrOptions {
        version,
        decoded: false,
    };
    ZarrArray::new(file, &ds, opts).unwrap()
}

/// The Zarr fixtures: codecs, order, refusal reasons, masked chunks, fill values and
/// attributes as `expected.json` says (proved against numcodecs by its generator).
#[test]
fn zarr_fixtures_map_as_expected() {
    let exp = expected();
    for form in ["zarr_earliest.h5", "zarr_latest.h5"] {
        let file = open(&root().join("zarr").join(form));
        for (name, e) in exp[form].as_object().unwrap() {
            let what = format!("{form}:{name}");
            let v3 = array(&file, name, ZarrVersion::V3);
            let v2 = array(&file, name, ZarrVersion::V2);
            assert_eq!(
                v3.is_pass_through(),
                e["pass_through"] == true,
                "{what}: {}",
                v3.encoding()
            );
            if let Some(why) = e["why"].as_str() {
                assert!(v3.encoding().contains(why), "{what}: {}", v3.encoding());
                assert!(v2.encoding().contains(why), "{what}: {}", v2.encoding());
            }
            let m3 = &v3.metadata()[0].1;
            let m2 = &v2.metadata()[0].1;
            if let Some(codecs) = e.get("v3_codecs") {
                assert_eq!(
                    &Value::Array(m3["codecs"].as_array().unwrap()[1..].to_vec()),
                    codecs,
                    "{what}"
                );
                assert_eq!(&m2["filters"], &e["v2_filters"], "{what}");
                assert_eq!(&m2["compressor"], &e["v2_compressor"], "{what}");
            }
            if let Some(fill) = e.get("fill_value") {
                assert_eq!(
                    (&m3["fill_value"], &m2["fill_value"]),
                    (fill, fill),
                    "{what}"
                );
            }
            if let Some(masked) = e["masked_chunks"].as_u64() {
                let ds = file.dataset(file.resolve(name).unwrap()).unwrap();
                let have = coords(&v3.grid_shape(), 1000)
                    .iter()
                    .filter_map(|c| ds.stored_chunk(c).unwrap())
                    .filter(|(r, _)| r.filter_mask != 0)
                    .count() as u64;
                assert_eq!(have, masked, "{what}");
            }
            if let Some(attrs) = e["attributes"].as_object() {
                assert_eq!(m3["attributes"].as_object().unwrap(), attrs, "{what}");
                assert_eq!(v2.metadata()[1].1.as_object().unwrap(), attrs, "{what}");
            }
            if let Some(strings) = e["strings"].as_array() {
                check_strings(&what, &v3, strings);
            }
        }
    }
}

/// The chunks of a vlen-string array decode (vlen-utf8) to `want`, in order; edge chunks
/// padded with empty strings.
fn check_strings(what: &str, a: &ZarrArray, want: &[Value]) {
    assert_eq!(
        a.metadata()[0].1["codecs"],
        json!([{"name": "vlen-utf8", "configuration": {}}])
    );
    let mut got = Vec::new();
    for c in coords(&a.grid_shape(), 100) {
        let b = a.chunk(ReadCtx::default(), &c).unwrap().unwrap();
        assert_eq!(a.chunk_len(&c).unwrap(), Some(b.len() as u64), "{what}");
        let n = u32::from_le_bytes(b[..4].try_into().unwrap());
        assert_eq!(u64::from(n), a.chunks()[0], "{what}");
        let mut at = 4;
        for _ in 0..n {
            let len = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
            got.push(json!(
                String::from_utf8(b[at + 4..at + 4 + len].to_vec()).unwrap()
            ));
            at += 4 + len;
        }
        assert_eq!(at, b.len(), "{what}");
    }
    assert_eq!(&got[..want.len()], want, "{what}");
    assert!(got[want.len()..].iter().all(|s| s == ""), "{what}");
}

/// netCDF-4 dimensions: names from the dimension scales (a child group's from its
/// parent's), a dimension without a variable marked as such, netCDF's bookkeeping
/// attributes left out, `_FillValue` kept; the group's attributes.
#[test]
fn netcdf_dimension_names_and_attributes() {
    let exp = expected();
    let file = open(&root().join("zarr/netcdf.h5"));
    for (path, e) in exp["netcdf.h5"].as_object().unwrap() {
        if path == "/" {
            let g = group_metadata(&file, file.root(), ZarrOptions::default()).unwrap();
            assert_eq!(&g[0].1["attributes"], &e["attributes"]);
            let g2 = group_metadata(
                &file,
                file.root(),
                ZarrOptions {
                    version: ZarrVersion::V2,
                    decoded: false,
                },
            )
            .unwrap();
            assert_eq!(&g2[1].1, &e["attributes"]);
            continue;
        }
        let v3 = array(&file, path, ZarrVersion::V3);
        let v2 = array(&file, path, ZarrVersion::V2);
        let m3 = &v3.metadata()[0].1;
        assert_eq!(&m3["dimension_names"], &e["dimension_names"], "{path}");
        assert_eq!(
            &v2.metadata()[1].1["_ARRAY_DIMENSIONS"],
            &e["dimension_names"],
            "{path}"
        );
        assert_eq!(
            v3.is_dimension_only(),
            e["dimension_only"] == true,
            "{path}"
        );
        let attrs = m3["attributes"].as_object().unwrap();
        for k in attrs.keys() {
            assert!(
                !k.starts_with("_Netcdf4")
                    && !["DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME"].contains(&k.as_str()),
                "{path}: {k}"
            );
        }
        if let Some(want) = e["attributes"].as_object() {
            let v3_want = e.get("attributes_v3").unwrap_or(&e["attributes"]);
            assert_eq!(&Value::Object(attrs.clone()), v3_want, "{path}");
            assert_eq!(
                v2.metadata()[1]
                    .1
                    .as_object()
                    .unwrap()
                    .iter()
                    .filter(|(k, _)| *k != "_ARRAY_DIMENSIONS")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect::<serde_json::Map<_, _>>(),
                *want,
                "{path}"
            );
        }
    }
}

#[test]
fn chunk_keys_are_canonical_and_inside_the_grid() {
    let file = open(&root().join("zarr/zarr_latest.h5"));
    let a = array(&file, "gzip_i2", ZarrVersion::V3);
    assert_eq!(a.grid_shape(), vec![3, 2]);
    assert_eq!(a.chunk_key(&[2, 1]), "c/2/1");
    assert_eq!(a.parse_chunk_key("c/2/1"), Some(vec![2, 1]));
    for bad in [
        "c/3/0", "c/01/1", "c/+1/1", "c/1", "c/1/1/0", "2/1", "c/1/x", "c//1",
    ] {
        assert_eq!(a.parse_chunk_key(bad), None, "{bad}");
    }
    assert_eq!(a.chunk_len(&[3, 0]).unwrap(), None);
    // Lengths known without producing the chunk: stored as they are, or unfiltered.
    let u = array(&file, "fill_m99_be_i2", ZarrVersion::V3);
    assert_eq!(u.encoding(), "pass-through: bytes");
    assert_eq!(u.chunk_len(&[2, 1]).unwrap(), Some(16 * 16 * 2));
    assert_eq!(a.chunk_len(&[0, 0]).unwrap().map(|n| n > 0), Some(true));
    assert!(lock(&u.lengths).is_empty() && lock(&a.lengths).is_empty());
    // A masked chunk is produced to learn its length, once.
    let m = array(&file, "blosc_noise_u2", ZarrVersion::V3);
    let n = m.chunk_len(&[0, 0]).unwrap().unwrap();
    assert_eq!(n, 16 * 16 * 2 + 16);
    assert_eq!(lock(&m.lengths).get(&vec![0, 0]), Some(&n));
    let b = array(&file, "gzip_i2", ZarrVersion::V2);
    assert_eq!(b.chunk_key(&[2, 1]), "2.1");
    assert_eq!(b.parse_chunk_key("2.1"), Some(vec![2, 1]));
    assert_eq!(b.parse_chunk_key("c/2/1"), None);
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

/// Datasets without scales: netCDF's phony dimension names for the group, as h5netcdf
/// gives them (expected.json), applied to the arrays.
#[test]
fn phony_dimension_names_as_h5netcdf_names_them() {
    let exp = expected();
    let file = open(&root().join("zarr/zarr_latest.h5"));
    let names = dims::phony_names(&file, file.root());
    let want = exp["phony_dims"].as_object().unwrap();
    for (path, w) in want {
        let id = file.resolve(path).unwrap();
        assert_eq!(json!(names.get(&id)), *w, "{path}");
        let mut a = array(&file, path, ZarrVersion::V2);
        assert!(a.dimension_names().is_none());
        a.set_dimension_names(names[&id].clone());
        assert_eq!(&a.metadata()[1].1["_ARRAY_DIMENSIONS"], w, "{path}");
    }
    assert_eq!(names.len(), want.len());
    // Scales name their own dimensions; netCDF's datasets are all scaled.
    let nc = open(&root().join("zarr/netcdf.h5"));
    assert!(dims::phony_names(&nc, nc.root()).is_empty());
}

/// xarray opens no group holding an array whose axes are not all named: the axes netCDF
/// has no dimension for (an array datatype's after the dataset's own, a null dataspace's
/// empty one) get phony names too, the same as the group's other axes of their length.
#[test]
fn every_axis_of_every_array_gets_a_phony_name() {
    let dims_of = |file: &Arc<File>, path: &str| -> Value {
        let names = dims::phony_names(file, file.root());
        let mut a = array(file, path, ZarrVersion::V2);
        let id = file.resolve(path).unwrap();
        a.set_dimension_names(names[&id].clone());
        a.metadata()[1].1["_ARRAY_DIMENSIONS"].clone()
    };
    for name in [
        "dtypes_latest.h5",
        "layouts_latest.h5",
        "dtypes_earliest.h5",
    ] {
        let file = open(&root().join("data").join(name));
        let names = dims::phony_names(&file, file.root());
        let opts = ZarrOptions {
            version: ZarrVersion::V2,
            decoded: false,
        };
        for (path, ds) in datasets(&file) {
            // Types with no Zarr counterpart (variable-length sequences) make no array.
            let Ok(mut a) = ZarrArray::new(&file, &ds, opts) else {
                continue;
            };
            a.set_dimension_names(names[&ds.id].clone());
            let got = &a.metadata()[1].1["_ARRAY_DIMENSIONS"];
            assert_eq!(
                got.as_array().map(Vec::len),
                Some(a.shape().len()),
                "{name}{path}: {got}"
            );
        }
        if name.starts_with("dtypes") {
            // (6,) of f4[3, 4]: its axes of 3 and 4 are those of bitfield_B8LE (3,) and
            // S10 (4,).
            let arr = dims_of(&file, "/array_f4_3x4");
            assert_eq!(arr[1], dims_of(&file, "/bitfield_B8LE")[0]);
            assert_eq!(arr[2], dims_of(&file, "/S10")[0]);
            assert_eq!(arr.as_array().unwrap().len(), 3);
        } else {
            assert_eq!(dims_of(&file, "/null"), dims_of(&file, "/empty_0"));
        }
    }
}
