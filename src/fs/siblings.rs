//! Readahead by listing order: a reader that opens the datasets of a group one after
//! another in the order `ls` lists them (`cat g/*`, a loop over sorted names) has the next
//! ones fetched (from a remote source) and decoded before it opens them.
//!
//! Mechanism. Every open of a dataset is placed by its position in the listing: its group
//! and its index among the group's links (names in byte order, as listings are), and the
//! group's index among its own group's links; an open only looks these up in listings
//! already read, which the kernel's lookup of the path has just needed. When the
//! dataset opened is the one right after the dataset opened before it (the next link of
//! the same group, or the first link of the group right after the previous one's group in
//! their common parent), and that one was closed meanwhile (a `cat` or a shell loop closes
//! each file before it opens the next; readers that keep theirs open at the same time are
//! several, in listing order only by chance), the reader is walking the listing:
//! - on a remote source, the stored bytes of the datasets after it are named to the source
//!   ([`crate::model::Dataset::hint`]), a window of their image bytes ahead of the reader
//!   that doubles with each step of the walk from [`MIN_WINDOW`] up to [`MAX_WINDOW`];
//! - on any source, the first [`DECODE_AHEAD`] image bytes (at most the prefetch budget, a
//!   quarter of the chunk cache) of the datasets after it that can be decoded ahead are
//!   decoded into the chunk cache by the prefetch workers ([`Workers::decode_ahead`]:
//!   chunked datasets with filters, and on a remote source without too). Without it, a
//!   `cat` of small datasets has each decoded when it asks for it, and the workers idle
//!   while it writes that dataset out and opens the next.
//!
//! Virtual datasets are passed over (opening one may open its sources).
//!
//! Any other open ends the walk. One dataset opened alone, or datasets opened in any other
//! order, fetch and decode nothing ahead.
//!
//! The naming runs on a thread of its own: finding the chunks of a dataset not read yet
//! costs reads of its header and chunk index, round trips on a remote source. It looks the
//! datasets of one window up at once, each on a scoped thread, so a window costs about one
//! round trip for the indexes and one for the data, whatever its number of datasets. The
//! requests it asks for are bounded like any prefetch: by the source's data budget. The
//! decodes are queued after the naming, behind the readers' own prefetch work, and hold
//! their memory in the chunk cache like any prefetch. A walk remembers how far it has named
//! and decoded each dataset of its file, and a later step only takes them further (a
//! dataset at the end of a window is taken in part first); a new walk starts afresh (what
//! is still cached costs no request and no decode), since an earlier walk's pages and
//! chunks may have been evicted since.
//!
//! Unlike readahead in file order, this follows where the reader goes: at the end of a
//! listing, nothing past its last dataset is fetched, and datasets stored out of order (the
//! data of one written after another's) are fetched all the same.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Weak};

use super::prefetch::Workers;
use crate::model::{Dataset, File, LinkTarget, ObjectId, ObjectKind};

/// First window of image bytes named ahead of a walk.
pub const MIN_WINDOW: u64 = 16 << 20;
/// Largest window.
pub const MAX_WINDOW: u64 = 32 << 20;
/// Most datasets named in one step.
const MAX_STEP: usize = 32;
/// Image bytes of the datasets right after the reader's that are decoded ahead of it: a
/// few small datasets, enough to keep the workers busy while the reader takes one (on the
/// remote bench's `cat` of 100 deflated datasets of 1 MiB, 4 to 32 MiB did equally well).
pub const DECODE_AHEAD: u64 = 4 << 20;
/// Most datasets remembered as named (the set is cleared past it).
const MAX_NAMED: usize = 4096;

/// Where a dataset is in the listing: its group, its index among the group's links (of
/// `count`), and the group's own group with the group's index among that one's links (if
/// known).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub group: ObjectId,
    pub index: usize,
    pub count: usize,
    pub parent: Option<(ObjectId, usize)>,
}

