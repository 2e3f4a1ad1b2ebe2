//! The `.tif` view (src/views/tiff.rs) through a real mount of `fixtures/tiff/tiff.h5` (made by
//! `make_tiff.py`; h5py's digests and which datasets get a `.tif` in `expected.json`):
//!
//! - with `--tiff` (and `-o tiff`): `NAME.tif` is listed, looked up and read exactly for the
//!   datasets that get one, as a 0444 file in the sidecar inode range, with the library's
//!   size and bytes; its data part is h5py's `tobytes()`; the header says `II` or `MM` as the
//!   data is stored; the 4.4 GB never-written `/huge` is BigTIFF with no hook, its pages the
//!   fill value; a real link named like a sidecar shows the real object; without the option
//!   there is no `.tif`; under `--byte-order little` big-endian data makes `II` files of
//!   converted numbers;
//! - the never-written million-page stack `/many`: its last IFD (read first) ends the chain and
//!   points at the last page, the whole 131 MiB header region equals the library's, and the
//!   daemon's resident memory grows by less than 64 MiB serving it (the header is generated,
//!   never held);
//! - with the test hook `H5MOUNT_TIFF_BIGTIFF_ABOVE=0` every `.tif` is BigTIFF, with the
//!   library's bytes;
//! - reading page N's strip (found in IFD N, read through the mount) of the chunked, gzip
//!   stack `/stack/gz` decodes exactly the 4 chunks of page N (the mount's `cache_misses`,
//!   `user.h5mount.stats`), and reading every IFD decodes none;
//! - real clients (`tiff_check.py`, on both forms): tifffile (every page equal to h5py's
//!   plane), Pillow (opens, seeks pages), GDAL from Debian's python3-gdal (2-D files and the
//!   pages of 3-D ones).
//!
//! The Python part needs numpy, h5py, tifffile and Pillow: without them it says it skipped,
//! unless `H5MOUNT_REQUIRE_FIXTURES` is set (as `mount-tests/run` sets it once h5py is
//! there), when it fails. Without GDAL the script skips that part and says so.

mod harness;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use h5mount::model::{File, OpenOptions};
use h5mount::views::tiff::{self, Layout};
use h5mount::views::{ByteOrderMode, View, ViewKind, ViewOptions, ViewSet};
use harness::{sha256, Mount};
use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};
use serde_json::Value;

/// First sidecar inode (src/fs/views.rs).
const SIDECAR_BASE: u64 = 3 << 62;
/// The chunked stack and its geometry (make_tiff.py).
const STACK: &str = "/stack/gz";
const STACK_PAGES: u64 = 10;
/// Chunks (1, 32, 64) of pages (64, 128).
const CHUNKS_PER_PAGE: u64 = 4;

fn dir() -> PathBuf {
    harness::fixture("tiff")
}

fn fixture() -> PathBuf {
    dir().join("tiff.h5")
}

fn expected() -> BTreeMap<String, Value> {
    serde_json::from_value(harness::expected_json("tiff")).unwrap()
}

fn library() -> Arc<File> {
    File::open(&fixture(), &OpenOptions::default()).unwrap()
}

/// The library's `.tif` of dataset `path` with numbers in `order`, if it offers one.
fn library_tif(
    f: &Arc<File>,
    path: &str,
    bigtiff_above: u64,
    byte_order: ByteOrderMode,
) -> Option<View> {
    let d = f.resolve(path).and_then(|id| f.dataset(id)).unwrap();
    let opts = ViewOptions {
        text: true,
        byte_order,
        tiff: true,
        bigtiff_above: Some(bigtiff_above),
        ..Default::default()
    };
    let mut set = ViewSet::for_dataset(f, &d, &opts);
    let i = set
        .sidecars
        .iter()
        .position(|v| v.kind() == ViewKind::Tiff)?;
    Some(set.sidecars.swap_remove(i))
}

/// Python with what `tiff_check.py` imports; when it is missing, skip (or fail under
/// `H5MOUNT_REQUIRE_FIXTURES`).
fn python_ok() -> bool {
    harness::python_or_skip(
        harness::PYTHON,
        "import numpy, h5py, tifffile, PIL",
        "H5MOUNT_REQUIRE_FIXTURES",
    )
}

