//! Kernel-free tests of the Zarr tree (`src/fs/zarr`): the filesystem core built as the
//! daemon builds it with `--zarr` or `--zarr=2`, called directly (see `fs_core.rs` for the
//! pattern). Expected values come from the library: the mapping (`views::zarr::ZarrArray`:
//! documents, chunk keys, chunk bytes, encodings) and the dataset's chunk index
//! (`Dataset::stored_chunk`), so what is checked here is the tree: which entries exist, their
//! kinds, modes and sizes, their bytes, and the errors.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use h5mount::fs::zarr::{ENCODING_XATTR, ZARR_BASE};
use h5mount::fs::{Attr, FileKind, FsOptions, FsResult, H5Fs, XattrReply, ROOT_INO};
use h5mount::io::ReadCtx;
use h5mount::model::{Dataset, File, OpenOptions, Resolver, ResolverOptions};
use h5mount::views::zarr::{ZarrArray, ZarrOptions, ZarrVersion};
use serde_json::Value;

pub use crate::harness::fixture;

/// A file of the corpus (`fixtures/data`).
pub fn data(name: &str) -> PathBuf {
    fixture(&format!("data/{name}"))
}

fn opts(zarr: Option<ZarrOptions>) -> FsOptions {
    FsOptions {
        uid: 4321,
        gid: 8765,
        file_mtime: SystemTime::UNIX_EPOCH + Duration::from_secs(1_234_567_890),
        file_size: 0,
        views: Default::default(),
        refresh: None,
        zarr,
    }
}

fn zarr(version: ZarrVersion) -> Option<ZarrOptions> {
    Some(ZarrOptions {
        version,
        decoded: false,
    })
}

fn open(path: &Path) -> Arc<File> {
    File::open(path, &OpenOptions::default()).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// The fixture `rel` mounted as the daemon mounts it.
fn mount(rel: &str, zarr: Option<ZarrOptions>) -> H5Fs {
    H5Fs::new(open(&fixture(rel)), opts(zarr))
}

/// The directory `root` mounted as the daemon mounts it.
fn mount_dir(root: &Path, zarr: Option<ZarrOptions>) -> H5Fs {
    let resolver = Resolver::new(ResolverOptions {
        root: root.to_path_buf(),
        allow_outside_paths: false,
        max_open_files: 8,
        cache_bytes: 16 << 20,
        origin: None,
    });
    H5Fs::for_directory(resolver, opts(zarr))
}

fn walk(fs: &H5Fs, path: &str) -> FsResult<Attr> {
    let mut attr = fs.getattr(ROOT_INO)?;
    for name in path.split('/').filter(|c| !c.is_empty()) {
        attr = fs.lookup(attr.ino, OsStr::new(name))?;
    }
    Ok(attr)
}

#[track_caller]
fn at(fs: &H5Fs, path: &str) -> Attr {
    walk(fs, path).unwrap_or_else(|e| panic!("{path}: {e:?}"))
}

#[track_caller]
fn errno<T: std::fmt::Debug>(r: FsResult<T>) -> i32 {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.errno(),
    }
}

/// Names in the listing of `ino` (without `.` and `..`), with their kinds.
#[track_caller]
fn names(fs: &H5Fs, ino: u64) -> Vec<(String, FileKind)> {
    let l = fs.listing(ino).unwrap();
    assert_eq!(
        (l.entries[0].name.as_str(), l.entries[1].name.as_str()),
        (".", "..")
    );
    l.entries[2..]
        .iter()
        .map(|e| (e.name.to_string(), e.kind))
        .collect()
}

fn name_set(fs: &H5Fs, ino: u64) -> BTreeSet<String> {
    names(fs, ino).into_iter().map(|(n, _)| n).collect()
}

/// The whole file `ino`, read in odd pieces.
#[track_caller]
fn read_all(fs: &H5Fs, ino: u64) -> Vec<u8> {
    let size = fs.getattr(ino).unwrap().size;
    let mut out = Vec::new();
    loop {
        let piece = fs.read(ino, out.len() as u64, 777).unwrap();
        if piece.is_empty() {
            break;
        }
        out.extend(piece);
    }
    assert_eq!(out.len() as u64, size, "inode {ino}: bytes read vs size");
    out
}

