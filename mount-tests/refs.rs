//! `h5mount refs`: reference manifests, read back by the clients that use them.
//!
//! `refs_check.py` writes the manifest of each Zarr and corpus fixture at two inline
//! thresholds and reads every array through fsspec's `ReferenceFileSystem` with zarr-python
//! (Zarr format 2), comparing with h5py; an array with other values, or missing without
//! being listed as left out, fails it. `refs_parquet_check.py` does the same for the
//! Parquet layout (and reads its files with pyarrow too: it also needs fastparquet and
//! pyarrow). The same fixtures behind nginx and on SeaweedFS: their manifests made by
//! reading them remotely, read back from the server (`refs_check.py --remote`, with xarray
//! too). Without python3, zarr, fsspec, h5py or hdf5plugin
//! the test says "skip" and returns, unless `H5MOUNT_REQUIRE_PYTHON` is set (as
//! `mount-tests/run` sets it once it installed them), when it fails. The command's own
//! refusals (a missing file, a bad threshold, a path that is not there) need nothing.

mod harness;
mod servers;

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_h5mount");

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> PathBuf {
    harness::fixture(&format!("zarr/{name}"))
}

/// Whether python3 has the modules the check needs (else skip, or fail when required).
fn python_ready() -> bool {
    python_has("zarr, fsspec, h5py, hdf5plugin, numpy")
}

/// Whether python3 can import `modules` (else skip, or fail when required).
fn python_has(modules: &str) -> bool {
    harness::python_or_skip(
        harness::PYTHON,
        &format!("import {modules}"),
        "H5MOUNT_REQUIRE_PYTHON",
    )
}

/// Run the check `script` (in mount-tests/) on the binary; it must succeed and end with a
/// line "N passed" with N above `least`.
fn run_check(script: &str, least: u64) {
    let out = Command::new("python3")
        .arg(root().join("mount-tests").join(script))
        .arg(BIN)
        .current_dir(root())
        .output()
        .expect("python3 runs");
    let (passed, text) = passed_of(&out);
    // It checked something.
    assert!(passed > least, "{text}");
}

/// The check's output must say it succeeded; the N of its last line "N passed, ..." and
/// its text.
fn passed_of(out: &std::process::Output) -> (u64, String) {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the check failed:\n{text}");
    let passed = text
        .lines()
        .last()
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    (passed, text)
}

#[test]
fn manifests_read_back_through_fsspec_and_zarr_equal_h5py() {
    if !python_ready() {
        return;
    }
    run_check("refs_check.py", 100);
}

/// Parquet manifests (kerchunk's layout) of the Zarr fixtures, the test corpus and two
/// files of 2,000-chunk arrays (some nearly all unwritten), at two thresholds and record
/// sizes that split arrays over several files: pyarrow reads every file's rows equal to the
/// JSON manifest's entries, and fsspec (fastparquet) with zarr-python reads every array
/// equal to h5py (`refs_parquet_check.py`).
#[test]
fn parquet_manifests_read_back_through_pyarrow_and_fsspec_equal_h5py() {
    if !python_ready() || !python_has("fastparquet, pyarrow, pandas") {
        return;
    }
    run_check("refs_parquet_check.py", 1000);
}

