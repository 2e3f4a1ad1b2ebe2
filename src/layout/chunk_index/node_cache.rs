//! The decoded nodes of a B-tree chunk index, kept by address, each read once.
//!
//! Two bounded LRUs: one for the nodes above the leaves, one for the leaves. A lookup
//! touches one node per level, and readers at different places in a dataset (the reader, the
//! prefetch workers ahead of it, other readers) bring in a new leaf every few lookups; in a
//! single LRU those leaves pushed out the nodes above them, which every lookup needs again,
//! so a `cat` of a dataset of millions of small chunks read upper nodes many times over
//! (`mount-tests/bench/bigindex` counts such reads). Leaves cannot push out the nodes above
//! them here, and the few hundred upper nodes of even the largest trees mostly stay.
//!
//! Several threads missing the same node at once read it once: the first reads and the
//! others wait for it ([`crate::sync::flight`]), as the chunk cache does.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

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
pub(crate) struct NodeCache<V> {
    state: Mutex<State<V>>,
}

#[derive(Debug)]
struct State<V> {
    upper: LruCache<u64, Arc<V>>,
    leaves: LruCache<u64, Arc<V>>,
    flying: Flights<u64, Arc<V>, Error>,
}

impl<V> NodeCache<V> {
    /// A cache of at most `upper` nodes above the leaves and `leaves` leaves.
    pub(crate) fn new(upper: NonZeroUsize, leaves: NonZeroUsize) -> NodeCache<V> {
        NodeCache {
            state: Mutex::new(State {
                upper: LruCache::sparse(upper),
                leaves: LruCache::sparse(leaves),
                flying: Flights::new(),
            }),
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
                match is_leaf(n) {
                    true => st.leaves.put(addr, n.clone()),
                    false => st.upper.put(addr, n.clone()),
                };
            }
            st.flying.take(addr)
        };
        if let Some(f) = flight {
            f.land(outcome.clone());
        }
    }
}