fn json_at(fs: &H5Fs, path: &str) -> Value {
    serde_json::from_slice(&read_all(fs, at(fs, path).ino)).unwrap()
}

fn xattr(fs: &H5Fs, ino: u64, name: &str) -> FsResult<Vec<u8>> {
    let XattrReply::Size(n) = fs.getxattr(ino, OsStr::new(name), 0)? else {
        panic!("size query answered data")
    };
    match fs.getxattr(ino, OsStr::new(name), n)? {
        XattrReply::Data(d) => Ok(d),
        XattrReply::Size(_) => panic!("read answered a size"),
    }
}

/// Every position of a grid of `grid` chunks, row-major.
fn positions(grid: &[u64]) -> Vec<Vec<u64>> {
    let mut out = vec![Vec::new()];
    for &g in grid {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..g).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    out
}

/// The array `path` of fixture `rel` as the library maps it, and the chunks its index holds.
fn library(rel: &str, path: &str, v: ZarrVersion) -> (Arc<Dataset>, ZarrArray, Vec<Vec<u64>>) {
    let f = open(&fixture(rel));
    let id = f.resolve(path).unwrap();
    let ds = f.dataset(id).unwrap();
    let mut a = ZarrArray::new(&f, &ds, zarr(v).unwrap()).unwrap();
    // Named as the store names it: netCDF's phony dimensions of its group.
    let group = f
        .resolve(
            path.rsplit_once('/')
                .map_or("/", |(g, _)| if g.is_empty() { "/" } else { g }),
        )
        .unwrap();
    if let Some(names) = h5mount::views::zarr::dims::phony_names(&f, group).get(&id) {
        a.set_dimension_names(names.clone());
    }
    let written = positions(&a.grid_shape())
        .into_iter()
        .filter(|c| ds.stored_chunk(c).unwrap().is_some())
        .collect();
    (ds, a, written)
}

/// Check the keys of array `path` of fixture `rel` in format `v`: listings, sizes and
/// bytes of every written chunk, and that unwritten and malformed keys are absent.
fn check_keys(rel: &str, path: &str, v: ZarrVersion) {
    let fs = mount(rel, zarr(v));
    let (_ds, array, written) = library(rel, path, v);
    let grid = array.grid_shape();
    let dir = at(&fs, path);
    assert_eq!((dir.kind, dir.perm), (FileKind::Directory, 0o555));
    assert!(dir.ino >= ZARR_BASE);
    // Listings show exactly the written chunks.
    let listed = name_set(&fs, dir.ino);
    match v {
        ZarrVersion::V3 => {
            let want: BTreeSet<String> = ["zarr.json".to_string()]
                .into_iter()
                .chain((!written.is_empty()).then(|| "c".to_string()))
                .collect();
            assert_eq!(listed, want, "{rel} {path}");
            // Each prefix directory lists the next coordinates of the chunks below it.
            let prefixes: BTreeSet<Vec<u64>> = written
                .iter()
                .flat_map(|c| (0..c.len()).map(move |k| c[..k].to_vec()))
                .collect();
            for p in prefixes {
                let sub: String = p.iter().map(|x| format!("/{x}")).collect();
                let at_p = format!("{path}/c{sub}");
                let got = name_set(&fs, at(&fs, &at_p).ino);
                let want: BTreeSet<String> = written
                    .iter()
                    .filter(|c| c.starts_with(&p))
                    .map(|c| c[p.len()].to_string())
                    .collect();
                assert_eq!(got, want, "{rel} {at_p}");
            }
        }
        ZarrVersion::V2 => {
            let mut got = listed;
            assert!(got.remove(".zarray") && got.remove(".zattrs"));
            let want: BTreeSet<String> = written.iter().map(|c| array.chunk_key(c)).collect();
            assert_eq!(got, want, "{rel} {path}");
        }
    }
    // Each written chunk: its size without reading, then its bytes.
    for c in &written {
        let key = format!("{path}/{}", array.chunk_key(c));
        let a = at(&fs, &key);
        assert_eq!((a.kind, a.perm), (FileKind::RegularFile, 0o444), "{key}");
        assert_eq!(Some(a.size), array.chunk_len(c).unwrap(), "{key}");
        let want = array.chunk(ReadCtx::default(), c).unwrap().unwrap();
        assert_eq!(read_all(&fs, a.ino), want, "{key}");
    }
    // Unwritten chunks, keys outside the grid and non-canonical keys: no entry.
    let mut absent: Vec<String> = positions(&grid)
        .into_iter()
        .filter(|c| !written.contains(c))
        .take(3)
        .map(|c| array.chunk_key(&c))
        .collect();
    absent.push(array.chunk_key(&grid));
    absent.push("x".into());
    if let Some(k) = written.first().map(|c| array.chunk_key(c)) {
        absent.push(match v {
            ZarrVersion::V3 => k.replacen("c/", "c/0", 1),
            ZarrVersion::V2 => format!("0{k}"),
        });
    }
    for k in absent {
        let p = format!("{path}/{k}");
        assert_eq!(errno(walk(&fs, &p)), libc::ENOENT, "{rel} {p}");
    }
}