#[test]
fn parquet_is_chosen_by_name_or_flag_and_its_refusals_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = fixture("zarr_latest.h5");
    let f = file.to_str().unwrap();
    // By the output's name, or by --format whatever the name.
    for (out, extra) in [
        ("a.parq", None),
        ("b.parquet", None),
        ("c", Some("parquet")),
    ] {
        let path = dir.path().join(out);
        let mut args = vec![f, "-o", path.to_str().unwrap(), "--record-size", "2"];
        if let Some(fmt) = extra {
            args.extend(["--format", fmt]);
        }
        let o = run_refs(&args);
        assert!(
            o.status.success(),
            "{out}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path.join(".zmetadata")).unwrap()).unwrap();
        assert_eq!(meta["record_size"], 2, "{out}");
        assert!(path.join("zstd_f8/refs.0.parq").is_file(), "{out}");
    }
    // Written again over itself: replaced.
    let again = dir.path().join("a.parq");
    let o = run_refs(&[f, "-o", again.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json = dir.path().join("d.json");
    let o = run_refs(&[f, "-o", json.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(serde_json::from_slice::<serde_json::Value>(&std::fs::read(&json).unwrap()).is_ok());
    let mine = dir.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("keep.txt"), "x").unwrap();
    let refused: [(&[&str], i32); 7] = [
        (&["--format", "parquet"], 2),
        (&["-o", "x.parq", "--record-size", "0"], 2),
        (&["-o", "x.parq", "--record-size", "10000001"], 2),
        (&["-o", "x.json", "--record-size", "5"], 2),
        (&["-o", "x", "--format", "csv"], 2),
        (&["-o", mine.to_str().unwrap(), "--format", "parquet"], 1),
        (&["/", "-o", "x.parq"], 0),
    ];
    for (args, code) in refused {
        let mut all = vec![f];
        all.extend(args);
        let o = Command::new(BIN)
            .arg("refs")
            .args(&all)
            .current_dir(dir.path())
            .env("HOME", dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        if code != 0 {
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        }
    }
    assert!(mine.join("keep.txt").exists());
    // A dataset alone has no group to hold its chunks' directory.
    let ds = dir.path().join("ds.parq");
    let o = run_refs(&[f, "/zstd_f8", "-o", ds.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("root"));
}

/// `c` with no credentials of the caller's and no lookup leaving 127.0.0.0/8: HOME at
/// `home`, the AWS_* keys removed, instance metadata off and pointed at a closed port.
fn aws_free<'a>(c: &'a mut Command, home: &Path) -> &'a mut Command {
    c.env("HOME", home)
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_METADATA_ENDPOINT", "http://127.0.0.1:9")
}

/// The URLs the references of manifest `m` name.
fn urls_of(m: &serde_json::Value) -> Vec<&str> {
    m["refs"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|v| v.as_array())
        .map(|a| a[0].as_str().unwrap())
        .collect()
}

fn run_refs(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("refs")
        .args(args)
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("h5mount runs")
}

#[test]
fn the_manifest_on_standard_output_is_the_one_written_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = fixture("netcdf.h5");
    let path = dir.path().join("m.json");
    let a = run_refs(&[file.to_str().unwrap(), "-o", path.to_str().unwrap()]);
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let b = run_refs(&[file.to_str().unwrap()]);
    assert!(b.status.success());
    assert_eq!(std::fs::read(&path).unwrap(), b.stdout);
    let m: serde_json::Value = serde_json::from_slice(&b.stdout).unwrap();
    assert_eq!(m["version"], 1);
    let refs = m["refs"].as_object().unwrap();
    assert!(refs.contains_key(".zgroup") && refs.contains_key(".zmetadata"));
    // The references name the file by its absolute path unless --url says otherwise.
    let named = urls_of(&m);
    assert!(!named.is_empty() || refs.len() > 3);
    assert!(
        named.iter().all(|u| Path::new(u).is_absolute()),
        "{named:?}"
    );
    let c = run_refs(&[
        file.to_str().unwrap(),
        "--url",
        "s3://bucket/n.h5",
        "--inline-threshold",
        "0",
    ]);
    let m: serde_json::Value = serde_json::from_slice(&c.stdout).unwrap();
    let urls = urls_of(&m);
    assert!(!urls.is_empty() && urls.iter().all(|u| *u == "s3://bucket/n.h5"));
}

#[test]
fn a_subtree_is_written_alone() {
    let file = fixture("netcdf.h5");
    let o = run_refs(&[file.to_str().unwrap(), "/sub"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let m: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let keys: Vec<&String> = m["refs"].as_object().unwrap().keys().collect();
    assert!(keys.iter().any(|k| k.starts_with("mask/")), "{keys:?}");
    assert!(!keys.iter().any(|k| k.starts_with("sub/")), "{keys:?}");
}

#[test]
fn refusals_are_one_line_with_a_status() {
    let missing = run_refs(&["/nonexistent/f.h5"]);
    assert_eq!(missing.status.code(), Some(1));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("/nonexistent/f.h5"), "{err}");
    let file = fixture("netcdf.h5");
    let nopath = run_refs(&[file.to_str().unwrap(), "/no/such/group"]);
    assert_eq!(nopath.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&nopath.stderr).contains("no/such"));
    for bad in ["-1", "x", "99999999999"] {
        let arg = format!("--inline-threshold={bad}");
        let o = run_refs(&[file.to_str().unwrap(), &arg]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{bad}: {err}");
    }
}

/// The fixtures `refs_check.py` reads locally (`zarr_check.py`'s list), relative to
/// mount-tests/fixtures: asked of Python, so that the list has one definition.
fn default_fixtures() -> Vec<String> {
    let list = "import sys; sys.path.insert(0, 'mount-tests')\n\
                from zarr_check import DEFAULT, FIX\n\
                print('\\n'.join(str(p.relative_to(FIX)) for p in DEFAULT))\n";
    let out = Command::new("python3")
        .args(["-c", list])
        .current_dir(root())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect();
    assert!(files.len() > 50, "{files:?}");
    files
}

/// Who reads a remote manifest back from the server.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReadBy {
    Zarr,
    ZarrAndXarray,
    /// No client: it holds no reference.
    Nobody,
}

/// The inline thresholds each remote manifest is written at (None: the default), and who
/// reads it back: at 0, every chunk that can be a reference is one, read by zarr-python
/// from the server; at the default, as users get them (references, small arrays inline),
/// zarr-python and xarray; at 64 MiB every array is inline (decoded-only ones too, read and
/// decoded by `h5mount refs` from the server), nothing is left for a client to fetch.
/// Each is also the local file's manifest at that threshold but for the URLs, and
/// `refs_check.py` reads those back locally.
const REMOTE_THRESHOLDS: [(Option<u32>, ReadBy); 3] = [
    (Some(0), ReadBy::Zarr),
    (None, ReadBy::ZarrAndXarray),
    (Some(64 << 20), ReadBy::Nobody),
];

/// The manifests of remote fixtures: (manifest, local copy) pairs for zarr-python alone
/// and for xarray too, and the fixtures whose manifests read by a client hold references
/// (so that it must read them from the server).
#[derive(Default)]
struct RemoteManifests {
    zarr: Vec<PathBuf>,
    xarray: Vec<PathBuf>,
    referencing: Vec<String>,
}

/// For each fixture `rel` of `files` and each of [`REMOTE_THRESHOLDS`]: `h5mount refs`
/// of `url(rel)` (with `extra` options) into `dir`, read remotely. Every reference must
/// name that URL, and the manifest be the local copy's but for the URLs.
fn remote_manifests(
    files: &[String],
    url: impl Fn(&str) -> String,
    extra: &[&str],
    dir: &Path,
) -> RemoteManifests {
    let mut r = RemoteManifests::default();
    for rel in files {
        let url = url(rel);
        let local = root().join("mount-tests/fixtures").join(rel);
        for (threshold, read_by) in REMOTE_THRESHOLDS {
            let t = threshold.map_or("default".into(), |t| t.to_string());
            let manifest = dir.join(format!("{}.t{t}.json", rel.replace('/', "_")));
            let limit: Vec<String> = threshold
                .map(|t| vec!["--inline-threshold".into(), t.to_string()])
                .unwrap_or_default();
            let o = aws_free(&mut Command::new(BIN), dir)
                .args(["refs", &url, "-o", manifest.to_str().unwrap()])
                .args(extra)
                .args(&limit)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{url}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let m: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
            let urls = urls_of(&m);
            assert!(urls.iter().all(|u| *u == url), "{rel}: {urls:?}");
            let mut args = vec![local.to_str().unwrap()];
            args.extend(limit.iter().map(String::as_str));
            let here: serde_json::Value = serde_json::from_slice(&run_refs(&args).stdout).unwrap();
            assert!(
                refs_without_urls(&here) == refs_without_urls(&m)
                    && here["h5mount"] == m["h5mount"],
                "{rel} (threshold {t}): the remote manifest is not the local one"
            );
            let pairs = match read_by {
                ReadBy::Zarr => &mut r.zarr,
                ReadBy::ZarrAndXarray => &mut r.xarray,
                ReadBy::Nobody => continue,
            };
            if !urls.is_empty() && !r.referencing.contains(rel) {
                r.referencing.push(rel.clone());
            }
            pairs.push(manifest);
            pairs.push(local.clone());
        }
    }
    r
}

/// `refs_check.py --remote PROTOCOL` over the manifests `m`, all in one Python process:
/// every array read with zarr-python, and with xarray too where `m` says so when xarray
/// is installed (else that part says "skip"), equal to h5py's, nothing missing unlisted.
fn check_remote(protocol: &str, endpoint: Option<&str>, m: &RemoteManifests, home: &Path) {
    let mut py = Command::new("python3");
    py.arg(root().join("mount-tests/refs_check.py"))
        .args(["--remote", protocol]);
    if let Some(e) = endpoint {
        py.args(["--endpoint", e]);
    }
    py.args(&m.zarr);
    if python_has("xarray, h5netcdf") {
        py.arg("--xarray");
    }
    py.args(&m.xarray).current_dir(root());
    let out = aws_free(&mut py, home).output().unwrap();
    let (passed, text) = passed_of(&out);
    assert!(
        passed > 1000 && text.contains(" passed, 0 failed"),
        "{text}"
    );
}

/// Every fixture `refs_check.py` checks locally, behind a real HTTP server (nginx on
/// loopback): its manifests made by reading it over HTTP, at each of [`REMOTE_THRESHOLDS`],
/// names it by its URL, and fsspec's `ReferenceFileSystem` over HTTP reads every array
/// back with zarr-python (and xarray) equal to h5py's values of the local file. Every
/// fixture whose manifests hold references was then read from nginx by the clients.
#[test]
fn every_fixture_s_manifest_made_and_read_over_http_equals_h5py() {
    if !python_has("zarr, fsspec, aiohttp, h5py, hdf5plugin, numpy") {
        return;
    }
    let files = default_fixtures();
    let Some(ng) = servers::Nginx::start(&root().join("mount-tests/fixtures"), 0) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let m = remote_manifests(&files, |rel| ng.url(rel), &[], dir.path());
    let by_refs = ng.logged().len();
    check_remote("http", None, &m, dir.path());
    let read: std::collections::HashSet<String> = ng.logged()[by_refs..]
        .iter()
        .filter(|l| l.method == "GET" && l.status == 206)
        .map(|l| l.uri.trim_start_matches('/').to_string())
        .collect();
    let unread: Vec<&String> = m
        .referencing
        .iter()
        .filter(|f| !read.contains(*f))
        .collect();
    assert!(
        m.referencing.len() > 30 && unread.is_empty(),
        "no chunk of these read over HTTP: {unread:?}"
    );
}

/// The same on a real S3 store (SeaweedFS on loopback): every fixture uploaded, its
/// manifest made by reading the object through S3 (unsigned, at the store's endpoint),
/// naming it by its s3:// URL, and read back through s3fs equal to h5py.
#[test]
fn every_fixture_s_manifest_made_and_read_over_s3_equals_h5py() {
    if !python_has("zarr, fsspec, s3fs, h5py, hdf5plugin, numpy") {
        return;
    }
    let files = default_fixtures();
    let Some(sw) = servers::Seaweed::start() else {
        return;
    };
    sw.create_bucket("fixtures");
    for rel in &files {
        let bytes = std::fs::read(root().join("mount-tests/fixtures").join(rel)).unwrap();
        sw.put_object("fixtures", rel, &bytes);
    }
    let dir = tempfile::tempdir().unwrap();
    let endpoint = sw.endpoint();
    let extra = [
        "--endpoint",
        &endpoint,
        "--no-sign-request",
        "--region",
        "us-east-1",
    ];
    let m = remote_manifests(
        &files,
        |rel| format!("s3://fixtures/{rel}"),
        &extra,
        dir.path(),
    );
    assert!(m.referencing.len() > 30, "{:?}", m.referencing);
    check_remote("s3", Some(&endpoint), &m, dir.path());
}

/// The refs of every entry of a manifest, URLs left out: what two manifests of the same
/// file read from different places must agree on.
fn refs_without_urls(m: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    let mut out: Vec<(String, serde_json::Value)> = m["refs"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let v = match v.as_array() {
                Some(a) => serde_json::json!([a[1], a[2]]),
                None => v.clone(),
            };
            (k.clone(), v)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A directory: one manifest per HDF5 file, at its relative path; a file that is not HDF5
/// is passed over, and one that fails (a signature and nothing more) is one line on
/// standard error and the exit status, the others being written.
#[test]
fn a_directory_gives_one_manifest_per_file_and_counts_the_failures() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(src.path().join("a/b")).unwrap();
    for (from, to) in [("netcdf.h5", "n.h5"), ("zarr_latest.h5", "a/b/z.h5")] {
        std::fs::copy(fixture(from), src.path().join(to)).unwrap();
    }
    std::fs::write(src.path().join("notes.txt"), b"not hdf5").unwrap();
    let mut broken = b"\x89HDF\r\n\x1a\n".to_vec();
    broken.extend_from_slice(&[0xff; 40]);
    std::fs::write(src.path().join("a/broken.h5"), &broken).unwrap();
    let o = run_refs(&[
        src.path().to_str().unwrap(),
        "-o",
        out.path().to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "one failed: {err}");
    assert!(
        err.contains("broken.h5") && err.contains("1 of 3 files failed"),
        "{err}"
    );
    let mut written: Vec<String> = walkdir(out.path());
    written.sort();
    assert_eq!(written, ["a/b/z.h5.json", "n.h5.json"]);
    // As Parquet: one .parq directory per file.
    let pq = tempfile::tempdir().unwrap();
    let o = run_refs(&[
        src.path().to_str().unwrap(),
        "-o",
        pq.path().to_str().unwrap(),
        "--format",
        "parquet",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(pq.path().join("n.h5.parq/.zmetadata").is_file());
    assert!(pq.path().join("a/b/z.h5.parq/.zmetadata").is_file());
    // Each is the manifest of its file alone.
    let alone = run_refs(&[fixture("netcdf.h5").to_str().unwrap()]);
    let a: serde_json::Value = serde_json::from_slice(&alone.stdout).unwrap();
    let b: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("n.h5.json")).unwrap()).unwrap();
    assert_eq!(refs_without_urls(&a), refs_without_urls(&b));
}

fn walkdir(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    out
}

/// A bucket prefix on a real S3 store (SeaweedFS on loopback): a manifest per object named
/// like HDF5, naming it by its s3:// URL, with the same references as the local file's.
#[test]
fn a_bucket_prefix_gives_one_manifest_per_object() {
    let Some(sw) = servers::Seaweed::start() else {
        return;
    };
    sw.create_bucket("refs");
    for name in ["netcdf.h5", "zarr_latest.h5"] {
        let bytes = std::fs::read(fixture(name)).unwrap();
        sw.put_object("refs", &format!("run/sub/{name}"), &bytes);
    }
    sw.put_object("refs", "run/notes.txt", b"text");
    sw.put_object(
        "refs",
        "elsewhere/x.h5",
        &std::fs::read(fixture("netcdf.h5")).unwrap(),
    );
    let out = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let o = aws_free(&mut Command::new(BIN), home.path())
        .args(["refs", "s3://refs/run/", "-o", out.path().to_str().unwrap()])
        .args([
            "--endpoint",
            &sw.endpoint(),
            "--no-sign-request",
            "--region",
            "us-east-1",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut written = walkdir(out.path());
    written.sort();
    assert_eq!(written, ["sub/netcdf.h5.json", "sub/zarr_latest.h5.json"]);
    for name in ["netcdf.h5", "zarr_latest.h5"] {
        let remote: serde_json::Value = serde_json::from_slice(
            &std::fs::read(out.path().join(format!("sub/{name}.json"))).unwrap(),
        )
        .unwrap();
        let url = format!("s3://refs/run/sub/{name}");
        let urls = urls_of(&remote);
        assert!(urls.iter().all(|u| *u == url), "{urls:?}");
        let local = run_refs(&[fixture(name).to_str().unwrap()]);
        let local: serde_json::Value = serde_json::from_slice(&local.stdout).unwrap();
        assert_eq!(
            refs_without_urls(&local),
            refs_without_urls(&remote),
            "{name}"
        );
    }
}

/// xarray opens a netCDF-4 file's manifest (engine zarr over fsspec's reference
/// filesystem, consolidated) identical to the file opened with h5netcdf, CF decoding on.
#[test]
fn xarray_reads_a_netcdf_manifest_as_h5netcdf_reads_the_file() {
    if !python_has("xarray, h5netcdf, zarr, fsspec") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("nc.json");
    let file = fixture("netcdf.h5");
    let o = run_refs(&[file.to_str().unwrap(), "-o", manifest.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let script = "import sys, warnings, xarray as xr\n\
                  warnings.simplefilter('ignore')\n\
                  ref = xr.open_dataset(sys.argv[1], engine='h5netcdf').load()\n\
                  kw = {'storage_options': {'fo': sys.argv[2], 'remote_protocol': 'file'},\n\
                        'consolidated': True}\n\
                  z = xr.open_dataset('reference://', engine='zarr', backend_kwargs=kw).load()\n\
                  xr.testing.assert_identical(ref, z)\n\
                  print('identical')\n";
    let mut py = Command::new("python3");
    py.args(["-c", script]).arg(&file).arg(&manifest);
    python_says(&mut py, "identical");
}

/// Run the Python `cmd`: it must succeed and print `expect`.
fn python_says(cmd: &mut Command, expect: &str) {
    let out = cmd.output().expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains(expect),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Beyond one machine: a dask.distributed cluster of two worker processes reads the
/// manifest of an object on SeaweedFS with xarray (the workers fetch chunks from the store
/// themselves, through s3fs) and computes a sum equal to h5py's (`refs_dask.py`). Skips
/// without dask, distributed, s3fs and xarray, unless `H5MOUNT_REQUIRE_PYTHON` is set.
#[test]
fn a_dask_cluster_reduces_an_array_read_through_a_manifest_from_s3() {
    if !python_has("dask.distributed, s3fs, xarray, zarr, h5py, hdf5plugin") {
        return;
    }
    let Some(sw) = servers::Seaweed::start() else {
        return;
    };
    sw.create_bucket("dask");
    let file = fixture("zarr_latest.h5");
    sw.put_object("dask", "run/z.h5", &std::fs::read(&file).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("z.json");
    let mut refs = Command::new(BIN);
    refs.args([
        "refs",
        "s3://dask/run/z.h5",
        "-o",
        manifest.to_str().unwrap(),
    ])
    .args([
        "--endpoint",
        &sw.endpoint(),
        "--no-sign-request",
        "--region",
        "us-east-1",
    ]);
    aws_free(&mut refs, dir.path());
    let o = refs.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut py = Command::new("python3");
    py.arg(root().join("mount-tests/refs_dask.py"))
        .arg(&manifest)
        .arg(sw.endpoint())
        .arg(&file)
        .arg("shuffle_gzip_f4");
    aws_free(&mut py, dir.path());
    python_says(&mut py, "sum equal");
}

/// A corrupt chunk index (a v1 B-tree whose child is its own root) leaves out its dataset
/// with the structure named, on standard error and in the manifest; the manifest of the
/// rest is written and the command succeeds.
#[test]
fn a_corrupt_chunk_index_leaves_out_its_dataset_naming_the_structure() {
    let file = root().join("mount-tests/fixtures/nasty/btree_chunk_cycle.h5");
    let o = run_refs(&[file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("d: left out") && err.contains("B-tree"),
        "{err}"
    );
    let m: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let why = m["h5mount"]["left_out"]["d"].as_str().unwrap();
    assert!(why.contains("v1 B-tree chunk index"), "{why}");
    let refs = m["refs"].as_object().unwrap();
    assert!(refs.contains_key(".zgroup"));
    assert!(!refs.keys().any(|k| k.starts_with("d/")), "nothing of d");
}

/// The manifests of the tests above read through xarray's `engine="kerchunk"` (kerchunk's
/// own backend: the manifest given by its path, zarr format 2, not consolidated): the
/// netCDF-4 file's identical to the file opened with h5netcdf, and every numeric array of
/// `zarr_latest.h5` that xarray decodes equal to h5py's values. Skips when that engine is
/// not installed (kerchunk registers it), unless `H5MOUNT_REQUIRE_PYTHON` is set.
#[test]
fn xarray_engine_kerchunk_reads_the_manifests_as_h5py_and_h5netcdf_read_the_files() {
    if !python_has("xarray, h5netcdf, h5py, hdf5plugin, zarr, fsspec, kerchunk.xarray_backend") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![];
    for name in ["netcdf.h5", "zarr_latest.h5"] {
        let manifest = dir.path().join(format!("{name}.json"));
        let file = fixture(name);
        let o = run_refs(&[file.to_str().unwrap(), "-o", manifest.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        args.push(file);
        args.push(manifest);
    }
    let script = "import sys, warnings, numpy as np, h5py, hdf5plugin, xarray as xr\n\
                  warnings.simplefilter('ignore')\n\
                  assert 'kerchunk' in xr.backends.list_engines()\n\
                  so = {'storage_options': {'remote_protocol': 'file'}}\n\
                  ref = xr.open_dataset(sys.argv[1], engine='h5netcdf').load()\n\
                  k = xr.open_dataset(sys.argv[2], engine='kerchunk', **so).load()\n\
                  xr.testing.assert_identical(ref, k)\n\
                  k = xr.open_dataset(sys.argv[4], engine='kerchunk', mask_and_scale=False, **so)\n\
                  n = 0\n\
                  with h5py.File(sys.argv[3], 'r') as h:\n\
                  \x20   for name, v in k.data_vars.items():\n\
                  \x20       want = h[name][()]\n\
                  \x20       if want.dtype.kind not in 'iuf':\n\
                  \x20           continue\n\
                  \x20       got = v.values\n\
                  \x20       assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True), name\n\
                  \x20       n += 1\n\
                  assert n > 20, n\n\
                  print(f'identical; {n} arrays equal')\n";
    let mut py = Command::new("python3");
    py.args(["-c", script]).args(&args);
    python_says(&mut py, "identical;");
}

/// A file shaped like the remote bench's 100-dataset file, in small: 10 groups of 10
/// datasets of four 16 KiB chunks with three attributes each, and a contiguous dataset.
/// The groups are made first and each is given an attribute once its datasets are
/// written, so that every group's header ends in a continuation chunk far from its first
/// (as most datasets' headers do): behind nginx, its manifest costs at most 10 requests
/// (issue 31's goal for the bench's file; 17 when each continuation chunk was read on its
/// own), and equals the local file's manifest.
#[test]
fn a_remote_manifest_of_a_hundred_datasets_costs_ten_requests() {
    if !python_has("h5py, numpy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bench.h5");
    let make = "import sys, h5py, numpy as np\n\
                rng = np.random.default_rng(3)\n\
                with h5py.File(sys.argv[1], 'w') as f:\n\
                \x20   f.attrs['title'] = 'shaped like the remote bench'\n\
                \x20   groups = [f.create_group(f'g{g}') for g in range(10)]\n\
                \x20   for g, grp in enumerate(groups):\n\
                \x20       for d in range(10):\n\
                \x20           k = 10 * g + d\n\
                \x20           x = rng.integers(0, 2**31, size=(32, 512), dtype='i4')\n\
                \x20           ds = grp.create_dataset(f'd{d}', data=x, chunks=(8, 512), compression='gzip')\n\
                \x20           ds.attrs['units'] = 'counts'\n\
                \x20           ds.attrs['exposure_s'] = 0.1 * (k + 1)\n\
                \x20           ds.attrs['origin'] = np.array([k, 2 * k, 3 * k], dtype='i4')\n\
                \x20       grp.attrs['index'] = g\n\
                \x20   f.create_dataset('contiguous', data=rng.integers(0, 2**31, size=(64, 512), dtype='i4'))\n\
                print('written')\n";
    let Some(ng) = manifest_over_nginx(make, &file, 6 << 20) else {
        return;
    };
    let requests = ng.logged().len();
    assert!(requests <= 10, "{requests} requests:\n{}", ng.access_log());
}

/// On S3, which answers one range per GET, the same kind of file costs a GET per object
/// header once the headers lie farther apart than the default merge gap (128 KiB: here each
/// dataset's 256 KiB of data lies between them), and `--merge-gap` trades those requests
/// for the bytes between the headers: at most 10 requests (a HEAD and GETs), the same
/// manifest. The GETs are counted from the client's own debug log (SeaweedFS keeps no
/// access log).
#[test]
fn a_merge_gap_writes_a_manifest_from_s3_in_ten_requests() {
    if !python_has("h5py, numpy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spaced.h5");
    let make = spread_script(4, 10, (128, 512), 32);
    let mut py = Command::new("python3");
    py.args(["-c", &make]).arg(&file);
    python_says(&mut py, "written");
    let Some(sw) = servers::Seaweed::start() else {
        return;
    };
    sw.create_bucket("gap");
    sw.put_object("gap", "spaced.h5", &std::fs::read(&file).unwrap());
    let endpoint = sw.endpoint();
    let local = run_refs(&[file.to_str().unwrap()]);
    let local: serde_json::Value = serde_json::from_slice(&local.stdout).unwrap();
    let gets_with = |extra: &[&str]| {
        let o = aws_free(&mut Command::new(BIN), dir.path())
            .args(["refs", "s3://gap/spaced.h5", "--endpoint", &endpoint])
            .args(["--no-sign-request", "--region", "us-east-1"])
            .args(extra)
            .env("RUST_LOG", "h5mount::io::remote=debug")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        let m: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            refs_without_urls(&local),
            refs_without_urls(&m),
            "{extra:?}"
        );
        let gets: Vec<String> = err
            .lines()
            .filter_map(|l| l.split_once(": GET bytes ").map(|(_, r)| r.to_string()))
            .collect();
        gets
    };
    let default = gets_with(&[]);
    let merged = gets_with(&["--merge-gap", "16M"]);
    assert!(
        default.len() > 50,
        "{} GETs with the default gap",
        default.len()
    );
    assert!(
        merged.len() < 10,
        "{} GETs and a HEAD with --merge-gap 16M: {merged:?}",
        merged.len()
    );
}

/// A Python script writing `n` groups of `n` int32 datasets of `shape` each (random values,
/// seed `seed`: incompressible), gzip-filtered in chunks of `rows` rows, to the file named by
/// its argument: object headers and chunk indexes lie between the datasets' data.
fn spread_script(seed: u32, n: u32, shape: (u32, u32), rows: u32) -> String {
    let (r, c) = shape;
    format!(
        "import sys, h5py, numpy as np\n\
         rng = np.random.default_rng({seed})\n\
         with h5py.File(sys.argv[1], 'w') as f:\n\
         \x20   for g in range({n}):\n\
         \x20       grp = f.create_group(f'g{{g}}')\n\
         \x20       for d in range({n}):\n\
         \x20           x = rng.integers(0, 2**31, size=({r}, {c}), dtype='i4')\n\
         \x20           grp.create_dataset(f'd{{d}}', data=x, chunks=({rows}, {c}), compression='gzip')\n\
         print('written')\n"
    )
}

/// Write the file `file` with the Python script `make` (at least `least` bytes), serve its
/// directory with nginx, write its manifest from there with `refs`, and check it equals
/// the local file's but for the URLs; the server, whose log holds the requests refs made.
fn manifest_over_nginx(make: &str, file: &Path, least: u64) -> Option<servers::Nginx> {
    let mut py = Command::new("python3");
    py.args(["-c", make]).arg(file);
    python_says(&mut py, "written");
    assert!(std::fs::metadata(file).unwrap().len() > least);
    let dir = file.parent().unwrap();
    let ng = servers::Nginx::start(dir, 0)?;
    let url = ng.url(file.file_name().unwrap().to_str().unwrap());
    let manifest = dir.join("m.json");
    let o = aws_free(&mut Command::new(BIN), dir)
        .args(["refs", &url, "-o", manifest.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let remote: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let local = run_refs(&[file.to_str().unwrap()]);
    let local: serde_json::Value = serde_json::from_slice(&local.stdout).unwrap();
    assert_eq!(refs_without_urls(&local), refs_without_urls(&remote));
    Some(ng)
}

/// A manifest of a remote file costs a few round trips for the whole tree, not one per
/// object: a file of 8 groups of 8 datasets whose headers and chunk indexes lie far apart
/// (each dataset's 192 KiB of data between them), behind nginx, is written with fewer GETs
/// than half its objects (the tree's metadata fetched level by level, each level's reads in
/// GETs of several ranges), and equal to the local file's manifest.
#[test]
fn a_remote_manifest_reads_the_tree_level_by_level() {
    if !python_has("h5py, numpy") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spread.h5");
    let make = spread_script(5, 8, (256, 192), 64);
    let Some(ng) = manifest_over_nginx(&make, &file, 10 << 20) else {
        return;
    };
    let gets = ng.logged().iter().filter(|l| l.method == "GET").count();
    let objects = 8 + 8 * 8;
    assert!(
        gets < objects / 2,
        "{gets} GETs for {objects} objects:\n{}",
        ng.access_log()
    );
}
