//! The Zarr store (`--zarr`, `--zarr=2`) through real mounts, read by real zarr-python; and,
//! in `zarr_core`, the same tree through the filesystem core without a kernel.
//!
//! The corpus (`fixtures/data`, every file) is mounted as a directory with `--zarr` and with
//! `--zarr=2`, and `zarr_mount_check.py` opens the store as a user would (consolidated metadata)
//! and compares every numeric dataset with h5py's values, whole and in random slices,
//! NaN-aware; compares each chunked dataset's listed chunk keys with the chunks h5py says
//! are written; and checks that an unwritten chunk has no key (zarr-python then reads the
//! fill value, which the comparison covers). What may differ is decided here, from the
//! manifest and the library: datasets whose filters this build does not decode fail with
//! `EIO` (and only those), datasets libhdf5 converts on read differ from h5py (and only
//! those), and only datasets the mapping refuses or names the kernel cannot take are absent.
//! Without python3 with zarr, h5py and numpy those two tests print a skip line and return.
//!
//! The other test mounts single files: the keys and their errors as the kernel passes them
//! (a listing, `ENOENT` for an unwritten chunk, `EIO` for an unreadable dataset while the
//! others read), the encoding xattr, the `-o` forms, and that a mount without the option
//! is the plain tree.

mod harness;
mod servers;
mod zarr_core;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use h5mount::io::ReadCtx;
use h5mount::model::{File, OpenOptions};
use h5mount::views::zarr::{ZarrArray, ZarrOptions, ZarrVersion};
use harness::{manifest, Mount};
use serde_json::Value;
use zarr_core::{data, fixture};

/// Whether `python` can run `import_line`; else the test skips, or fails when `require`
/// is set.
fn python_can(python: &str, import_line: &str, require: &str) -> bool {
    harness::python_or_skip(python, import_line, require)
}

/// Whether python3 has zarr-python, h5py and numpy (else skip, or fail when required).
fn python_ok() -> bool {
    python_can(
        harness::PYTHON,
        "import zarr, h5py, numpy",
        "H5MOUNT_REQUIRE_PYTHON",
    )
}

/// The manifest's entry for `label` (`FILE/PATH`).
fn object<'a>(m: &'a Value, label: &str) -> &'a Value {
    let (file, path) = label.split_once('/').unwrap();
    &m["files"][file]["objects"][format!("/{path}")]
}