#[test]
fn keys_are_exactly_the_written_chunks_v3() {
    check_keys(
        "data/chunked_fixed_latest.h5",
        "/sparse_nofill",
        ZarrVersion::V3,
    );
    check_keys(
        "data/chunked_fixed_earliest.h5",
        "/gz_sparse_fill",
        ZarrVersion::V3,
    );
    // An extensible-array index whose unlimited dimension is not the first, 3-D.
    check_keys("data/chunked_ext1_latest.h5", "/gz_r3", ZarrVersion::V3);
    // No chunk written at all.
    check_keys(
        "unwritten/unwritten_latest.h5",
        "/extensible",
        ZarrVersion::V3,
    );
}

#[test]
fn keys_are_exactly_the_written_chunks_v2() {
    check_keys(
        "data/chunked_fixed_latest.h5",
        "/sparse_nofill",
        ZarrVersion::V2,
    );
    check_keys("data/chunked_ext1_latest.h5", "/gz_r3", ZarrVersion::V2);
    check_keys(
        "unwritten/unwritten_earliest.h5",
        "/btree2",
        ZarrVersion::V2,
    );
}

#[test]
fn documents_modes_xattrs_and_read_only() {
    for v in [ZarrVersion::V3, ZarrVersion::V2] {
        let fs = mount("data/chunked_fixed_latest.h5", zarr(v));
        let (_ds, array, _) = library("data/chunked_fixed_latest.h5", "/gz_r2_partial", v);
        let root = name_set(&fs, ROOT_INO);
        let docs: &[&str] = match v {
            ZarrVersion::V3 => &["zarr.json"],
            ZarrVersion::V2 => &[".zgroup", ".zattrs", ".zmetadata"],
        };
        for d in docs {
            assert!(root.contains(*d), "{v:?} root lacks {d}");
            let a = at(&fs, d);
            assert_eq!((a.kind, a.perm), (FileKind::RegularFile, 0o444));
        }
        assert!(root.contains("gz_r2_partial"));
        // The array's documents are the mapping's.
        for (name, want) in array.metadata() {
            assert_eq!(
                json_at(&fs, &format!("/gz_r2_partial/{name}")),
                want,
                "{name}"
            );
        }
        // Consolidated metadata: the same documents, under their paths.
        let (key, all) = match v {
            ZarrVersion::V3 => (
                "gz_r2_partial",
                json_at(&fs, "/zarr.json")["consolidated_metadata"]["metadata"].clone(),
            ),
            ZarrVersion::V2 => (
                "gz_r2_partial/.zarray",
                json_at(&fs, "/.zmetadata")["metadata"].clone(),
            ),
        };
        assert_eq!(all[key], array.metadata()[0].1, "{v:?} consolidated {key}");
        let arrays = all
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !k.contains('.') || k.ends_with(".zarray"))
            .count();
        assert_eq!(arrays, 22, "{v:?}: every dataset of the file");
        // The encoding xattr, and the dataset's own xattrs.
        let dir = at(&fs, "/gz_r2_partial").ino;
        let enc = xattr(&fs, dir, ENCODING_XATTR).unwrap();
        assert_eq!(String::from_utf8(enc).unwrap(), array.encoding());
        let XattrReply::Data(list) = fs.listxattr(dir, 4096).unwrap() else {
            panic!("size")
        };
        let list = String::from_utf8(list).unwrap();
        assert!(
            list.contains(ENCODING_XATTR) && list.contains("user.h5.dtype"),
            "{list}"
        );
        let doc = at(&fs, docs[0]).ino;
        assert_eq!(errno(xattr(&fs, doc, ENCODING_XATTR)), libc::ENODATA);
        // Read-only; directories are no files.
        assert_eq!(errno(fs.open(doc, libc::O_WRONLY)), libc::EROFS);
        assert_eq!(errno(fs.open(dir, libc::O_RDONLY)), libc::EISDIR);
        assert_eq!(errno(fs.read(dir, 0, 10)), libc::EISDIR);
        assert!(fs.open(doc, libc::O_RDONLY).is_ok());
        assert_eq!(errno(fs.lookup(doc, OsStr::new("x"))), libc::ENOTDIR);
        // Owner and time of the mount.
        let a = fs.getattr(doc).unwrap();
        assert_eq!((a.uid, a.gid), (4321, 8765));
    }
}

