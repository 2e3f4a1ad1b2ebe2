//! Growing files through real mounts with `--refresh`.
//!
//! Python-free: the snapshots of `fixtures/grow/` (one file at several moments of an h5py SWMR
//! append, and of a plain append; see `make_grow.py`) are written over the mounted file in
//! place, and the mount must show the new sizes, bytes, datasets and groups after a refresh,
//! through `read`, a `pread` on a descriptor opened before, and `mmap`, while bytes read before
//! stay the same. Without `--refresh` nothing changes.
//!
//! With h5py: a live writer (`fixtures/grow/writer.py`) appends rows every 100 ms, in SWMR
//! mode or reopening the file for each append without SWMR, while readers check every byte
//! they get through the mount against the row functions of `fixtures/grow/rows.py` (repeated
//! below) and that sizes only grow; skipped, saying so, when h5py is not importable.

mod harness;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::{Mount, Rng};

/// The refresh period the tests mount with.
const REFRESH: &str = "1";
/// How long a refresh may take to show (a period, the re-read, and slack for a loaded box).
const REFRESH_WAIT: Duration = Duration::from_secs(10);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/fixtures/grow")
}

/// Bytes of one row of `/data/gz` (3 int32), `/data/plain` (1 float64) and `/data/wide`
/// (1024 uint16, live writer only).
const GZ_ROW: u64 = 12;
const PLAIN_ROW: u64 = 8;
const WIDE_ROW: u64 = 2048;

/// `gz[i, j] = i * 4 + j + 1` as little-endian int32: the bytes of rows `start..stop`.
fn gz_rows(start: u64, stop: u64) -> Vec<u8> {
    (start..stop)
        .flat_map(|i| (0..3).map(move |j| (i * 4 + j + 1) as i32))
        .flat_map(i32::to_le_bytes)
        .collect()
}

/// `plain[i] = i + 0.5` as little-endian float64.
fn plain_rows(start: u64, stop: u64) -> Vec<u8> {
    (start..stop)
        .flat_map(|i| (i as f64 + 0.5).to_le_bytes())
        .collect()
}

/// `wide[i, k] = (i * 31 + k) % 65536` as little-endian uint16.
fn wide_rows(start: u64, stop: u64) -> Vec<u8> {
    (start..stop)
        .flat_map(|i| (0..1024).map(move |k| ((i * 31 + k) % 65536) as u16))
        .flat_map(u16::to_le_bytes)
        .collect()
}

/// `fixed[k] = k * 3 - 7` as little-endian int16, 100 elements.
fn fixed_values() -> Vec<u8> {
    (0..100i16)
        .flat_map(|k| (k * 3 - 7).to_le_bytes())
        .collect()
}

/// The bytes of rows `start..stop` of a growing dataset.
type Rows = fn(u64, u64) -> Vec<u8>;

/// Row size and row function of the growing dataset `name`.
fn row_fn(name: &str) -> (u64, Rows) {
    match name {
        "gz" => (GZ_ROW, gz_rows),
        "plain" => (PLAIN_ROW, plain_rows),
        _ => (WIDE_ROW, wide_rows),
    }
}

/// The expected bytes of the growing dataset `name` at `offset` (whole elements).
fn expected(name: &str, offset: u64, len: u64) -> Vec<u8> {
    let (row, rows) = row_fn(name);
    let first = offset / row;
    let last = (offset + len).div_ceil(row);
    let all = rows(first, last);
    let skip = (offset - first * row) as usize;
    all[skip..skip + len as usize].to_vec()
}

/// Write `snapshot` over `path` in place (no truncation first), as a writer would.
fn overwrite(path: &Path, snapshot: &str) {
    let bytes = fs::read(fixtures().join(snapshot)).unwrap();
    let mut f = fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all(&bytes).unwrap();
    f.set_len(bytes.len() as u64).unwrap();
}