/// A step of a walk: name the datasets after `from` in `file`, `window` image bytes of them.
struct Step {
    file: Arc<File>,
    from: Place,
    window: u64,
    /// The first step of a walk: what earlier walks named may have been evicted since (a
    /// second `cat g/*` long after the first), so it is named again.
    fresh: bool,
}

#[derive(Debug, Default)]
struct Walk {
    /// The dataset opened last, and its file (the places of two files are not compared;
    /// held weakly, so that its address is not another file's while this is kept).
    last: Option<(Weak<File>, Place)>,
    /// The handle of that open, and whether it is still open (not closed yet).
    last_fh: u64,
    last_open: bool,
    /// The window of the walk going on (0: none).
    window: u64,
}

/// Steps sent to the naming thread, and steps it has handled (or dropped for a later one).
#[derive(Debug, Default)]
struct Counts {
    sent: AtomicU64,
    done: AtomicU64,
}

/// Readahead by listing order (see the module docs).
#[derive(Debug)]
pub struct Siblings {
    walk: Mutex<Walk>,
    tx: Mutex<Option<mpsc::Sender<Step>>>,
    /// The prefetch workers that decode the datasets right after the reader's.
    decoder: Option<Arc<Workers>>,
    counts: Arc<Counts>,
}

impl Default for Siblings {
    fn default() -> Self {
        Siblings::new()
    }
}

impl Siblings {
    /// Its naming thread is started on the first walk. Nothing is decoded ahead.
    pub fn new() -> Siblings {
        Siblings {
            walk: Mutex::new(Walk::default()),
            tx: Mutex::new(None),
            decoder: None,
            counts: Arc::default(),
        }
    }

    /// As [`Siblings::new`], the datasets right after the reader's decoded ahead by `workers`.
    pub fn with_decoder(workers: Arc<Workers>) -> Siblings {
        Siblings {
            decoder: Some(workers),
            ..Siblings::new()
        }
    }

    /// Steps of walks so far: sent to the naming thread, and handled by it (or dropped for
    /// a later step). Equal when it is idle.
    pub fn steps(&self) -> (u64, u64) {
        let c = &self.counts;
        (
            c.sent.load(Ordering::Acquire),
            c.done.load(Ordering::Acquire),
        )
    }

    /// A dataset at `place` of `file` was opened, as handle `fh`.
    pub fn on_open(&self, file: &Arc<File>, place: Place, fh: u64) {
        let (window, fresh) = {
            let mut w = crate::sync::lock(&self.walk);
            // A walker closes each dataset before it opens the next; readers that hold
            // theirs open meanwhile are several, whose opens fall in listing order only by
            // chance.
            let walking = !w.last_open
                && w.last.as_ref().is_some_and(|(f, last)| {
                    std::ptr::eq(f.as_ptr(), Arc::as_ptr(file)) && follows(*last, place)
                });
            w.last = Some((Arc::downgrade(file), place));
            w.last_fh = fh;
            w.last_open = true;
            let fresh = walking && w.window == 0;
            w.window = match (walking, w.window) {
                (false, _) => 0,
                (true, 0) => MIN_WINDOW,
                (true, n) => n.saturating_mul(2).min(MAX_WINDOW),
            };
            (w.window, fresh)
        };
        if window > 0 {
            self.send(Step {
                file: file.clone(),
                from: place,
                window,
                fresh,
            });
        }
    }

    /// Handle `fh` was closed.
    pub fn on_close(&self, fh: u64) {
        let mut w = crate::sync::lock(&self.walk);
        if w.last_open && w.last_fh == fh {
            w.last_open = false;
        }
    }

    fn send(&self, step: Step) {
        let mut tx = crate::sync::lock(&self.tx);
        if tx.is_none() {
            let (t, rx) = mpsc::channel::<Step>();
            let decoder = self.decoder.clone();
            let counts = self.counts.clone();
            let started = std::thread::Builder::new()
                .name("h5-siblings".into())
                .spawn(move || namer(rx, decoder, counts));
            if started.is_err() {
                return;
            }
            *tx = Some(t);
        }
        if let Some(t) = tx.as_ref() {
            if t.send(step).is_ok() {
                self.counts.sent.fetch_add(1, Ordering::AcqRel);
            }
        }
    }
}

