//! Fetching a tree's metadata level by level before a walk reads it object by object (the
//! reference manifest's walk, [`super::refs`]).
//!
//! On a remote source each object a depth-first walk opens is a round trip when its pages
//! are not yet here: the header of every group and dataset, then every chunk index, one
//! after another. Here the tree is gone through one level at a time instead, with every
//! read of a level made together: the headers of all the level's objects are named to the
//! source in one hint (merged into few GETs, several ranges each where the server takes
//! them), then where the level's groups keep their links (an old-style group's symbol table
//! nodes and heap) in another, then the level's groups list their links and its datasets read their layout and
//! prepare their chunk index (levels above the last read, the last named), on a few
//! threads at once, so that what they miss goes out in the same round trip. The walk that
//! follows finds everything cached: a tree of depth `d` costs about `d + 2` round trips
//! rather than one per object. Only a hint: every error is left to the walk, which reports
//! it where it belongs; nothing is done on a local file.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::model::{File, Link, LinkTarget, ObjectId, ObjectKind};

/// Threads reading a level's objects at once: enough to keep the remote source's requests
/// in flight (a miss blocks its thread for a round trip), few enough for a small machine.
const THREADS: usize = 16;

/// Levels gone through at most (deeper objects are read by the walk as it meets them).
const MAX_LEVELS: usize = 64;

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
        // Where the level's groups keep their links (an old-style group's symbol table
        // nodes and heap), named together.
        let pieces: Vec<(u64, u64)> = on_threads(&level, |&id| match file.kind(id) {
            Ok(ObjectKind::Group) => file.link_pieces(id),
            _ => Vec::new(),
        })
        .into_iter()
        .flatten()
        .collect();
        if !pieces.is_empty() {
            file.storage().prefetch(&pieces);
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