#[test]
fn links_become_arrays_and_what_zarr_cannot_hold_is_left_out() {
    let fs = mount("data/links_latest.h5", zarr(ZarrVersion::V3));
    // Hard links to a dataset, a soft link and an external link to one: arrays at each path.
    for p in [
        "/a/data",
        "/hard/data_alias1",
        "/hard/data_alias2",
        "/soft/absolute",
        "/a/relative_up",
        "/a/b/deep",
        "/a/relative",
        "/ext/existing",
    ] {
        let a = at(&fs, p);
        assert_eq!(a.kind, FileKind::Directory, "{p}");
        let meta = json_at(&fs, &format!("{p}/zarr.json"));
        assert_eq!(meta["node_type"], "array", "{p}");
    }
    let ino = |p| at(&fs, p).ino;
    assert_ne!(
        ino("/a/data"),
        ino("/soft/absolute"),
        "one directory per path"
    );
    // Links to groups (soft, a second hard path, a cycle), committed types and dangling
    // links: not in the store.
    let hard = name_set(&fs, ino("/hard"));
    let soft = name_set(&fs, ino("/soft"));
    let root = name_set(&fs, ROOT_INO);
    assert!(
        !soft.contains("to_group") && !soft.contains("dangling"),
        "{soft:?}"
    );
    assert!(!hard.contains("cycle_to_root"), "{hard:?}");
    assert!(
        !root.contains("mytype") && !root.contains("compound_type"),
        "{root:?}"
    );
    assert_eq!(errno(walk(&fs, "/soft/to_group")), libc::ENOENT);
    // A group found at two paths is shown at one of them only.
    let a_b = walk(&fs, "/a/b").is_ok();
    let alias = walk(&fs, "/hard/group_alias").is_ok();
    assert!(a_b ^ alias, "/a/b {a_b}, /hard/group_alias {alias}");
    // A compound type is an array too (a structured data type).
    let typed = at(&fs, "/typed_compound");
    assert_eq!(typed.kind, FileKind::Directory);
    assert_eq!(
        json_at(&fs, "/typed_compound/zarr.json")["node_type"],
        "array"
    );
    let all = json_at(&fs, "/zarr.json")["consolidated_metadata"]["metadata"].clone();
    assert!(all.get("typed_compound").is_some());
    assert_eq!(all["soft/absolute"]["node_type"], "array");
    assert_eq!(all["a/b"]["node_type"], "group");
    assert_eq!(
        all["a/b"]["consolidated_metadata"]["metadata"],
        serde_json::json!({}),
        "nested groups carry an empty one, as zarr-python writes them"
    );
    for k in all.as_object().unwrap().keys() {
        assert!(walk(&fs, k).is_ok(), "consolidated {k} is not in the tree");
    }
}

