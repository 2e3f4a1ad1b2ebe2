//! Growing files through real mounts with `--refresh`.
//!
//! Python-free: the snapshots of `fixtures/grow/` (one file at several moments of an h5py SWMR
//! append, and of a plain append; see `make_grow.py`) are written over the mounted file in
//! place, and the mount must show the new sizes, bytes, datasets and groups after a refresh,
//! through `read`, a `pread` on a descriptor opened before, and `mmap`, while bytes read before
//! stay the same. Without `--refresh` nothing changes (while a mount of the same file with
//! `--refresh` shows the change).
//!
//! With h5py: a live writer ([`STEP_WRITER`], appending the rows of `fixtures/grow/rows.py`)
//! grows the file step by step, in SWMR mode or reopening the file for each append without
//! SWMR, while readers keep reading through the mount and check every byte they get against
//! the row functions of `rows.py` (repeated below) and that sizes only grow. The test drives
//! the steps: after each one it waits until every reader has checked the new size, so each
//! reader sees every size, however the machine schedules them. Skipped (a counted skip) when
//! h5py is not importable, a failure then under `H5MOUNT_REQUIRE_PYTHON`.

mod harness;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::{Mount, Rng};

/// The refresh period the tests mount with.
const REFRESH: &str = "1";
/// The refresh period of the live-writer tests: short, as each of their steps waits for it.
const LIVE_REFRESH: &str = "0.25";
/// How long a refresh may take to show: a bound on waiting for it, generous for a loaded box
/// (a period, the re-read, and the readers' rounds).
const REFRESH_WAIT: Duration = Duration::from_secs(30);