/// Whether the mapping refuses the dataset `label` (`FILE/PATH`) of the corpus.
fn mapping_refuses(label: &str, v: ZarrVersion) -> bool {
    let (file, path) = label.split_once('/').unwrap();
    let f = File::open(&data(file), &OpenOptions::default()).unwrap();
    let ds = f.dataset(f.resolve(&format!("/{path}")).unwrap()).unwrap();
    let opts = ZarrOptions {
        version: v,
        decoded: false,
    };
    ZarrArray::new(&f, &ds, opts).is_err()
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// A label short enough for a message (the corpus has names of thousands of bytes).
fn short(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Mount the corpus as a store of format `fmt` and judge what zarr-python reads.
fn corpus(fmt: &str, flag: &str, v: ZarrVersion) {
    if !python_ok() {
        return;
    }
    let dir = fixture("data");
    let m = Mount::background(&dir, &[flag]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/zarr_mount_check.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(m.path())
        .arg(&dir)
        .arg(fmt)
        .arg("20240611")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "zarr_mount_check.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let man = manifest();
    let label_list = |k: &str| strings(&r[k]);
    // What zarr-python read equals h5py, but where libhdf5 converts on read.
    for l in label_list("mismatch") {
        assert!(
            object(man, &l).get("raw_sha256").is_some(),
            "{}: zarr-python and h5py differ",
            short(&l)
        );
    }
    // EIO only for datasets this build cannot decode.
    let eio = label_list("eio");
    for l in &eio {
        let unsupported = object(man, l)["filters"].as_array().is_some_and(|fl| {
            fl.iter()
                .any(|f| !h5mount::filters::is_supported(f["id"].as_u64().unwrap() as u16))
        });
        assert!(
            unsupported,
            "{}: EIO for a dataset this build reads",
            short(l)
        );
    }
    // Absent only where the mapping refuses the dataset or the kernel cannot take a name.
    for l in label_list("missing") {
        let long_name = l.split('/').any(|c| c.len() > 255);
        assert!(
            long_name || mapping_refuses(&l, v),
            "{}: a dataset the mapping serves is not in the store",
            short(&l)
        );
    }
    let errors = label_list("errors");
    assert!(
        errors.is_empty(),
        "errors: {:?}",
        errors.iter().map(|e| short(e)).collect::<Vec<_>>()
    );
    let listing = label_list("listing");
    assert!(
        listing.is_empty(),
        "listings: {:?}",
        listing.iter().map(|e| short(e)).collect::<Vec<_>>()
    );
    // The corpus was read, not skipped.
    let n = |k: &str| r[k].as_u64().unwrap();
    assert!(n("files") >= 90, "{r}");
    assert!(n("compared") >= 1500 && n("slices") >= 4000, "{r}");
    assert!(n("listings") >= 800 && n("unwritten_absent") >= 30, "{r}");
    // Every array found says how it is served.
    assert_eq!(n("encodings"), n("compared") + eio.len() as u64, "{r}");
    eprintln!(
        "zarr {fmt}: {} files, {} arrays equal ({} in slices only), {} slices, {} listings, \
         {} unwritten chunks absent, {} EIO, {} without a listing h5py vouches for",
        n("files"),
        n("compared"),
        n("sliced_only"),
        n("slices"),
        n("listings"),
        n("unwritten_absent"),
        eio.len(),
        label_list("no_oracle").len()
    );
}

#[test]
fn zarr_python_reads_the_corpus_v3() {
    corpus("3", "--zarr", ZarrVersion::V3);
}

#[test]
fn zarr_python_reads_the_corpus_v2() {
    corpus("2", "--zarr=2", ZarrVersion::V2);
}

/// The errno of a failed filesystem call.
fn os_errno<T: std::fmt::Debug>(r: std::io::Result<T>) -> i32 {
    r.expect_err("expected an error").raw_os_error().unwrap()
}

/// Names in the directory `p`.
fn listing(p: &Path) -> BTreeSet<String> {
    std::fs::read_dir(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn keys_errors_and_options_through_the_kernel() {
    let file = data("chunked_fixed_latest.h5");
    let f = File::open(&file, &OpenOptions::default()).unwrap();
    let ds = f.dataset(f.resolve("/sparse_nofill").unwrap()).unwrap();
    let array = ZarrArray::new(&f, &ds, ZarrOptions::default()).unwrap();
    let grid = array.grid_shape();
    let m = Mount::background(&file, &["--zarr"]);
    // `c` lists the rows holding a written chunk; each row its written chunks.
    let all: Vec<(u64, u64)> = (0..grid[0])
        .flat_map(|i| (0..grid[1]).map(move |j| (i, j)))
        .collect();
    let (written, unwritten): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|&(i, j)| ds.stored_chunk(&[i, j]).unwrap().is_some());
    let rows: BTreeSet<String> = written.iter().map(|(i, _)| i.to_string()).collect();
    assert_eq!(listing(&m.at("/sparse_nofill/c")), rows);
    for (i, j) in &written {
        let p = m.at(&format!("/sparse_nofill/c/{i}/{j}"));
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(
            bytes,
            array.chunk(ReadCtx::default(), &[*i, *j]).unwrap().unwrap()
        );
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o444);
    }
    let (i, j) = *unwritten.first().expect("a sparse dataset");
    let p = m.at(&format!("/sparse_nofill/c/{i}/{j}"));
    assert_eq!(os_errno(std::fs::metadata(&p)), libc::ENOENT);
    let dir_mode = std::fs::metadata(m.at("/sparse_nofill")).unwrap();
    assert!(dir_mode.is_dir() && dir_mode.permissions().mode() & 0o777 == 0o555);
    let enc = harness::getxattr(&m.at("/sparse_nofill"), "user.h5mount.zarr_encoding").unwrap();
    assert_eq!(String::from_utf8(enc).unwrap(), array.encoding());
    // Read-only.
    assert_eq!(
        os_errno(std::fs::write(m.at("/sparse_nofill/zarr.json"), b"{}")),
        libc::EROFS
    );
    assert_eq!(os_errno(std::fs::create_dir(m.at("/new"))), libc::EROFS);
    let root: Value = serde_json::from_slice(&std::fs::read(m.at("/zarr.json")).unwrap()).unwrap();
    assert_eq!(root["consolidated_metadata"]["kind"], "inline");
    drop(m);

    // v2 through the -o form; an unreadable dataset fails its keys with EIO, the others
    // read.
    let sz = data("filters_sz_latest.h5");
    let m = Mount::background(&sz, &["-o", "ro,zarr=2"]);
    let names = listing(&m.at("/sz_abs_f4"));
    assert!(
        names.contains(".zarray") && names.contains("0.0"),
        "{names:?}"
    );
    assert_eq!(os_errno(std::fs::read(m.at("/sz_abs_f4/0.0"))), libc::EIO);
    let zarray: Value =
        serde_json::from_slice(&std::fs::read(m.at("/sz_abs_f4/.zarray")).unwrap()).unwrap();
    assert_eq!(zarray["zarr_format"], 2);
    assert!(std::fs::read(m.at("/.zmetadata")).is_ok());
    drop(m);
    let m = Mount::background(&data("layouts_latest.h5"), &["-o", "zarr,zarr_decoded"]);
    assert_eq!(
        std::fs::read(m.at("/contiguous_f4/c/0/0")).unwrap().len(),
        20 * 30 * 4
    );
    drop(m);

    // Without the option: the plain tree.
    let m = Mount::background(&file, &[]);
    assert!(!listing(m.path()).contains("zarr.json"));
    let meta = std::fs::metadata(m.at("/sparse_nofill")).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.len(), ds.len());
}

/// xarray opens netCDF-4 files through the store (consolidated metadata, v3 and v2) as it
/// opens the files themselves with h5netcdf: the same variables, dimensions, coordinates and
/// attributes, CF decoding on (times, fill values, packed integers), in the root group and
/// in each child group. One file is written by h5netcdf, one by netCDF4-python (libnetcdf):
/// unlimited dimensions, dimensions without coordinate variables, nested groups using their
/// parents' dimensions. Skips without xarray and h5netcdf, unless `H5MOUNT_REQUIRE_PYTHON`
/// is set.
#[test]
fn xarray_reads_netcdf_through_the_store_as_h5netcdf_reads_the_file() {
    if !python_can(
        "python3",
        "import xarray, h5netcdf, zarr",
        "H5MOUNT_REQUIRE_PYTHON",
    ) {
        return;
    }
    let script = "import sys, warnings, xarray as xr\n\
                  warnings.simplefilter('ignore')\n\
                  path, mnt, fmt = sys.argv[1], sys.argv[2], int(sys.argv[3])\n\
                  for group in [None] + sys.argv[4:]:\n\
                  \x20   ref = xr.open_dataset(path, engine='h5netcdf', group=group).load()\n\
                  \x20   z = xr.open_zarr(mnt, group=group, consolidated=True, zarr_format=fmt).load()\n\
                  \x20   xr.testing.assert_identical(ref, z)\n\
                  \x20   assert z.data_vars, group\n\
                  \x20   print('identical', group, dict(z.sizes))\n";
    for (name, groups) in [
        ("zarr/netcdf.h5", &["sub"][..]),
        ("zarr/netcdf4.h5", &["forecast", "forecast/members"][..]),
    ] {
        let file = fixture(name);
        for (flag, fmt) in [("--zarr", "3"), ("--zarr=2", "2")] {
            let m = Mount::background(&file, &[flag]);
            let out = Command::new("python3")
                .args(["-c", script])
                .arg(&file)
                .arg(m.path())
                .arg(fmt)
                .args(groups)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{name} {flag}: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                text.matches("identical").count(),
                groups.len() + 1,
                "{name} {flag}: {text}"
            );
        }
    }
}

/// GDAL's Zarr driver (Debian's python3-gdal, Zarr v2) reads 2-D arrays of the store with
/// the dataset's values: a deflated one as stored, and with `--zarr-decoded` one whose
/// shuffle filter GDAL does not know. Compared with the raw bytes of the same datasets in
/// a plain mount. (The dataset is closed before the interpreter ends: Debian's GDAL 3.6
/// crashes at exit otherwise.) Skips without python3-gdal, unless `H5MOUNT_REQUIRE_GDAL`
/// is set.
#[test]
fn gdal_reads_two_dimensional_arrays_of_a_v2_store() {
    const GDAL_PY: &str = harness::GDAL_PYTHON;
    if !python_can(GDAL_PY, "from osgeo import gdal", "H5MOUNT_REQUIRE_GDAL") {
        return;
    }
    let file = fixture("zarr/zarr_latest.h5");
    let plain = Mount::background(&file, &[]);
    for (flags, name) in [
        (&["--zarr=2"][..], "gzip_i2"),
        (&["--zarr=2", "--zarr-decoded"][..], "shuffle_gzip_f4"),
    ] {
        let m = Mount::background(&file, flags);
        let script = "import sys\n\
                      from osgeo import gdal\n\
                      gdal.UseExceptions()\n\
                      ds = gdal.Open('ZARR:\"%s\"' % sys.argv[1])\n\
                      a = ds.GetRasterBand(1).ReadAsArray()\n\
                      ds = None\n\
                      sys.stdout.buffer.write(a.astype(a.dtype.newbyteorder('<')).tobytes())\n\
                      sys.stdout.flush()\n";
        let out = Command::new(GDAL_PY)
            .args(["-c", script])
            .arg(m.path().join(name))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{flags:?} {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let want = std::fs::read(plain.path().join(name)).unwrap();
        assert!(!want.is_empty());
        assert_eq!(out.stdout, want, "{flags:?} {name}");
    }
}

/// Pass-through: zarr-python reading a shuffle+deflate array through the store decodes no
/// chunk in the daemon (its chunk cache is never filled) and reads chunk files of the stored
/// sizes; the same array served with `--zarr-decoded` is decoded by the daemon.
#[test]
fn a_pass_through_array_is_decoded_by_the_reader_not_the_daemon() {
    if !python_ok() {
        return;
    }
    let file = fixture("zarr/zarr_latest.h5");
    let read = "import sys, zarr, numpy as np, h5py, hdf5plugin\n\
                g = zarr.open_group(sys.argv[1], mode='r')\n\
                a = g['shuffle_gzip_f4'][...]\n\
                b = h5py.File(sys.argv[2], 'r')['shuffle_gzip_f4'][()]\n\
                assert np.array_equal(a, b), 'values differ'\n\
                print('equal')\n";
    let mut misses = Vec::new();
    for flags in [&["--zarr"][..], &["--zarr", "--zarr-decoded"][..]] {
        let m = Mount::background(&file, flags);
        let before = harness::stats(&m)["cache_misses"];
        let out = Command::new("python3")
            .args(["-c", read])
            .arg(m.path())
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{flags:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        misses.push(harness::stats(&m)["cache_misses"] - before);
        if flags.len() == 1 {
            let enc = harness::getxattr(
                &m.path().join("shuffle_gzip_f4"),
                "user.h5mount.zarr_encoding",
            )
            .unwrap();
            let enc = String::from_utf8_lossy(&enc).into_owned();
            assert!(enc.starts_with("pass-through"), "{enc}");
            // Chunk files are the stored chunks: smaller than the decoded ones.
            let first = m.path().join("shuffle_gzip_f4/c/0/0");
            let stored = std::fs::metadata(&first).unwrap().len();
            assert!(stored > 0 && stored < 4 * 16 * 16, "{stored} bytes");
        }
    }
    assert_eq!(misses[0], 0, "pass-through decodes nothing in the daemon");
    assert!(misses[1] > 0, "decoded chunks are decoded by the daemon");
}

/// The store of an object on S3 (SeaweedFS on loopback, `--zarr` and `--zarr=2`): every
/// array zarr-python finds equals h5py's values of the local copy, as for a local file.
#[test]
fn an_s3_object_as_a_store_reads_as_the_local_file() {
    if !python_ok() {
        return;
    }
    let Some(sw) = servers::Seaweed::start() else {
        return;
    };
    sw.create_bucket("zarr");
    let file = fixture("zarr/zarr_latest.h5");
    sw.put_object("zarr", "run/z.h5", &std::fs::read(&file).unwrap());
    let check = "import sys, warnings, numpy as np, h5py, hdf5plugin, zarr\n\
                 sys.path.insert(0, sys.argv[4])\n\
                 from zarr_check import walk, expected_values, same\n\
                 warnings.simplefilter('ignore')\n\
                 root = zarr.open_group(sys.argv[1], mode='r', zarr_format=int(sys.argv[3]))\n\
                 n = bad = 0\n\
                 h = h5py.File(sys.argv[2], 'r')\n\
                 for path, arr in walk(root):\n\
                 \x20   want = expected_values(h[path]); got = np.asarray(arr[...])\n\
                 \x20   n += 1\n\
                 \x20   if not same(got, want): bad += 1; print('DIFF', path)\n\
                 print(n, 'arrays', bad, 'differ')\n\
                 sys.exit(1 if bad or n < 20 else 0)\n";
    for (opt, fmt) in [("zarr", "3"), ("zarr=2", "2")] {
        let url = "s3://zarr/run/z.h5".to_string();
        let endpoint = sw.endpoint();
        let m = Mount::by_command(move |mp| {
            let mut c = harness::anonymous_s3(&url, mp, &endpoint);
            c.args(["-o", opt]);
            c
        });
        let out = Command::new("python3")
            .args(["-c", check])
            .arg(m.path())
            .arg(&file)
            .arg(fmt)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{opt}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// tensorstore, a client that knows fewer codecs than zarr-python: with `--zarr-decoded`
/// it reads every numeric array of the Zarr fixture in v3 and v2 equal to h5py; without,
/// it reads the arrays whose codecs it knows (the others it refuses; never a wrong value).
/// Skips without tensorstore, unless `H5MOUNT_REQUIRE_PYTHON` is set.
#[test]
fn tensorstore_reads_every_array_decoded_and_pass_through_where_it_can() {
    if !python_can(
        "python3",
        "import tensorstore, h5py, hdf5plugin",
        "H5MOUNT_REQUIRE_PYTHON",
    ) {
        return;
    }
    let file = fixture("zarr/zarr_latest.h5");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/tensorstore_check.py");
    for (flags, fmt, decoded) in [
        (&["--zarr", "--zarr-decoded"][..], "3", "1"),
        (&["--zarr=2", "--zarr-decoded"][..], "2", "1"),
        (&["--zarr"][..], "3", "0"),
        (&["--zarr=2"][..], "2", "0"),
    ] {
        let m = Mount::background(&file, flags);
        let out = Command::new("python3")
            .arg(&script)
            .arg(m.path())
            .arg(&file)
            .args([fmt, decoded])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{flags:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(" 0 wrong"), "{text}");
    }
}

/// tensorstore over the whole corpus (a directory mount, `--zarr-decoded`, v3 and v2):
/// every numeric dataset equal to h5py, refusals only for what this build cannot serve
/// (SZ, nbit, names longer than a file name). Skips without tensorstore, unless
/// `H5MOUNT_REQUIRE_PYTHON` is set.
#[test]
fn tensorstore_reads_the_corpus_decoded() {
    if !python_can(
        "python3",
        "import tensorstore, h5py, hdf5plugin",
        "H5MOUNT_REQUIRE_PYTHON",
    ) {
        return;
    }
    let dir = fixture("data");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/tensorstore_check.py");
    for (opt, fmt) in [("--zarr", "3"), ("--zarr=2", "2")] {
        let m = Mount::background(&dir, &[opt, "--zarr-decoded"]);
        let out = Command::new("python3")
            .arg(&script)
            .arg("--corpus")
            .arg(m.path())
            .arg(&dir)
            .arg(fmt)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{opt}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A reader going through every chunk key of an S3 object's array in grid order, or in
/// dask's order (mostly down the grid: task names sorted as strings, last first), two
/// threads taking the next key as dask's do, has the chunks ahead fetched in few merged
/// GETs (readahead across chunk keys), pass-through and decoded alike, and reads the bytes
/// of a local mount; a reader of a few keys scattered at random fetches about one GET per
/// key and nothing more. The file (h5py, written here): 256 chunks of 64 KiB, shuffle and
/// gzip, about 30 KB stored each. Skips without SeaweedFS or h5py.
#[test]
fn a_pass_through_the_chunk_keys_of_an_s3_array_is_fetched_ahead_in_few_gets() {
    let Some(sw) = servers::Seaweed::start() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("grid.h5");
    let write = "import sys, numpy as np, h5py\n\
                 rng = np.random.default_rng(7)\n\
                 v = np.round(rng.standard_normal((2048, 2048)).cumsum(axis=1), 1)\n\
                 with h5py.File(sys.argv[1], 'w') as f:\n\
                 \x20   f.create_dataset('v', data=v.astype('<f4'), chunks=(128, 128),\n\
                 \x20                    shuffle=True, compression='gzip')\n";
    let out = Command::new("python3")
        .args(["-c", write])
        .arg(&file)
        .output();
    if !out.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!("skip: python3 with h5py and numpy cannot write the file: {out:?}");
        return;
    }
    sw.create_bucket("ahead");
    sw.put_object("ahead", "grid.h5", &std::fs::read(&file).unwrap());
    let grid = 16u64;
    let keys: Vec<String> = (0..grid * grid)
        .map(|k| format!("v/c/{}/{}", k / grid, k % grid))
        .collect();
    for extra in [&[][..], &["--zarr-decoded"][..]] {
        let mut args = vec!["--zarr", "--no-warm-up"];
        args.extend_from_slice(extra);
        let local = Mount::background(&file, &args);
        let want: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| std::fs::read(local.path().join(k)).unwrap())
            .collect();
        let mount = || {
            let endpoint = sw.endpoint();
            let args = args.clone();
            Mount::by_command(move |mp| {
                let mut c = harness::anonymous_s3("s3://ahead/grid.h5", mp, &endpoint);
                c.args(&args);
                c
            })
        };
        // Every key in C order, then in dask's, by two threads taking the next key.
        let mut dask: Vec<usize> = (0..keys.len()).collect();
        dask.sort_by_key(|&k| {
            std::cmp::Reverse((k / 16).to_string() + "," + &(k % 16).to_string())
        });
        for order in [(0..keys.len()).collect::<Vec<_>>(), dask] {
            let m = mount();
            let before = harness::stats(&m);
            let next = std::sync::atomic::AtomicUsize::new(0);
            let got: Vec<(usize, Vec<u8>)> = std::thread::scope(|s| {
                let readers: Vec<_> = (0..2)
                    .map(|_| {
                        s.spawn(|| {
                            let mut mine = Vec::new();
                            loop {
                                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let Some(&k) = order.get(i) else {
                                    return mine;
                                };
                                let key = &keys[k];
                                mine.push((k, std::fs::read(m.path().join(key)).unwrap()));
                            }
                        })
                    })
                    .collect();
                readers
                    .into_iter()
                    .flat_map(|r| r.join().unwrap())
                    .collect()
            });
            let after = harness::stats(&m);
            assert_eq!(got.len(), keys.len());
            for (k, bytes) in &got {
                assert!(bytes == &want[*k], "{extra:?}: {} differs", keys[*k]);
            }
            let gets = after["remote_gets"] - before["remote_gets"];
            let shown = format!("{extra:?}: {gets} GETs for {} keys: {after:?}", keys.len());
            assert!(gets <= keys.len() as u64 / 4, "{shown}");
        }
        // A few keys far apart, at random: about one GET each, and little more than their
        // stored bytes fetched (their pages, the chunk index).
        let m = mount();
        let before = harness::stats(&m);
        let picked = [37usize, 201, 90, 5, 163, 250, 122, 60];
        let stored: u64 = picked
            .iter()
            .map(|&k| {
                std::fs::metadata(local.path().join(&keys[k]))
                    .unwrap()
                    .len()
            })
            .sum();
        for &k in &picked {
            let bytes = std::fs::read(m.path().join(&keys[k])).unwrap();
            assert!(bytes == want[k], "{extra:?}: {} differs", keys[k]);
        }
        let after = harness::stats(&m);
        let gets = after["remote_gets"] - before["remote_gets"];
        let fetched = after["remote_bytes"] - before["remote_bytes"];
        let shown = format!("{extra:?}: {gets} GETs, {fetched} bytes: {after:?}");
        assert!(gets <= picked.len() as u64 + 4, "{shown}");
        if extra.is_empty() {
            assert!(fetched <= stored + 8 * (64 << 10), "{shown}");
        }
    }
}