#[test]
fn a_dataset_the_mapping_cannot_serve_fails_its_documents_alone() {
    // Variable-length sequences of numbers have no Zarr data type: the array's directory
    // is there, its documents fail with EIO, the consolidated metadata leaves it out and
    // holds the others.
    let fs = mount("data/dtypes_latest.h5", zarr(ZarrVersion::V3));
    let a = at(&fs, "/vlen_i4");
    assert_eq!(a.kind, FileKind::Directory);
    assert_eq!(errno(walk(&fs, "/vlen_i4/zarr.json")), libc::EIO);
    // Names that cannot be its keys are absent, not failing (readers probe for them).
    assert_eq!(errno(walk(&fs, "/vlen_i4/.zarray")), libc::ENOENT);
    let all = json_at(&fs, "/zarr.json")["consolidated_metadata"]["metadata"].clone();
    assert!(all.get("vlen_i4").is_none());
    assert!(all.as_object().unwrap().len() > 5, "the others are there");
}

#[test]
fn an_unreadable_dataset_fails_its_keys_alone() {
    // This build decodes neither SZ nor SZ3.
    let fs = mount("data/filters_sz_latest.h5", zarr(ZarrVersion::V3));
    let (_ds, array, written) = library("data/filters_sz_latest.h5", "/sz_abs_f4", ZarrVersion::V3);
    let key = format!("/sz_abs_f4/{}", array.chunk_key(&written[0]));
    let a = at(&fs, &key);
    assert_eq!(errno(fs.read(a.ino, 0, 100)), libc::EIO);
    assert_eq!(
        errno(
            fs.open(a.ino, libc::O_RDONLY)
                .and_then(|_| fs.read(a.ino, 0, 1))
        ),
        libc::EIO
    );
    // Its metadata reads, and so does every other file of the mount.
    assert_eq!(json_at(&fs, "/sz_abs_f4/zarr.json")["node_type"], "array");
    let layouts = mount("data/layouts_latest.h5", zarr(ZarrVersion::V3));
    let a = at(&layouts, "/contiguous_f4/c/0/0");
    assert_eq!(read_all(&layouts, a.ino).len(), 20 * 30 * 4);
}

#[test]
fn a_directory_mount_is_a_store_of_its_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(data("layouts_latest.h5"), dir.path().join("a.h5")).unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::copy(data("dtypes_latest.h5"), dir.path().join("sub/b.h5")).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not HDF5").unwrap();
    // An HDF5 file under a name Zarr v3 reserves.
    std::fs::copy(data("layouts_latest.h5"), dir.path().join("__reserved.h5")).unwrap();
    let fs = mount_dir(dir.path(), zarr(ZarrVersion::V3));
    let root = name_set(&fs, ROOT_INO);
    let want: BTreeSet<String> = ["zarr.json", "a.h5", "sub"].map(String::from).into();
    assert_eq!(root, want, "other files are left out");
    assert_eq!(json_at(&fs, "/sub/zarr.json")["node_type"], "group");
    assert_eq!(json_at(&fs, "/a.h5/zarr.json")["node_type"], "group");
    let all = json_at(&fs, "/zarr.json")["consolidated_metadata"]["metadata"].clone();
    for k in [
        "a.h5",
        "sub",
        "sub/b.h5",
        "a.h5/contiguous_f4",
        "sub/b.h5/lef4",
    ] {
        assert!(all.get(k).is_some(), "consolidated {k}");
    }
    assert_eq!(all["sub/b.h5/lef4"]["data_type"], "float32");
    let a = at(&fs, "/a.h5/contiguous_f4/c/0/0");
    assert_eq!(a.size, 20 * 30 * 4);
}