/// Whether the dataset at `b` is the one right after the dataset at `a` in the listing: the
/// next link of its group, or the first link of the group right after `a`'s group.
fn follows(a: Place, b: Place) -> bool {
    if a.group == b.group {
        return b.index == a.index + 1;
    }
    b.index == 0
        && a.index + 1 == a.count
        && a.parent.is_some_and(|(p, i)| b.parent == Some((p, i + 1)))
}

/// The datasets after `from` in the listing (on into the groups after its group in their
/// parent), up to `window` image bytes of them and [`MAX_STEP`] of them (the last may be
/// named only in part: see [`namer`]).
fn ahead(file: &File, from: Place, window: u64) -> Vec<Arc<Dataset>> {
    let mut out = Vec::new();
    let mut bytes = 0u64;
    // The rest of `from.group`, then the groups after it in its parent, one by one as the
    // window needs them (a parent of many groups costs only those).
    if !take(
        file,
        from.group,
        from.index + 1,
        window,
        &mut bytes,
        &mut out,
    ) {
        return out;
    }
    let Some((parent, at)) = from.parent else {
        return out;
    };
    let Ok(links) = file.links(parent) else {
        return out;
    };
    for l in links.iter().skip(at.saturating_add(1)) {
        let LinkTarget::Hard(id) = l.target else {
            continue;
        };
        if file.kind(id).is_ok_and(|k| k == ObjectKind::Group)
            && !take(file, id, 0, window, &mut bytes, &mut out)
        {
            break;
        }
    }
    out
}

/// Add the datasets of `group` from its link `start` on to `out` while `bytes` (their
/// image bytes so far) is under `window` and `out` under [`MAX_STEP`]; false once full.
/// Virtual datasets are passed over: nothing of theirs is fetched or decoded ahead, and
/// opening one may open its source files.
fn take(
    file: &File,
    group: ObjectId,
    start: usize,
    window: u64,
    bytes: &mut u64,
    out: &mut Vec<Arc<Dataset>>,
) -> bool {
    let Ok(links) = file.links(group) else {
        return true;
    };
    // The headers of the links a window may take together, not one round trip per dataset.
    file.prefetch_headers_from(&links, start, MAX_STEP);
    for l in links.iter().skip(start) {
        if *bytes >= window || out.len() >= MAX_STEP {
            return false;
        }
        let LinkTarget::Hard(id) = l.target else {
            continue;
        };
        if !file.kind(id).is_ok_and(|k| k == ObjectKind::Dataset)
            || file.is_virtual_dataset(id).unwrap_or(true)
        {
            continue;
        }
        if let Ok(ds) = file.dataset(id) {
            *bytes = bytes.saturating_add(ds.len());
            out.push(ds);
        }
    }
    *bytes < window && out.len() < MAX_STEP
}

/// The naming thread: each step names the datasets of its window not named yet, looking
/// them up at once. A step that waited behind another is dropped for a later one.
fn namer(rx: mpsc::Receiver<Step>, decoder: Option<Arc<Workers>>, counts: Arc<Counts>) {
    let mut named = Named::default();
    while let Ok(mut step) = rx.recv() {
        let mut taken = 1;
        while let Ok(newer) = rx.try_recv() {
            let fresh = step.fresh || newer.fresh;
            step = newer;
            step.fresh = fresh;
            taken += 1;
        }
        // A panic on a damaged file ends that step, not the thread.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            name(&step, &mut named, decoder.as_deref())
        }));
        counts.done.fetch_add(taken, Ordering::AcqRel);
    }
}

/// How far a walk has named the datasets of one file to the source, and had them decoded
/// ahead: image bytes from the start of each, by id. A dataset at the end of a window is
/// named (or decoded) only in part; a later step takes it further.
#[derive(Debug, Default)]
struct Named {
    /// The file (held weakly: its address is not another file's while this is kept).
    file: Weak<File>,
    named: HashMap<ObjectId, u64>,
    decoded: HashMap<ObjectId, u64>,
}