/// Wait until `p` has `len` bytes; the size seen last.
fn wait_len(p: &Path, len: u64) -> u64 {
    let start = Instant::now();
    loop {
        let now = fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        if now == len || start.elapsed() > REFRESH_WAIT {
            return now;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A read-only shared mapping of a file, unmapped on drop.
struct Mapping {
    addr: std::ptr::NonNull<std::ffi::c_void>,
    len: usize,
}

impl Mapping {
    fn new(p: &Path, len: usize) -> Mapping {
        use nix::sys::mman::{mmap, MapFlags, ProtFlags};
        let f = fs::File::open(p).unwrap();
        let nz = std::num::NonZeroUsize::new(len).unwrap();
        // SAFETY: a fresh read-only mapping; the mount is read-only, so nobody writes through
        // it, and `bytes` never hands out a slice that outlives `self`.
        let addr = unsafe { mmap(None, nz, ProtFlags::PROT_READ, MapFlags::MAP_SHARED, &f, 0) };
        Mapping {
            addr: addr.unwrap(),
            len,
        }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `addr` maps `len` readable bytes until drop; the borrow ties the slice to
        // `self`.
        unsafe { std::slice::from_raw_parts(self.addr.as_ptr().cast::<u8>(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no slice of it outlives `self`.
        let _ = unsafe { nix::sys::mman::munmap(self.addr, self.len) };
    }
}

/// Mount a copy of the first snapshot with `args` (which ask for a refresh), then write each
/// later snapshot over it and check the mount follows: `stages` is `(snapshot, rows)`.
fn follow_snapshots(args: &[&str], stages: &[(&str, u64)], new_names: &[(&str, &[&str])]) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("growing.h5");
    fs::copy(fixtures().join(stages[0].0), &file).unwrap();
    let m = Mount::background(&file, args);
    let gz = m.at("/data/gz");
    let plain = m.at("/data/plain");
    let rows0 = stages[0].1;
    assert_eq!(fs::read(&gz).unwrap(), gz_rows(0, rows0));
    assert_eq!(fs::read(&plain).unwrap(), plain_rows(0, rows0));
    assert_eq!(fs::read(m.at("/fixed")).unwrap(), fixed_values());
    // Held across every refresh: a descriptor and a mapping made on the first state.
    let held = fs::File::open(&gz).unwrap();
    let map = Mapping::new(&gz, (rows0 * GZ_ROW) as usize);
    assert_eq!(map.bytes(), gz_rows(0, rows0));
    let first_bytes = fs::read(&plain).unwrap();
    for &(snapshot, rows) in &stages[1..] {
        overwrite(&file, snapshot);
        let got = wait_len(&gz, rows * GZ_ROW);
        assert_eq!(
            got,
            rows * GZ_ROW,
            "{snapshot}: /data/gz size after refresh"
        );
        assert_eq!(wait_len(&plain, rows * PLAIN_ROW), rows * PLAIN_ROW);
        assert_eq!(fs::read(&gz).unwrap(), gz_rows(0, rows), "{snapshot}: read");
        let whole = fs::read(&plain).unwrap();
        assert_eq!(whole, plain_rows(0, rows), "{snapshot}: read");
        assert_eq!(
            &whole[..first_bytes.len()],
            first_bytes,
            "old bytes changed"
        );
        // pread on the descriptor opened on the first state, across the old end.
        let mut buf = vec![0u8; (rows * GZ_ROW) as usize];
        held.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(
            buf,
            gz_rows(0, rows),
            "{snapshot}: pread on an old descriptor"
        );
        let off = (rows0 * GZ_ROW).saturating_sub(5);
        let mut tail = vec![0u8; (rows * GZ_ROW - off) as usize];
        held.read_exact_at(&mut tail, off).unwrap();
        assert_eq!(tail, expected("gz", off, tail.len() as u64));
        // A new mapping sees the new size; the old one still its own bytes.
        let now = Mapping::new(&gz, (rows * GZ_ROW) as usize);
        assert_eq!(now.bytes(), gz_rows(0, rows), "{snapshot}: mmap");
        assert_eq!(map.bytes(), gz_rows(0, rows0), "{snapshot}: old mmap");
        assert_eq!(fs::read(m.at("/fixed")).unwrap(), fixed_values());
        // Datasets and groups created in this state show up.
        for (snap, extra) in new_names {
            if *snap == snapshot {
                for name in *extra {
                    assert!(
                        m.at(name).exists(),
                        "{snapshot}: {name} not shown ({:?})",
                        names(m.path())
                    );
                }
            }
        }
    }
}

#[test]
fn swmr_snapshots_are_followed() {
    follow_snapshots(
        &["--refresh", REFRESH],
        &[("swmr_a.h5", 20), ("swmr_b.h5", 45), ("swmr_c.h5", 60)],
        &[("swmr_c.h5", &["/data/new", "/extra", "/extra/note"])],
    );
}

#[test]
fn plain_append_snapshots_are_followed() {
    // The fstab spelling of the option.
    follow_snapshots(
        &["-o", "ro,refresh=1"],
        &[("plain_a.h5", 20), ("plain_b.h5", 45)],
        &[("plain_b.h5", &["/extra", "/extra/note"])],
    );
}

#[test]
fn new_objects_appear_in_listings_and_carry_their_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("growing.h5");
    fs::copy(fixtures().join("swmr_b.h5"), &file).unwrap();
    let m = Mount::background(&file, &["--refresh", REFRESH, "--npy"]);
    // Listed (and so cached by the kernel) before the change.
    assert_eq!(names(m.path()), ["data", "fixed", "fixed.npy"]);
    assert_eq!(
        names(&m.at("/data")),
        ["gz", "gz.npy", "plain", "plain.npy"]
    );
    assert_eq!(npy_data(&m.at("/data/gz.npy")), gz_rows(0, 45));
    overwrite(&file, "swmr_c.h5");
    let start = Instant::now();
    while !names(m.path()).contains(&"extra".to_string()) && start.elapsed() < REFRESH_WAIT {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(names(m.path()), ["data", "extra", "fixed", "fixed.npy"]);
    assert_eq!(
        names(&m.at("/data")),
        ["gz", "gz.npy", "new", "new.npy", "plain", "plain.npy"]
    );
    assert_eq!(names(&m.at("/extra")), ["note", "note.npy"]);
    // The sidecar of a grown dataset is rewritten: its header holds the new shape.
    assert_eq!(npy_data(&m.at("/data/gz.npy")), gz_rows(0, 60));
    assert_eq!(fs::read(m.at("/extra/note")).unwrap(), [7, 8, 9]);
    let new: Vec<u8> = (1..=10i64).flat_map(i64::to_le_bytes).collect();
    assert_eq!(fs::read(m.at("/data/new")).unwrap(), new);
}

/// The data of an NPY file (after its header), checking the header's shape has as many rows
/// as the data.
fn npy_data(p: &Path) -> Vec<u8> {
    let bytes = fs::read(p).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let (start, header) = match bytes[6] {
        1 => (10, u16::from_le_bytes([bytes[8], bytes[9]]) as usize),
        _ => (
            12,
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
        ),
    };
    let text = String::from_utf8_lossy(&bytes[start..start + header]).into_owned();
    let data = bytes[start + header..].to_vec();
    let rows = data.len() as u64 / GZ_ROW;
    assert!(text.contains(&format!("({rows}, 3)")), "{text}");
    data
}

#[test]
fn without_refresh_the_mount_keeps_its_first_state() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("growing.h5");
    fs::copy(fixtures().join("swmr_b.h5"), &file).unwrap();
    let m = Mount::background(&file, &[]);
    assert_eq!(fs::metadata(m.at("/data/gz")).unwrap().len(), 45 * GZ_ROW);
    overwrite(&file, "swmr_c.h5");
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(fs::metadata(m.at("/data/gz")).unwrap().len(), 45 * GZ_ROW);
    assert_eq!(names(m.path()), ["data", "fixed"]);
}

// ---------------------------------------------------------------- a live SWMR writer

fn h5py_available() -> bool {
    Command::new("python3")
        .args(["-c", "import h5py"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What one reader saw.
#[derive(Default, Debug)]
struct Seen {
    name: &'static str,
    reads: u64,
    /// Reads that failed (EIO).
    errors: u64,
    bytes: u64,
    sizes: Vec<u64>,
}

/// Read `name` (`gz`, `plain` or `wide`) through the mount until `stop`: whole-file reads,
/// preads at random offsets on a descriptor kept open and (with `mmap`) a mapping now and
/// then; every byte checked, sizes never shrink; failed reads are counted.
fn reader(
    m_path: PathBuf,
    name: &'static str,
    stop: Arc<AtomicBool>,
    seed: u64,
    mmap: bool,
) -> Seen {
    let row = row_fn(name).0;
    let p = m_path.join("data").join(name);
    let held = fs::File::open(&p).unwrap();
    let mut rng = Rng(seed);
    let mut seen = Seen {
        name,
        ..Seen::default()
    };
    let mut last = 0;
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        let size = fs::metadata(&p).unwrap().len();
        assert!(size >= last, "{name}: size went from {last} to {size}");
        assert_eq!(size % row, 0, "{name}: size {size} is not whole rows");
        if size != last {
            seen.sizes.push(size);
        }
        last = size;
        let mut whole = Vec::new();
        if fs::File::open(&p).unwrap().read_to_end(&mut whole).is_err() {
            seen.errors += 1;
            continue;
        }
        let n = whole.len() as u64;
        assert!(n >= size, "{name}: read {n} bytes, stat said {size}");
        assert_eq!(n % row, 0, "{name}: read {n} bytes, not whole rows");
        assert_eq!(whole, expected(name, 0, n), "{name}: bytes of {n}");
        seen.bytes += n;
        if size > 0 {
            let off = rng.below(size);
            let len = rng.below(size - off).max(1);
            let mut buf = vec![0u8; len as usize];
            let Ok(got) = held.read_at(&mut buf, off) else {
                seen.errors += 1;
                continue;
            };
            let got = got as u64;
            assert_eq!(got, len, "{name}: short pread inside the known size");
            assert_eq!(buf, expected(name, off, len), "{name}: pread {off}+{len}");
            seen.bytes += len;
        }
        // A mapping whose page fails to read is SIGBUS: only where no read may fail.
        if mmap && round % 8 == 0 && size > 0 {
            let map = Mapping::new(&p, size as usize);
            assert_eq!(
                map.bytes(),
                expected(name, 0, size),
                "{name}: mmap of {size}"
            );
            seen.bytes += size;
        }
        seen.reads += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    seen
}

/// Run `writer.py` in `mode` for 4 s, appending every 100 ms, with readers on the mount;
/// returns what they saw after checking the final state.
fn live_writer(mode: &str, mmap: bool) -> Vec<Seen> {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("live.h5");
    let mut writer = Command::new("python3")
        .arg(fixtures().join("writer.py"))
        .arg(&file)
        .args(["4", "0.1", mode])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(writer.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let m = Mount::background(&file, &["--refresh", REFRESH]);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = [("gz", 1), ("gz", 2), ("plain", 3), ("wide", 4), ("wide", 5)]
        .into_iter()
        .map(|(name, seed)| {
            let (p, stop) = (m.path().to_path_buf(), stop.clone());
            std::thread::spawn(move || reader(p, name, stop, seed, mmap))
        })
        .collect();
    line.clear();
    out.read_line(&mut line).unwrap();
    let rows: u64 = line
        .trim()
        .strip_prefix("done ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("writer said {line:?}"));
    assert!(writer.wait().unwrap().success());
    // One more refresh after the writer closed: the readers see the end too.
    let gz = m.at("/data/gz");
    assert_eq!(wait_len(&gz, rows * GZ_ROW), rows * GZ_ROW);
    stop.store(true, Ordering::Relaxed);
    let seen: Vec<Seen> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    for name in ["gz", "plain", "wide"] {
        let (row, f) = row_fn(name);
        let p = m.at(&format!("/data/{name}"));
        assert_eq!(wait_len(&p, rows * row), rows * row, "{name}");
        assert_eq!(fs::read(&p).unwrap(), f(0, rows), "{name}");
    }
    assert_eq!(fs::read(m.at("/fixed")).unwrap(), fixed_values());
    for s in &seen {
        eprintln!(
            "{mode}: reader of {}: {} rounds, {} failed, {} bytes checked, sizes seen {:?}",
            s.name, s.reads, s.errors, s.bytes, s.sizes
        );
        // The writer ran 4 s with a 1 s refresh: each reader must have seen it grow.
        assert!(s.sizes.len() >= 3, "too few sizes seen: {:?}", s.sizes);
    }
    seen
}

#[test]
fn live_swmr_writer_is_followed_byte_for_byte() {
    if !h5py_available() {
        eprintln!("live_swmr_writer_is_followed_byte_for_byte: skipped, h5py is not importable");
        return;
    }
    for s in live_writer("swmr", true) {
        assert_eq!(s.errors, 0, "reads of {} failed", s.name);
    }
}

#[test]
fn live_writers_without_swmr_are_followed_byte_for_byte() {
    if !h5py_available() {
        eprintln!("live_writers_without_swmr_are_followed_byte_for_byte: skipped, no h5py");
        return;
    }
    // A writer that rewrites structures in place can be caught mid-write by a refresh (kept:
    // the old view stays) or by a read (retried in the next view): reads may still fail now
    // and then, but never return wrong bytes (checked by the readers).
    for mode in ["reopen-latest", "reopen-earliest"] {
        let seen = live_writer(mode, false);
        let reads: u64 = seen.iter().map(|s| s.reads + s.errors).sum();
        let errors: u64 = seen.iter().map(|s| s.errors).sum();
        assert!(
            errors * 20 <= reads,
            "{mode}: {errors} of {reads} reads failed"
        );
    }
}