fn fixtures() -> PathBuf {
    harness::fixture("grow")
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

/// Wait until `cond` holds, at most [`REFRESH_WAIT`]; whether it does.
fn wait_until(mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > REFRESH_WAIT {
            return cond();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
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

/// A read-only shared mapping of the first `len` bytes of the file at `p`.
fn mapping(p: &Path, len: usize) -> harness::Mapping {
    harness::Mapping::of(p, len, true).unwrap_or_else(|e| panic!("mmap {}: {e}", p.display()))
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
    let map = mapping(&gz, (rows0 * GZ_ROW) as usize);
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
        let now = mapping(&gz, (rows * GZ_ROW) as usize);
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
    // The same file mounted with refresh: its refresh marks the moment one was due.
    let control = Mount::background(&file, &["--refresh", REFRESH]);
    for mount in [&m, &control] {
        assert_eq!(
            fs::metadata(mount.at("/data/gz")).unwrap().len(),
            45 * GZ_ROW
        );
        assert_eq!(names(mount.path()), ["data", "fixed"]);
    }
    overwrite(&file, "swmr_c.h5");
    assert!(
        wait_until(|| harness::stats(&control)["refreshes"] >= 1),
        "the control mount did not refresh"
    );
    let gz = control.at("/data/gz");
    assert_eq!(wait_len(&gz, 60 * GZ_ROW), 60 * GZ_ROW, "the control mount");
    assert_eq!(fs::metadata(m.at("/data/gz")).unwrap().len(), 45 * GZ_ROW);
    assert_eq!(names(m.path()), ["data", "fixed"]);
    assert_eq!(harness::stats(&m)["refreshes"], 0);
}

// ---------------------------------------------------------------- a live SWMR writer

/// Whether python3 can import h5py (for the live writers); otherwise the test skips, or
/// fails under `H5MOUNT_REQUIRE_PYTHON`.
fn h5py_available() -> bool {
    harness::python_or_skip(harness::PYTHON, "import h5py", "H5MOUNT_REQUIRE_PYTHON")
}

/// A writer driven one step at a time (python3 and h5py), run as
/// `python3 -c STEP_WRITER FIXTURES PATH MODE START`: creates PATH with the datasets of
/// `rows.py` (`wide` included), appends START rows and prints `ready START`; then for each
/// line `N` on its input grows the datasets to N rows and prints `grown N` once they are
/// written; at the end of its input prints `done N` and exits. MODE:
/// * `swmr`: `libver='latest'`, one open in SWMR mode, a flush after each append;
/// * `reopen-latest`: no SWMR, each append opens the file (`'a'`), appends and closes it;
/// * `reopen-earliest`: the same with `libver='earliest'` (v1 B-trees, symbol tables).
const STEP_WRITER: &str = r#"
import sys
import h5py
fixtures, path, mode = sys.argv[1:4]
sys.path.insert(0, fixtures)
import rows
n = int(sys.argv[4])
if mode == "swmr":
    f = h5py.File(path, "w", libver="latest")
    rows.create(f)
    rows.create_wide(f)
    f.swmr_mode = True
    rows.append(f, n)
    f.flush()
else:
    libver = mode.removeprefix("reopen-")
    with h5py.File(path, "w", libver=libver) as g:
        rows.create(g)
        rows.create_wide(g)
        rows.append(g, n)
    f = None
print("ready", n, flush=True)
for line in sys.stdin:
    n = int(line)
    if f is not None:
        rows.append(f, n)
        f.flush()
    else:
        with h5py.File(path, "a", libver=libver) as g:
            rows.append(g, n)
    print("grown", n, flush=True)
if f is not None:
    f.close()
print("done", n, flush=True)
"#;

/// Rows the live writer starts with.
const LIVE_START: u64 = 5;
/// The row counts the live writer grows to, one step at a time: steps of 1 to 7 rows (so
/// appends cross the chunk edges of 4, 8 and 16 rows at different points), then larger ones
/// (several chunks per append; the chunk indexes grow past their first blocks).
const LIVE_STEPS: [u64; 11] = [7, 10, 14, 19, 25, 32, 33, 42, 59, 92, 157];

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
/// then; every byte checked, sizes never shrink; failed reads are counted. After each round
/// whose reads all succeeded and were checked, `checked` is set to the size it started from.
fn reader(
    m_path: PathBuf,
    name: &'static str,
    stop: Arc<AtomicBool>,
    checked: Arc<AtomicU64>,
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
        if mmap && round.is_multiple_of(8) && size > 0 {
            let map = mapping(&p, size as usize);
            assert_eq!(
                map.bytes(),
                expected(name, 0, size),
                "{name}: mmap of {size}"
            );
            seen.bytes += size;
        }
        seen.reads += 1;
        checked.store(size, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
    }
    seen
}

/// A reader thread and the size it last checked.
struct Reader {
    name: &'static str,
    checked: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<Seen>>,
}

/// Wait until every reader has checked the datasets at `rows` rows: a round of reads that all
/// succeeded and matched, started at that size. Fails after [`REFRESH_WAIT`], or at once,
/// with its message, if a reader failed.
fn wait_checked(readers: &mut [Reader], rows: u64) {
    let start = Instant::now();
    loop {
        let behind: Vec<(&str, u64)> = readers
            .iter()
            .map(|r| (r.name, r.checked.load(Ordering::SeqCst) / row_fn(r.name).0))
            .filter(|&(_, at)| at != rows)
            .collect();
        if behind.is_empty() {
            return;
        }
        for r in readers.iter_mut() {
            if r.thread.as_ref().is_some_and(|t| t.is_finished()) {
                if let Err(panic) = r.thread.take().unwrap().join() {
                    std::panic::resume_unwind(panic);
                }
                panic!("the reader of {} stopped", r.name);
            }
        }
        assert!(
            start.elapsed() < REFRESH_WAIT,
            "grown to {rows} rows {:?} ago; readers (dataset, rows checked) still behind: \
             {behind:?}",
            start.elapsed()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The next line of the writer's output, which must be `want`.
fn expect_line(out: &mut impl BufRead, want: &str) {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim_end(), want, "the writer said {line:?}");
}

/// Run [`STEP_WRITER`] in `mode` through [`LIVE_STEPS`] with readers on the mount: after
/// each step, wait until every reader has checked the new size. Returns what they saw, after
/// checking the final state and that each reader saw every size, in order.
fn live_writer(mode: &str, mmap: bool) -> Vec<Seen> {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("live.h5");
    let mut writer = Command::new("python3")
        .arg("-c")
        .arg(STEP_WRITER)
        .arg(fixtures())
        .arg(&file)
        .arg(mode)
        .arg(LIVE_START.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut steps = writer.stdin.take().unwrap();
    let mut out = BufReader::new(writer.stdout.take().unwrap());
    expect_line(&mut out, &format!("ready {LIVE_START}"));
    let m = Mount::background(&file, &["--refresh", LIVE_REFRESH]);
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers: Vec<Reader> = [("gz", 1), ("gz", 2), ("plain", 3), ("wide", 4), ("wide", 5)]
        .into_iter()
        .map(|(name, seed)| {
            let (p, stop) = (m.path().to_path_buf(), stop.clone());
            let checked = Arc::new(AtomicU64::new(0));
            let c = checked.clone();
            Reader {
                name,
                checked,
                thread: Some(std::thread::spawn(move || {
                    reader(p, name, stop, c, seed, mmap)
                })),
            }
        })
        .collect();
    wait_checked(&mut readers, LIVE_START);
    for rows in LIVE_STEPS {
        writeln!(steps, "{rows}").unwrap();
        steps.flush().unwrap();
        expect_line(&mut out, &format!("grown {rows}"));
        wait_checked(&mut readers, rows);
    }
    drop(steps);
    let rows = LIVE_STEPS[LIVE_STEPS.len() - 1];
    expect_line(&mut out, &format!("done {rows}"));
    assert!(writer.wait().unwrap().success());
    // The file as the writer left it, closed, reads whole.
    stop.store(true, Ordering::Relaxed);
    let seen: Vec<Seen> = readers
        .into_iter()
        .map(|r| r.thread.unwrap().join().unwrap())
        .collect();
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
        // Each step waited for every reader: each saw every size, in order.
        let row = row_fn(s.name).0;
        let want: Vec<u64> = std::iter::once(LIVE_START)
            .chain(LIVE_STEPS)
            .map(|r| r * row)
            .collect();
        assert_eq!(
            s.sizes, want,
            "{mode}: sizes seen by a reader of {}",
            s.name
        );
    }
    seen
}

#[test]
fn live_swmr_writer_is_followed_byte_for_byte() {
    if !h5py_available() {
        return;
    }
    for s in live_writer("swmr", true) {
        assert_eq!(s.errors, 0, "reads of {} failed", s.name);
    }
}

#[test]
fn live_writers_without_swmr_are_followed_byte_for_byte() {
    if !h5py_available() {
        return;
    }
    // A writer that rewrites structures in place can be caught mid-write by a refresh (kept:
    // the old view stays) or by a read (retried in the next view): reads made while it
    // writes may fail, but never return wrong bytes (checked by the readers), and once it
    // has closed the file every reader gets through a round of reads of the new size with
    // none failing (waited for after each step).
    for mode in ["reopen-latest", "reopen-earliest"] {
        let seen = live_writer(mode, false);
        let errors: u64 = seen.iter().map(|s| s.errors).sum();
        eprintln!("{mode}: {errors} reads failed while the writer wrote");
    }
}
