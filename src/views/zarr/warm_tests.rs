//! [`super::warm::warm_tree`] over a source that behaves as a remote one: it fetches the
//! pages a hint names, and a read of any other is a miss (a request of its own).

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::warm::warm_tree;
use crate::io::{ByteSource, DataHint, Memory, ReadCtx, RemoteSource, RequestCounts};
use crate::model::{File, OpenOptions};
use crate::sync::lock;

/// A file's bytes, each either fetched (its page named in a hint, or read once) or not.
#[derive(Debug)]
struct Fetching {
    bytes: Memory,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    fetched: Vec<bool>,
    /// Reads that needed a byte not fetched: (offset, length).
    misses: Vec<(u64, u64)>,
    /// Hints that named a byte not fetched.
    hints: usize,
}

impl Fetching {
    fn new(path: &Path) -> Arc<Fetching> {
        let bytes = std::fs::read(path).unwrap();
        let n = bytes.len();
        Arc::new(Fetching {
            bytes: Memory::new(bytes, &path.display().to_string()),
            state: Mutex::new(State {
                fetched: vec![false; n],
                ..State::default()
            }),
        })
    }

    /// The misses and hints since the last call.
    fn take(&self) -> (Vec<(u64, u64)>, usize) {
        let mut st = lock(&self.state);
        (
            std::mem::take(&mut st.misses),
            std::mem::take(&mut st.hints),
        )
    }
}

/// What is fetched at once: pages of 4 KiB (a quarter of a remote source's, so that more
/// of the files here lies apart).
const PAGE: u64 = 4096;

/// The bytes of the pages `offset..offset + len` touches, within a file of `n` bytes.
fn span(offset: u64, len: u64, n: usize) -> std::ops::Range<usize> {
    let start = ((offset / PAGE * PAGE) as usize).min(n);
    let end = offset
        .saturating_add(len)
        .div_ceil(PAGE)
        .saturating_mul(PAGE);
    start..(end as usize).min(n).max(start)
}

impl ByteSource for Fetching {
    fn len(&self) -> u64 {
        self.bytes.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut st = lock(&self.state);
        let r = span(offset, buf.len() as u64, st.fetched.len());
        if st.fetched[r.clone()].iter().any(|f| !f) {
            st.misses.push((offset, buf.len() as u64));
            st.fetched[r].fill(true);
        }
        self.bytes.read_at(offset, buf)
    }
    fn identity(&self) -> String {
        self.bytes.identity()
    }
    fn name(&self) -> String {
        self.bytes.name()
    }
    fn remote(&self) -> Option<&dyn RemoteSource> {
        Some(self)
    }
}

impl RemoteSource for Fetching {
    fn read_data_at(
        &self,
        o: u64,
        b: &mut [u8],
        _: &DataHint,
        _: ReadCtx,
    ) -> std::io::Result<usize> {
        self.read_at(o, b)
    }
    fn note_data(&self, _: u64, _: u64, _: &DataHint, _: ReadCtx) {}
    fn prefetch(&self, ranges: &[(u64, u64)]) {
        let mut st = lock(&self.state);
        let n = st.fetched.len();
        let mut new = false;
        for &(o, len) in ranges {
            let r = span(o, len, n);
            new |= st.fetched[r.clone()].iter().any(|f| !f);
            st.fetched[r].fill(true);
        }
        st.hints += usize::from(new);
    }
    fn cached(&self, offset: u64, len: u64) -> bool {
        let st = lock(&self.state);
        let r = span(offset, len, st.fetched.len());
        st.fetched[r].iter().all(|&f| f)
    }
    fn page_size_hint(&self, _: u64) {}
    fn warm_up(&self) {}
    fn current_identity(&self) -> std::io::Result<String> {
        Ok(self.identity())
    }
    fn requests(&self) -> RequestCounts {
        RequestCounts::default()
    }
}

/// Once a file is open, the tree's fetch reads nothing it did not name in a hint first:
/// headers ending in continuation chunks, chained ones too (attributes added after the
/// objects were made), old-style and new-style groups (netCDF-4's among them), chunk
/// indexes of every kind.
#[test]
fn the_tree_is_fetched_from_hints_alone() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("mount-tests/fixtures");
    for name in [
        "data/attrs_earliest.h5",
        "data/attrs_latest.h5",
        "data/groups_earliest.h5",
        "data/groups_latest.h5",
        "data/chunked_many_earliest.h5",
        "data/chunked_many_latest.h5",
        "data/chunked_fixed_v114.h5",
        "data/chunked_ext1_latest.h5",
        "data/chunked_ext2_latest.h5",
        "zarr/netcdf4.h5",
        "zarr/zarr_earliest.h5",
    ] {
        let src = Fetching::new(&root.join(name));
        let file = File::from_source(src.clone(), &OpenOptions::default()).unwrap();
        src.take();
        warm_tree(&file, file.root());
        let (misses, hints) = src.take();
        assert!(misses.is_empty(), "{name}: read without a hint: {misses:?}");
        assert!(hints > 0, "{name}");
    }
}