/// Run tiff_check.py on a mount in `form` ("classic" or "bigtiff"); panics on failure.
fn python_check(m: &Mount, form: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/tiff_check.py");
    let out = Command::new("python3")
        .arg("-W")
        .arg("ignore")
        .arg(script)
        .arg(m.path())
        .arg(fixture())
        .arg(form)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("tiff_check {form}: {}", text.trim());
    assert!(
        out.status.success(),
        "tiff_check {form}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Parts the script could not run here (GDAL absent): counted skips.
    let report: Value = serde_json::from_str(text.trim()).expect("tiff_check prints one JSON line");
    for part in report["skipped"].as_array().into_iter().flatten() {
        harness::skip(&format!(
            "tiff_check {form}: {}",
            part.as_str().unwrap_or("?")
        ));
    }
}

fn listing(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn read_at(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut buf, offset)
        .unwrap();
    buf
}

/// Bytes `from..to` of `path` (read through the mount in 1 MiB pieces) equal the library's
/// `view` there.
fn same_range(path: &Path, view: &View, from: u64, to: u64) -> bool {
    let file = fs::File::open(path).unwrap();
    let mut got = vec![0u8; 1 << 20];
    let mut want = vec![0u8; 1 << 20];
    let mut at = from;
    while at < to {
        let n = (to - at).min(1 << 20) as usize;
        file.read_exact_at(&mut got[..n], at).unwrap();
        assert_eq!(view.read_at(at, &mut want[..n]).unwrap(), n);
        if got[..n] != want[..n] {
            eprintln!("{}: differs in {at}..{}", path.display(), at + n as u64);
            return false;
        }
        at += n as u64;
    }
    true
}

/// Bytes of the image of the dataset described by expected.json's entry `e`.
fn data_len(e: &Value) -> u64 {
    let shape: Vec<u64> = serde_json::from_value(e["shape"].clone()).unwrap();
    let item: u64 = e["dtype"].as_str().unwrap()[2..].parse().unwrap();
    shape.iter().product::<u64>() * item
}

/// The TIFF magic of `head`: (big-endian, BigTIFF).
fn magic(head: &[u8]) -> (bool, bool) {
    let big = match &head[..2] {
        b"II" => false,
        b"MM" => true,
        m => panic!("byte order mark {m:?}"),
    };
    let v = if big { head[3] } else { head[2] };
    assert_eq!(head[2] as u16 + head[3] as u16, v as u16, "magic");
    match v {
        42 => (big, false),
        43 => (big, true),
        _ => panic!("magic {v}"),
    }
}

/// Check every dataset's `.tif` in a mount made with the TIFF view on, against the library
/// with `bigtiff_above`; returns the number of `.tif` files checked.
fn check_mount(m: &Mount, bigtiff_above: u64) -> usize {
    let f = library();
    let exp = expected();
    let mut checked = 0;
    for (p, e) in &exp {
        let name = format!("{p}.tif");
        let path = m.at(&name);
        let base = path.file_name().unwrap().to_string_lossy().into_owned();
        let names = listing(path.parent().unwrap());
        if exp.contains_key(&name) {
            let meta = fs::metadata(&path).unwrap();
            assert!(meta.ino() < SIDECAR_BASE, "{name}: real link shadowed");
            assert_eq!(names.iter().filter(|n| **n == base).count(), 1, "{name}");
            continue;
        }
        let view = library_tif(&f, p, bigtiff_above, ByteOrderMode::AsStored);
        if e["tif"] != true {
            assert!(view.is_none(), "{p}: library offers a .tif");
            assert!(!path.exists(), "{name} shown");
            assert!(!names.contains(&base), "{name} listed");
            continue;
        }
        let view = view.unwrap_or_else(|| panic!("{p}: library offers no .tif"));
        assert!(names.contains(&base), "{name} not listed");
        let meta = fs::metadata(&path).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert!(meta.is_file() && meta.ino() >= SIDECAR_BASE, "{name}");
        assert_eq!(meta.mode() & 0o777, 0o444, "{name}");
        let len = view.len().unwrap();
        assert_eq!(meta.len(), len, "{name}: size");
        let shape: Vec<u64> = serde_json::from_value(e["shape"].clone()).unwrap();
        let dtype = e["dtype"].as_str().unwrap();
        let item: u64 = dtype[2..].parse().unwrap();
        let header_len = len - data_len(e);
        let head = read_at(&path, 0, 16);
        let (big, bigtiff) = magic(&head);
        assert_eq!(big, dtype.starts_with('>') && item > 1, "{name}: {dtype}");
        if let Some(fill) = e["fill"].as_u64() {
            // Never written and large (/huge: 4.4 GB, so BigTIFF whatever the hook; /many: a
            // million pages): the header region and three pages compared.
            assert_eq!(bigtiff, bigtiff_above == 0 || len > 1 << 32, "{name}: form");
            assert!(same_range(&path, &view, 0, header_len), "{name}: header");
            let page = (shape[1] * shape[2] * item) as usize;
            let fill: Vec<u8> = (0..page as u64 / item)
                .flat_map(|_| fill.to_le_bytes()[..item as usize].to_vec())
                .collect();
            for k in [0, shape[0] / 2, shape[0] - 1] {
                let got = read_at(&path, header_len + k * page as u64, page);
                assert!(got == fill, "{name}: page {k}");
            }
            checked += 1;
            continue;
        }
        assert_eq!(bigtiff, bigtiff_above == 0, "{name}: form");
        let got = fs::read(&path).unwrap();
        assert!(got == view.read_all().unwrap(), "{name}: bytes differ");
        assert_eq!(
            sha256(&got[header_len as usize..]),
            e["sha256"].as_str().unwrap(),
            "{name}: data part is h5py's tobytes()"
        );
        assert_eq!(header_len % tiff::DATA_ALIGN, 0, "{name}");
        checked += 1;
    }
    checked
}

#[test]
fn tif_sidecars_through_the_mount() {
    let m = Mount::background(&fixture(), &["--tiff"]);
    let checked = check_mount(&m, tiff::CLASSIC_MAX);
    assert!(checked >= 40, "{checked} .tif checked");
    if python_ok() {
        python_check(&m, "classic");
    }
}

#[test]
fn tiff_option_and_default_off() {
    let m = Mount::background(&fixture(), &["-o", "ro,tiff"]);
    assert!(listing(&m.at("/d3")).contains(&"le_u2.tif".to_string()));
    assert!(fs::metadata(m.at("/stack/gz.tif")).unwrap().ino() >= SIDECAR_BASE);
    drop(m);
    let m = Mount::background(&fixture(), &["--npy"]);
    let names = listing(&m.at("/d2"));
    assert!(names.iter().any(|n| n.ends_with(".npy")));
    assert!(!names.iter().any(|n| n.ends_with(".tif")), "{names:?}");
    assert!(!m.at("/d2/u1.tif").exists());
}

#[test]
fn bigtiff_hook_through_the_mount() {
    let file = fixture();
    let m = Mount::by_command(|mp| {
        let mut c = Command::new(harness::BIN);
        c.arg(&file)
            .arg(mp)
            .arg("--tiff")
            .env(tiff::BIGTIFF_ENV, "0");
        c
    });
    let checked = check_mount(&m, 0);
    assert!(checked >= 40, "{checked} .tif checked");
    if python_ok() {
        python_check(&m, "bigtiff");
    }
}

#[test]
fn byte_order_option_turns_mm_files_into_ii() {
    let f = library();
    let m = Mount::background(&fixture(), &["--tiff", "--byte-order", "little"]);
    let mut swapped = 0;
    for (p, e) in expected() {
        if e["tif"] != true || e["fill"].is_u64() || p == "/clash/x" {
            continue;
        }
        let path = m.at(&format!("{p}.tif"));
        let got = fs::read(&path).unwrap();
        assert_eq!(magic(&got), (false, false), "{p}: II classic");
        let view = library_tif(&f, &p, tiff::CLASSIC_MAX, ByteOrderMode::Little).unwrap();
        assert!(got == view.read_all().unwrap(), "{p}: bytes differ");
        if e["dtype"].as_str().unwrap().starts_with('>') {
            // The data part holds the numbers little-endian: not the stored bytes.
            let sha = e["sha256"].as_str().unwrap();
            let data = &got[got.len() - data_len(&e) as usize..];
            assert_ne!(sha256(data), sha, "{p}: not converted");
            swapped += 1;
        }
    }
    assert!(swapped >= 15, "{swapped} big-endian datasets checked");
}

#[test]
fn million_page_stack_is_served_without_holding_its_header() {
    let f = library();
    let d = f.resolve("/many").and_then(|id| f.dataset(id)).unwrap();
    let layout = Layout::new(&d.info.dtype, &d.info.shape, tiff::CLASSIC_MAX).unwrap();
    assert_eq!(layout.pages(), 1_000_000);
    assert!(layout.header_len() > 130 << 20, "{}", layout.header_len());
    let m = Mount::background(&fixture(), &["--tiff"]);
    let path = m.at("/many.tif");
    let pid = m.pid().expect("daemon pid");
    assert_eq!(fs::metadata(&path).unwrap().len(), layout.len());
    let rss = || harness::status_kib(pid, "VmRSS").expect("VmRSS");
    let before = rss();
    // The last IFD first (no IFD before it is made to reach it), then the whole header.
    let last = layout.ifd_offset(999_999);
    let ifd = read_at(&path, last, 138);
    let value = |entry: usize| {
        let at = 2 + 12 * entry + 8;
        u64::from(u32::from_le_bytes(ifd[at..at + 4].try_into().unwrap()))
    };
    assert_eq!(value(5), layout.page_offset(999_999));
    assert_eq!(
        u32::from_le_bytes(ifd[134..].try_into().unwrap()),
        0,
        "last IFD"
    );
    assert_eq!(read_at(&path, value(5), 16), vec![3u8; 16]);
    let view = library_tif(&f, "/many", tiff::CLASSIC_MAX, ByteOrderMode::AsStored).unwrap();
    assert!(same_range(&path, &view, 0, layout.header_len()));
    let grew = rss().saturating_sub(before);
    eprintln!(
        "daemon RSS {before} KiB -> {} KiB after serving a {} MiB header",
        before + grew,
        layout.header_len() >> 20
    );
    assert!(
        grew < 64 << 10,
        "daemon grew by {grew} KiB serving a {} byte header",
        layout.header_len()
    );
}

/// The mount's statistics counter `key`.
fn stat(m: &Mount, key: &str) -> u64 {
    harness::stats(m)[key]
}

#[test]
fn reading_one_page_decodes_only_its_chunks() {
    let f = library();
    let d = f.resolve(STACK).and_then(|id| f.dataset(id)).unwrap();
    let layout = Layout::new(&d.info.dtype, &d.info.shape, tiff::CLASSIC_MAX).unwrap();
    assert_eq!(layout.pages(), STACK_PAGES);
    // Pages of whole memory pages, so the kernel asks for page N's bytes only.
    assert_eq!(layout.page_bytes() % 4096, 0);
    let m = Mount::background(&fixture(), &["--tiff"]);
    let path = m.at(&format!("{STACK}.tif"));
    let file = fs::File::open(&path).unwrap();
    posix_fadvise(&file, 0, 0, PosixFadviseAdvice::POSIX_FADV_RANDOM).unwrap();
    // Every IFD, read through the mount: no chunk decoded.
    let before = stat(&m, "cache_misses");
    let mut header = vec![0u8; layout.header_len() as usize];
    file.read_exact_at(&mut header, 0).unwrap();
    assert_eq!(
        stat(&m, "cache_misses"),
        before,
        "reading the IFDs decoded chunks"
    );
    for n in [3u64, 0, 9, 5] {
        // Page N's strip offset and size, as IFD N says (classic, little-endian: entry i of
        // an IFD at 2 + 12 i, its value at + 8; StripOffsets is entry 5, StripByteCounts 8).
        let ifd = layout.ifd_offset(n) as usize;
        let value = |entry: usize| {
            let at = ifd + 2 + 12 * entry + 8;
            u64::from(u32::from_le_bytes(header[at..at + 4].try_into().unwrap()))
        };
        assert_eq!(value(5), layout.page_offset(n), "StripOffsets of page {n}");
        assert_eq!(value(8), layout.page_bytes(), "StripByteCounts of page {n}");
        let before = stat(&m, "cache_misses");
        let mut page = vec![0u8; layout.page_bytes() as usize];
        file.read_exact_at(&mut page, value(5)).unwrap();
        let decoded = stat(&m, "cache_misses") - before;
        assert_eq!(
            decoded, CHUNKS_PER_PAGE,
            "page {n}: {decoded} chunks decoded, not the {CHUNKS_PER_PAGE} of page {n}"
        );
        let mut want = vec![0u8; page.len()];
        d.read_at(n * layout.page_bytes(), &mut want).unwrap();
        assert!(
            page == want,
            "page {n}: bytes differ from the dataset's plane"
        );
    }
}