/// One step of [`namer`]; the number of datasets it named. With a `decoder`, the first
/// [`DECODE_AHEAD`] bytes of the window (of datasets that can be decoded ahead, at most a
/// quarter of the chunk cache) are then decoded ahead: the reader finds the next datasets'
/// chunks decoded, by the workers while it was still reading its own.
fn name(step: &Step, named: &mut Named, decoder: Option<&Workers>) -> usize {
    let file = &step.file;
    if step.fresh
        || !std::ptr::eq(named.file.as_ptr(), Arc::as_ptr(file))
        || named.named.len() > MAX_NAMED
        || named.decoded.len() > MAX_NAMED
    {
        *named = Named {
            file: Arc::downgrade(file),
            ..Named::default()
        };
    }
    // The window's bytes: a large dataset at its end is named only up to it.
    let mut left = step.window;
    let window: Vec<_> = ahead(file, step.from, step.window)
        .into_iter()
        .map(|ds| {
            let n = ds.len().min(left);
            left -= n;
            (ds, n)
        })
        .collect();
    // What each dataset adds to what was named of it before.
    let todo: Vec<_> = window
        .iter()
        .filter_map(|(ds, n)| {
            let done = named.named.entry(ds.id).or_insert(0);
            let from = std::mem::replace(done, (*done).max(*n));
            (*n > from).then_some((ds, from, *n))
        })
        .collect();
    // A local file's bytes cost no request: nothing to name.
    if file.storage().wants_hints() {
        std::thread::scope(|s| {
            for &(ds, from, to) in &todo {
                // Errors are the reader's to report when it reads.
                s.spawn(move || {
                    let _ = ds.hint(from, to - from, None);
                });
            }
        });
    }
    if let Some(workers) = decoder {
        let mut left = DECODE_AHEAD.min(workers.budget());
        for (ds, n) in &window {
            if left == 0 {
                break;
            }
            let to = (*n).min(left);
            let done = named.decoded.entry(ds.id).or_insert(0);
            // Only datasets that can be decoded ahead count against what is decoded.
            if let Some(end) = workers.decode_ahead(ds, *done, to) {
                *done = (*done).max(end);
                left -= to;
            }
        }
    }
    todo.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::OpenOptions;

    fn groups_file() -> Arc<File> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("mount-tests/fixtures/data/groups_earliest.h5");
        File::open(&path, &OpenOptions::default()).unwrap()
    }

    /// The place of `group/name` below the root.
    fn place(f: &File, group: &str, name: &str) -> Place {
        let root = f.root();
        let g = f.resolve(&format!("/{group}")).unwrap();
        let links = f.links(g).unwrap();
        let index = links.iter().position(|l| l.name == name).unwrap();
        let at = f.links(root).unwrap().iter().position(|l| l.name == group);
        Place {
            group: g,
            index,
            count: links.len(),
            parent: Some((root, at.unwrap())),
        }
    }

    /// The place of `name` in the root.
    fn top(f: &File, name: &str) -> Place {
        let links = f.links(f.root()).unwrap();
        let index = links.iter().position(|l| l.name == name).unwrap();
        Place {
            group: f.root(),
            index,
            count: links.len(),
            parent: None,
        }
    }

    /// The window of the walk going on (0: none).
    fn window(s: &Siblings) -> u64 {
        crate::sync::lock(&s.walk).window
    }

    fn soak_file(cache_bytes: u64) -> Arc<File> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("mount-tests/fixtures/big/soak.h5");
        let opts = OpenOptions {
            cache_bytes,
            ..OpenOptions::default()
        };
        File::open(&path, &opts).unwrap()
    }

    fn names(f: &File, v: &[Arc<crate::model::Dataset>]) -> Vec<String> {
        // Every dataset of the fixture is at /group/name: find it by its id.
        let mut out = Vec::new();
        for ds in v {
            let root = f.links(f.root()).unwrap();
            'g: for g in root.iter() {
                let LinkTarget::Hard(gid) = g.target else {
                    continue;
                };
                let Ok(links) = f.links(gid) else { continue };
                for l in links.iter() {
                    if l.target == LinkTarget::Hard(ds.id) {
                        out.push(format!("{}/{}", g.name, l.name));
                        break 'g;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn a_walk_is_the_next_link_or_the_first_of_the_next_group() {
        let f = groups_file();
        // /nine lists d1 d2 d4 d5 d7 d8 g0 g3 g6; the root: empty level0 nine nine_tracked
        // one tracked_compact.
        let p = |g: &str, n: &str| place(&f, g, n);
        assert!(follows(p("nine", "d1"), p("nine", "d2")));
        assert!(follows(p("nine", "d2"), p("nine", "d4")));
        assert!(!follows(p("nine", "d1"), p("nine", "d4")), "a skip");
        assert!(!follows(p("nine", "d2"), p("nine", "d1")), "backwards");
        // From the last link of a group to the first of the next group.
        assert!(follows(p("one", "only"), p("tracked_compact", "alpha")));
        assert!(follows(p("nine", "g6"), p("nine_tracked", "d1")));
        assert!(
            !follows(p("nine", "d8"), p("nine_tracked", "d1")),
            "not the last"
        );
        assert!(!follows(p("one", "only"), p("tracked_compact", "mid")));
        assert!(
            !follows(p("nine", "g6"), p("one", "only")),
            "a group skipped"
        );
    }

    #[test]
    fn ahead_names_the_next_datasets_in_listing_order_and_stops_at_the_window() {
        let f = groups_file();
        let from = place(&f, "nine", "d2");
        let all = names(&f, &ahead(&f, from, u64::MAX));
        assert_eq!(
            all,
            [
                "nine/d4",
                "nine/d5",
                "nine/d7",
                "nine/d8",
                "nine_tracked/d1",
                "nine_tracked/d2",
                "nine_tracked/d4",
                "nine_tracked/d5",
                "nine_tracked/d7",
                "nine_tracked/d8",
                "one/only",
                "tracked_compact/alpha",
                "tracked_compact/mid",
                "tracked_compact/zeta",
            ]
        );
        // A window of one byte: the next dataset only.
        assert_eq!(names(&f, &ahead(&f, from, 1)), ["nine/d4"]);
        // At the end of the listing: nothing.
        let last = place(&f, "tracked_compact", "zeta");
        assert!(ahead(&f, last, u64::MAX).is_empty());
    }

    #[test]
    fn the_window_doubles_along_a_walk_and_any_other_open_ends_it() {
        let f = groups_file();
        let p = |g: &str, n: &str| place(&f, g, n);
        let s = Siblings::new();
        // A walker closes each dataset before it opens the next.
        let fh = std::cell::Cell::new(0);
        let open = |s: &Siblings, n: &str| {
            s.on_close(fh.get());
            fh.set(fh.get() + 1);
            s.on_open(&f, p("nine", n), fh.get());
        };
        open(&s, "d1");
        assert_eq!(window(&s), 0, "one dataset alone");
        open(&s, "d2");
        assert_eq!(window(&s), MIN_WINDOW);
        open(&s, "d4");
        assert_eq!(window(&s), (2 * MIN_WINDOW).min(MAX_WINDOW));
        for n in ["d5", "d7", "d8"] {
            open(&s, n);
        }
        assert_eq!(window(&s), MAX_WINDOW);
        open(&s, "d2");
        assert_eq!(window(&s), 0, "a step back ends the walk");
        open(&s, "d4");
        assert_eq!(window(&s), MIN_WINDOW, "and a new one starts");
    }

    #[test]
    fn readers_holding_their_datasets_open_are_not_a_walk() {
        // Concurrent readers open datasets while others are open; their opens may fall in
        // listing order by chance.
        let f = groups_file();
        let p = |g: &str, n: &str| place(&f, g, n);
        let s = Siblings::new();
        s.on_open(&f, p("nine", "d1"), 1);
        s.on_open(&f, p("nine", "d2"), 2);
        assert_eq!(window(&s), 0, "d1 still open");
        s.on_close(1);
        s.on_open(&f, p("nine", "d4"), 3);
        assert_eq!(window(&s), 0, "d2, opened last, still open");
        s.on_close(3);
        s.on_open(&f, p("nine", "d5"), 4);
        assert_eq!(window(&s), MIN_WINDOW, "d4 closed before d5 opened");
    }

    #[test]
    fn a_new_walk_names_again_what_an_earlier_one_named() {
        // Pages named by a walk may be evicted before the next walk over the same datasets
        // (a second `cat g/*`): a walk's steps skip what it named itself, not what an earlier
        // walk named.
        let f = groups_file();
        let step = |fresh| Step {
            file: f.clone(),
            from: place(&f, "nine", "d2"),
            window: MIN_WINDOW,
            fresh,
        };
        let mut named = Named::default();
        let first = name(&step(true), &mut named, None);
        assert!(first > 0);
        assert_eq!(
            name(&step(false), &mut named, None),
            0,
            "named once per walk"
        );
        assert_eq!(
            name(&step(true), &mut named, None),
            first,
            "named again by a new walk"
        );
    }

    #[test]
    fn a_dataset_named_in_part_at_the_end_of_a_window_is_named_further_later() {
        // /nine's datasets hold 4 elements each; a window that ends inside d4 names it in
        // part, and the next step, whose window reaches past it, names the rest of it.
        let f = groups_file();
        let d4 = f.dataset(f.resolve("/nine/d4").unwrap()).unwrap();
        let d2_len = f.dataset(f.resolve("/nine/d2").unwrap()).unwrap().len();
        assert!(d4.len() > 1);
        let step = |from: &str, window| Step {
            file: f.clone(),
            from: place(&f, "nine", from),
            window,
            fresh: false,
        };
        let mut named = Named::default();
        assert_eq!(name(&step("d1", d2_len + 1), &mut named, None), 2);
        assert_eq!(named.named[&d4.id], 1, "d4 named in part");
        // From d2 on: d4 taken further, d5 new.
        assert_eq!(name(&step("d2", d4.len() + 1), &mut named, None), 2);
        assert_eq!(named.named[&d4.id], d4.len());
        assert_eq!(name(&step("d2", d4.len() + 1), &mut named, None), 0);
    }

    #[test]
    fn decoding_ahead_stays_within_the_prefetch_budget_and_takes_only_what_it_can_decode() {
        // soak.h5's root: blosc_lz4 (8 MiB), compact_i2, contig_u1 (neither can be decoded
        // ahead), fl32_edges (5.3 MB deflated, chunks of 64 KiB), gz_btree2, ...
        let f = soak_file(4 << 20);
        let prefetch = super::super::prefetch::Prefetcher::new(4 << 20);
        let workers = prefetch.workers();
        assert_eq!(workers.budget(), 1 << 20, "a quarter of the cache");
        let edges = f.dataset(f.resolve("/fl32_edges").unwrap()).unwrap();
        let step = |from: &str| Step {
            file: f.clone(),
            from: top(&f, from),
            window: MIN_WINDOW,
            fresh: false,
        };
        let mut named = Named::default();
        name(&step("blosc_lz4"), &mut named, Some(&workers));
        // Not DECODE_AHEAD: the budget, all of it in fl32_edges (the two before it cannot
        // be decoded ahead and take none of it), in pieces of 256 KiB.
        assert_eq!(named.decoded.get(&edges.id), Some(&(1 << 20)));
        let decoded: u64 = named.decoded.values().sum();
        assert_eq!(decoded, 1 << 20);
        assert_eq!(prefetch.stats().jobs, 4);
        // The next step finds it queued.
        name(&step("compact_i2"), &mut named, Some(&workers));
        assert_eq!(prefetch.stats().jobs, 4);
    }
}
