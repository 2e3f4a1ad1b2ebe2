//! Fetching a tree's metadata level by level before a walk reads it object by object (the
//! reference manifest's walk, [`super::refs`]).
//!
//! On a remote source each object a depth-first walk opens is a round trip when its pages
//! are not yet here: the header of every group and dataset, then every chunk index, one
//! after another. Here the tree is gone through one level at a time instead, with every
//! read of a level made together. The headers of all the level's objects are named to the
//! source in one hint (merged into few GETs, several ranges each where the server takes
//! them). Then, in rounds, what each object needs before its links or chunk index can be
//! read, a step at a time ([`Step`]): the rest of its header (continuation chunks), then
//! the heads of its indexes (a group's link indexes, a dataset's chunk index), then the
//! nodes and heap data they lead to; a round names what the level's objects read next in
//! one hint (what each surely reads decides whether it is here; more is fetched), and an
//! object whose next ranges are here already (the source says so) takes its next step in
//! the same round rather than a round trip later. Then the level's groups list their links
//! and its datasets read their layout and prepare their chunk index (levels above the last
//! read, the last named), on a few threads at once, so that what they miss goes out in the
//! same round trip. The walk that follows finds everything cached: a tree costs a few
//! round trips per level rather than one per object. Only a hint: every error is left to
//! the walk, which reports it where it belongs; nothing is done on a local file.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::model::{File, Link, LinkTarget, ObjectId, ObjectKind, Piece};

/// Threads reading a level's objects at once: enough to keep the remote source's requests
/// in flight (a miss blocks its thread for a round trip), few enough for a small machine.
const THREADS: usize = 16;

/// Levels gone through at most (deeper objects are read by the walk as it meets them).
const MAX_LEVELS: usize = 64;

/// Rounds of hints for one level at most: one per [`Step`] and per link of a chain of
/// continuation chunks (what is left, and what a fetch that failed leaves out, is read by
/// the walk as it meets it).
const MAX_ROUNDS: usize = 16;

/// Fetch the metadata of the tree below `root` (groups' links, objects' headers, datasets'
/// layouts and chunk index roots) level by level; see the module docs.
pub fn warm_tree(file: &File, root: ObjectId) {
    if !file.storage().wants_hints() {
        return;
    }
    let mut seen = HashSet::from([root]);
    let mut level = vec![root];
    for _ in 0..MAX_LEVELS {
        if level.is_empty() {
            break;
        }
        // The rest of the level's headers and the heads and first nodes of their indexes,
        // named together step by step (see `Step`).
        let mut going: Vec<Going> = level
            .iter()
            .map(|&id| Going {
                id,
                step: Step::Rest,
                fetching: Vec::new(),
            })
            .collect();
        for _ in 0..MAX_ROUNDS {
            if going.is_empty() {
                break;
            }
            let done = on_threads(&going, |g| advance(file, g));
            hint(file, done.iter().map(|(_, hinted)| hinted));
            going = done.into_iter().filter_map(|(g, _)| g).collect();
        }
        // Each object of the level: its kind, then a group's links or a dataset's index.
        let children: Vec<Vec<Link>> = on_threads(&level, |&id| {
            match file.kind(id) {
                Ok(ObjectKind::Group) => {
                    return file.links(id).map(|l| l.to_vec()).unwrap_or_default();
                }
                Ok(ObjectKind::Dataset) => {
                    if let Ok(ds) = file.dataset(id) {
                        let _ = ds.prepare_index(0, ds.len());
                    }
                }
                _ => {}
            }
            Vec::new()
        });
        let links: Vec<Link> = children
            .into_iter()
            .flatten()
            .filter(|l| matches!(l.target, LinkTarget::Hard(id) if seen.insert(id)))
            .collect();
        // The next level's headers, named together.
        let ids: Vec<ObjectId> = links
            .iter()
            .filter_map(|l| match l.target {
                LinkTarget::Hard(id) => Some(id),
                _ => None,
            })
            .collect();
        file.prefetch_objects(&ids);
        level = links
            .iter()
            .filter_map(|l| match l.target {
                LinkTarget::Hard(id) => Some(id),
                _ => None,
            })
            .collect();
    }
}