/// A store past the limit of consolidated metadata has none: v2 `.zmetadata` does not
/// exist (and is no longer listed once that is known), v3's root `zarr.json` has no
/// `consolidated_metadata`; the tree still lists and reads.
#[test]
fn a_store_too_large_for_consolidated_metadata_has_none() {
    for v in [ZarrVersion::V2, ZarrVersion::V3] {
        let fs = mount("data/layouts_latest.h5", zarr(v));
        fs.zarr_limit_consolidated(2);
        let root = name_set(&fs, ROOT_INO);
        assert!(
            root.len() > 3,
            "{v:?}: the file has more than two arrays: {root:?}"
        );
        match v {
            ZarrVersion::V2 => {
                assert_eq!(errno(walk(&fs, "/.zmetadata")), libc::ENOENT);
                let after = name_set(&fs, ROOT_INO);
                assert!(!after.contains(".zmetadata"), "still listed: {after:?}");
                assert_eq!(after.len() + 1, root.len());
                assert_eq!(json_at(&fs, "/.zgroup")["zarr_format"], 2);
            }
            ZarrVersion::V3 => {
                let doc = json_at(&fs, "/zarr.json");
                assert_eq!(doc["node_type"], "group");
                assert!(doc.get("consolidated_metadata").is_none(), "{doc}");
            }
        }
        let a = at(&fs, "/contiguous_f4");
        assert_eq!(a.kind, FileKind::Directory);
    }
    // Under the limit, the same file has it.
    let fs = mount("data/layouts_latest.h5", zarr(ZarrVersion::V2));
    assert!(name_set(&fs, ROOT_INO).contains(".zmetadata"));
    assert!(json_at(&fs, "/.zmetadata")["metadata"]
        .get(".zgroup")
        .is_some());
}

#[test]
fn without_the_option_the_mount_is_unchanged() {
    let fs = mount("data/chunked_fixed_latest.h5", None);
    let root = name_set(&fs, ROOT_INO);
    assert!(!root.contains("zarr.json"));
    let a = at(&fs, "/gz_r2_partial");
    assert_eq!((a.kind, a.size), (FileKind::RegularFile, 21 * 31 * 2));
    assert_eq!(errno(walk(&fs, "/gz_r2_partial/zarr.json")), libc::ENOTDIR);
}

/// netCDF through the store as xarray needs it: a dimension without a variable is no array,
/// and datasets without dimension scales get netCDF's phony dimension names (v2
/// `_ARRAY_DIMENSIONS`, v3 `dimension_names`), per group.
#[test]
fn netcdf_dimensions_are_named_and_dimension_only_datasets_hidden() {
    let nc = mount("zarr/netcdf.h5", zarr(ZarrVersion::V2));
    let root = name_set(&nc, ROOT_INO);
    assert!(!root.contains("nv"), "{root:?}");
    assert!(root.contains("temp") && root.contains("lat"), "{root:?}");
    assert_eq!(errno(walk(&nc, "/nv")), libc::ENOENT);
    let all = json_at(&nc, "/.zmetadata")["metadata"].clone();
    assert!(all.get("nv/.zarray").is_none());
    assert_eq!(
        json_at(&nc, "/temp/.zattrs")["_ARRAY_DIMENSIONS"],
        serde_json::json!(["time", "lat", "lon"])
    );
    let z = mount("zarr/zarr_latest.h5", zarr(ZarrVersion::V2));
    assert_eq!(
        json_at(&z, "/gzip_i2/.zattrs")["_ARRAY_DIMENSIONS"],
        serde_json::json!(["phony_dim_1", "phony_dim_2"])
    );
    let z3 = mount("zarr/zarr_latest.h5", zarr(ZarrVersion::V3));
    assert_eq!(
        json_at(&z3, "/vlen_chunked/zarr.json")["dimension_names"],
        serde_json::json!(["phony_dim_3"])
    );
}
