//! Shared helpers of the h5mount fuzz targets.
//!
//! Inputs are read from memory (`io::Memory`, through `File::from_source` and
//! `Storage::from_source`): no scratch file is written per execution. The walkers below
//! visit what a mount would: every object reachable from the root (each header once, a
//! bounded number in all), its attributes and their rendering, and, for datasets, their
//! description and a few byte ranges of their image. Errors are expected and ignored; a panic,
//! a hang (libFuzzer `-timeout`) or a memory blow-up (`-rss_limit_mb`) is a finding.

use std::collections::HashSet;
use std::sync::Arc;

use h5mount::io::{Memory, Storage};
use h5mount::model::{File, LinkTarget, ObjectId, ObjectKind, OpenOptions};

/// Objects visited per input at most: fuzzed files can be made of thousands of tiny headers,
/// and the point is depth of parsing, not breadth.
const MAX_OBJECTS: usize = 2_000;
/// Bytes of one dataset read per range. 8 KiB still spans many chunks of a fuzzed file's tiny
/// chunks and crosses chunk edges; at 64 KiB, reads of files of 1-element chunks took most of
/// the time (read_datasets ran 590 inputs a second, now 1,200).
const READ_LEN: usize = 8 << 10;

/// The input as a byte source.
pub fn storage(data: &[u8]) -> Storage {
    Storage::from_source(Arc::new(Memory::new(data.to_vec(), "fuzz input")))
}

pub fn options() -> OpenOptions {
    OpenOptions {
        cache_bytes: 4 << 20,
        ..OpenOptions::default()
    }
}

/// Visit every reachable object once; `read` also reads a few ranges of every dataset.
pub fn walk(file: &Arc<File>, read: bool) {
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut todo: Vec<(String, ObjectId)> = vec![("/".to_string(), file.root())];
    while let Some((path, id)) = todo.pop() {
        if seen.len() >= MAX_OBJECTS || !seen.insert(id) {
            continue;
        }
        let _ = file.mtime(id);
        let _ = file.refcount(id);
        let _ = file.comment(id);
        if let Ok(attrs) = file.attributes(id) {
            for a in attrs {
                let _ = a.render();
            }
        }
        match file.kind(id) {
            Ok(ObjectKind::Group) => {
                let Ok(links) = file.links(id) else { continue };
                for l in links.iter() {
                    let child = if path == "/" {
                        format!("/{}", l.name)
                    } else {
                        format!("{path}/{}", l.name)
                    };
                    // Every listed name must be found again by name.
                    if let Ok(found) = file.lookup(id, &l.name) {
                        assert!(
                            found.is_some(),
                            "listed link {:?} not found by lookup",
                            l.name
                        );
                    }
                    match &l.target {
                        LinkTarget::Hard(c) => todo.push((child, *c)),
                        LinkTarget::Soft(_) => {
                            if let Ok(c) = file.resolve(&child) {
                                todo.push((child, c));
                            }
                        }
                        _ => {}
                    }
                }
            }
            Ok(ObjectKind::Dataset) => {
                let Ok(d) = file.dataset(id) else { continue };
                let _ = format!("{:?}", d.info);
                let _ = d.info.dtype.numpy_str();
                if read {
                    read_ranges(&d);
                }
            }
            _ => {}
        }
    }
}

/// Read the start, the middle and the end of a dataset's image (each at most `READ_LEN`), and
/// one read straddling the end.
pub fn read_ranges(d: &h5mount::model::Dataset) {
    let len = d.len();
    let mut buf = vec![0u8; READ_LEN];
    let starts = [
        0,
        len / 2,
        len.saturating_sub(READ_LEN as u64),
        len.saturating_sub(3),
    ];
    for s in starts {
        if let Ok(n) = d.read_at(s, &mut buf) {
            assert!(
                n <= buf.len(),
                "read_at reported more bytes than the buffer holds"
            );
            assert!(
                s >= len || n as u64 == (len - s).min(READ_LEN as u64),
                "short read at {s} of {len}: {n}"
            );
        }
    }
    // A range read in one call and in two must agree (offset arithmetic across chunk edges).
    let s = len / 3;
    let n = (len - s).min(READ_LEN as u64) as usize;
    let mut whole = vec![0u8; n];
    let mut parts = vec![0u8; n];
    let half = n / 2;
    let r1 = d.read_at(s, &mut whole);
    let r2 = d.read_at(s, &mut parts[..half]);
    let r3 = d.read_at(s + half as u64, &mut parts[half..]);
    if let (Ok(a), Ok(b), Ok(c)) = (r1, r2, r3) {
        assert_eq!((a, b + c), (n, n), "range sizes at {s}+{n} of {len}");
        assert!(
            whole == parts,
            "bytes at {s}+{n} differ when read in two calls"
        );
    }
    // A shared answer (a run of a cached chunk) must hold the bytes a copying read gives.
    for (s, n) in [(s, n as u64), (s, 4096), (0, 16), (len.saturating_sub(7), 7)] {
        if let Ok(Some((chunk, at))) = d.read_shared(h5mount::io::ReadCtx::default(), s, n) {
            let run = chunk.get(at..at + n as usize).expect("shared run inside its chunk");
            let mut copy = vec![0u8; n as usize];
            if let Ok(got) = d.read_at(s, &mut copy) {
                assert!(got == copy.len() && run == &copy[..], "shared bytes at {s}+{n} differ");
            }
        }
    }
    let _ = d.read_shared(h5mount::io::ReadCtx::default(), len, 1);
    let _ = d.read_shared(h5mount::io::ReadCtx::default(), u64::MAX - 1, 16);
    let _ = d.read_at(len, &mut buf[..1]);
    let _ = d.read_at(u64::MAX - 1, &mut buf[..16]);
}

/// Open the input as an HDF5 file and check that errors name something (non-empty Display).
pub fn open(data: &[u8]) -> Option<Arc<File>> {
    let source = Arc::new(Memory::new(data.to_vec(), "fuzz input"));
    match File::from_source(source, &options()) {
        Ok(f) => Some(f),
        Err(e) => {
            assert!(!e.to_string().is_empty(), "empty error text");
            None
        }
    }
}

/// Little-endian reader over the fuzz input for targets that build their parameters from it.
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        (self.u32() as u64) | ((self.u32() as u64) << 32)
    }
    pub fn rest(&self) -> &[u8] {
        self.0
    }
}
