//! The decoded nodes of a B-tree chunk index, kept by address, each read once.
//!
//! Two LRUs: one for the nodes above the leaves, one for the leaves, bounded together by
//! the mount's index budget ([`IndexBudget`]: what each keeps is charged by its decoded
//! size, and a cache over the budget drops its own leaves first, then the nodes above). A lookup
//! touches one node per level, and readers at different places in a dataset (the reader, the
//! prefetch workers ahead of it, other readers) bring in a new leaf every few lookups; in a
//! single LRU those leaves pushed out the nodes above them, which every lookup needs again,
//! so a `cat` of a dataset of millions of small chunks read upper nodes many times over
//! (`mount-tests/bench/bigindex` counts such reads). Leaves cannot push out the nodes above
//! them here, and the few hundred upper nodes of even the largest trees mostly stay. With a
//! budget in bytes rather than a few dozen entries, the leaves two readers share (two
//! reads the kernel sends at once, a reader and the prefetch ahead of it) stay between
//! their lookups too, so a `cat` reads every node once.
//!
//! The array indexes keep their blocks and pages here too, all of them as leaves but an
//! extensible array's super blocks.
//!
//! Several threads missing the same node at once read it once: the first reads and the
//! others wait for it ([`crate::sync::flight`]), as the chunk cache does.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use crate::cache::budget::{IndexBudget, Weigh, ENTRY_OVERHEAD};
use crate::error::{Error, Result};
use crate::sync::flight::{on_panic, Flights, Role};
use crate::sync::lock;

/// What the waiters of a read that panicked get.
fn panicked(addr: u64) -> Error {
    Error::Io {
        what: "chunk index node",
        addr,
        len: 0,
        source: Arc::new(std::io::Error::other("the reader of the node panicked")),
    }
}

/// The decoded nodes of one index (see the module docs).
#[derive(Debug)]
pub(crate) struct NodeCache<V: Weigh> {
    state: Mutex<State<V>>,
    budget: Arc<IndexBudget>,
    /// Most entries each LRU keeps, besides the budget (tests of eviction set it small).
    entries: usize,
}

#[derive(Debug)]
struct State<V> {
    upper: LruCache<u64, Arc<V>>,
    leaves: LruCache<u64, Arc<V>>,
    flying: Flights<u64, Arc<V>, Error>,
    /// Bytes charged to the budget for what the LRUs keep.
    charged: u64,
}

/// Nodes each LRU keeps even when the budget is spent (by other indexes too): the nodes of a
/// lookup's path and the last few leaves, as the fixed 64-entry caches kept before, only
/// fewer. What the floors hold beyond the budget is bounded by the dataset cache, which
/// drops the indexes of datasets it lets go.
const FLOOR: usize = 16;

/// What keeping `v` costs the budget.
fn cost<V: Weigh>(v: &V) -> u64 {
    v.weight().saturating_add(ENTRY_OVERHEAD)
}

impl<V: Weigh> Drop for NodeCache<V> {
    fn drop(&mut self) {
        let st = lock(&self.state);
        self.budget.release(st.charged);
    }
}

impl<V: Weigh> NodeCache<V> {
    /// A cache charging `budget`, of at most `entries` nodes in each LRU besides (`None`:
    /// the budget alone bounds it).
    pub(crate) fn new(budget: Arc<IndexBudget>, entries: Option<NonZeroUsize>) -> NodeCache<V> {
        NodeCache {
            state: Mutex::new(State {
                upper: LruCache::unbounded(),
                leaves: LruCache::unbounded(),
                flying: Flights::new(),
                charged: 0,
            }),
            budget,
            entries: entries.map_or(usize::MAX, NonZeroUsize::get),
        }
    }

    /// Keep `n` at `addr` (among the leaves or above), then drop the least recently used
    /// entries past the entry bound and, while the budget is spent, leaves first.
    fn keep(&self, st: &mut State<V>, addr: u64, n: &Arc<V>, leaf: bool) {
        let c = cost(n.as_ref());
        let list = if leaf { &mut st.leaves } else { &mut st.upper };
        let mut freed = list
            .put(addr, n.clone())
            .map_or(0, |old| cost(old.as_ref()));
        while list.len() > self.entries {
            match list.pop_lru() {
                Some((_, old)) => freed = freed.saturating_add(cost(old.as_ref())),
                None => break,
            }
        }
        st.charged = st.charged.saturating_add(c).saturating_sub(freed);
        self.budget.charge(c);
        self.budget.release(freed);
        while self.budget.spent() {
            // Each cache keeps a few nodes whatever the budget, so that an index whose
            // neighbours hold the budget still finds the path it just read.
            let old = if st.leaves.len() > FLOOR {
                st.leaves.pop_lru()
            } else if st.upper.len() > FLOOR {
                st.upper.pop_lru()
            } else {
                None
            };
            let Some((_, old)) = old else {
                break;
            };
            let c = cost(old.as_ref());
            st.charged = st.charged.saturating_sub(c);
            self.budget.release(c);
        }
    }

    /// Whether the node at `addr` is held (or being read).
    pub(crate) fn contains(&self, addr: u64) -> bool {
        let st = lock(&self.state);
        st.upper.contains(&addr) || st.leaves.contains(&addr) || st.flying.contains(addr)
    }

    /// The node at `addr`: held, and `fits` it, or read by `load` (once, however many
    /// threads ask together) and kept among the leaves if `is_leaf` says so, else above.
    /// A held node that does not fit (a node reached again with other expectations, in a
    /// damaged file) is read again, and checked by `load`.
    pub(crate) fn get(
        &self,
        addr: u64,
        fits: impl Fn(&V) -> bool,
        is_leaf: impl Fn(&V) -> bool,
        load: impl FnOnce() -> Result<V>,
    ) -> Result<Arc<V>> {
        {
            let mut st = lock(&self.state);
            let held = match st.upper.get(&addr) {
                Some(n) => Some(n.clone()),
                None => st.leaves.get(&addr).cloned(),
            };
            match held {
                Some(n) if fits(&n) => return Ok(n),
                Some(_) => {}
                None => {
                    if let Role::Waiter(flight) = st.flying.join_or_start(addr) {
                        drop(st);
                        let n = flight.wait()?;
                        if fits(&n) {
                            return Ok(n);
                        }
                        return load().map(Arc::new);
                    }
                    drop(st);
                    let outcome = on_panic(
                        || load().map(Arc::new),
                        || self.land(addr, &Err(panicked(addr)), &is_leaf),
                    );
                    self.land(addr, &outcome, &is_leaf);
                    return outcome;
                }
            }
        }
        load().map(Arc::new)
    }

    /// End the read of `addr` with `outcome`: a node is kept, and the waiters get a copy.
    fn land(&self, addr: u64, outcome: &Result<Arc<V>>, is_leaf: &impl Fn(&V) -> bool) {
        let flight = {
            let mut st = lock(&self.state);
            if let Ok(n) = outcome {
                self.keep(&mut *st, addr, n, is_leaf(n));
            }
            st.flying.take(addr)
        };
        if let Some(f) = flight {
            f.land(outcome.clone());
        }
    }
}