/// A step in fetching what an object needs before its links or chunk index are read:
/// each reads what the step before named (here by then, or on its way) and names what the
/// step after it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Read the header's chunks that are here; name the continuation chunks they announce
    /// (often far from the first: attributes added after the data), again until none is
    /// left.
    Rest,
    /// Read the whole header; name the heads of the object's indexes (an old-style group's
    /// B-tree root and local heap header, a chunked dataset's index root or header).
    Indexes,
    /// Read those; name what they lead to (an old-style group's symbol table nodes and heap
    /// data, a chunk index's first level), which the listing of a group's links and the
    /// preparing of a dataset's chunk index read.
    Pieces,
}

impl Step {
    /// The step after this one, which named `named`.
    fn next(self, named: &[Piece]) -> Option<Step> {
        match self {
            Step::Rest if !named.is_empty() => Some(Step::Rest),
            Step::Rest => Some(Step::Indexes),
            Step::Indexes => Some(Step::Pieces),
            Step::Pieces => None,
        }
    }

    /// Take this step of object `id`, whose pieces `fetching` were named in the last hint
    /// (they are read, waiting for them): the pieces it names. A continuation chunk comes
    /// with [`REST_SLACK`] bytes past it.
    fn named(self, file: &File, id: ObjectId, fetching: &[Piece]) -> Vec<Piece> {
        match self {
            Step::Rest => {
                let fetching: Vec<(u64, u64)> = fetching.iter().map(|p| (p.addr, p.len)).collect();
                file.header_rest(id, &fetching)
                    .into_iter()
                    .map(|(a, n)| Piece::new(a, n, n.saturating_add(REST_SLACK)))
                    .collect()
            }
            Step::Indexes => file.index_heads(id),
            Step::Pieces => file.index_pieces(id),
        }
    }
}

/// Bytes fetched past each continuation chunk: libhdf5 takes small metadata from blocks of
/// 2 KiB (its default metadata block size), so what is written with a chunk lies next to
/// it, and a group's B-tree root and local heap often come right after its continuation
/// chunk: with it, rather than a round trip later. (Fetching as much before the chunk
/// too costs more pages than it saves round trips.)
const REST_SLACK: u64 = 2048;

/// Where one object of a level is in its steps.
struct Going {
    id: ObjectId,
    /// The step it takes next.
    step: Step,
    /// What the step before named, in the last hint.
    fetching: Vec<Piece>,
}

/// Take object `g` through its steps as far as it goes without another request: a step
/// whose named ranges are here already is followed by the next at once. Where it stops
/// (none once every step is taken), and what the round's hint names for it.
fn advance(file: &File, g: &Going) -> (Option<Going>, Vec<Piece>) {
    let mut step = Some(g.step);
    let mut fetching = g.fetching.clone();
    // Bounded, as a chain of continuation chunks is (each turn takes a step or a chunk).
    for _ in 0..MAX_ROUNDS {
        let Some(s) = step else {
            break;
        };
        let named = s.named(file, g.id, &fetching);
        step = s.next(&named);
        let read: Vec<(u64, u64)> = named.iter().map(|p| (p.addr, p.len)).collect();
        if !file.storage().cached(&read) {
            let next = step.map(|step| Going {
                id: g.id,
                step,
                fetching: named.clone(),
            });
            return (next, named);
        }
        fetching = named;
    }
    let next = step.map(|step| Going {
        id: g.id,
        step,
        fetching,
    });
    (next, Vec::new())
}

/// Name `pieces` to the source in one hint.
fn hint<'a>(file: &File, pieces: impl Iterator<Item = &'a Vec<Piece>>) {
    let pieces: Vec<(u64, u64)> = pieces.flatten().map(|p| (p.addr, p.fetch)).collect();
    if !pieces.is_empty() {
        file.storage().prefetch(&pieces);
    }
}

/// `f` of every item, on up to [`THREADS`] threads; the results in no particular order
/// (a thread that panics gives none).
fn on_threads<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let n = items.len().min(THREADS);
    if n <= 1 {
        return items.iter().map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    while let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
                        mine.push(f(item));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}
