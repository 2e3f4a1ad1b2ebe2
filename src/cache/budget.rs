//! The memory all chunk indexes of a mount may keep: a byte budget, a fraction of the chunk
//! cache's size, shared by every index's caches of decoded nodes, blocks and pages.
//!
//! Each cache charges what it keeps (the `Weigh::weight` of the decoded value plus a fixed
//! bookkeeping cost) to the budget and gives it back when it drops the value or is dropped
//! itself. A cache that keeps something while the budget is spent evicts its own least
//! recently used entries until the budget holds again (or it holds nothing): a cache never
//! takes another's entries, and an index that is no longer open (its dataset left the
//! dataset cache) gives everything back. The budget is large enough that a `cat` of a
//! dataset of millions of small chunks keeps every node that two readers the kernel sends
//! at once still share, and the memory of the indexes stays bounded whatever their size.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::format::btree_v1::{BtreeV1Node, NodeKeys};
use crate::format::btree_v2::Node as BtreeV2Node;
use crate::format::extensible_array::ExtensibleArraySuperBlock;

/// The index budget is the chunk cache's size divided by this.
pub const CACHE_FRACTION: u64 = 8;

/// The least budget, whatever the chunk cache's size: a few hundred nodes.
pub const MIN_BUDGET: u64 = 4 << 20;

/// What keeping one entry costs beyond its value's weight (the LRU's node, the key, the
/// `Arc`).
pub(crate) const ENTRY_OVERHEAD: u64 = 96;

/// The byte budget of a mount's chunk indexes (see the module docs).
#[derive(Debug)]
pub struct IndexBudget {
    limit: u64,
    used: AtomicU64,
}

impl Default for IndexBudget {
    /// The budget of no chunk cache: [`MIN_BUDGET`].
    fn default() -> IndexBudget {
        IndexBudget::with_limit(MIN_BUDGET)
    }
}

impl IndexBudget {
    /// The budget that goes with a chunk cache of `cache_bytes`: an eighth of it
    /// ([`CACHE_FRACTION`]), and at least [`MIN_BUDGET`].
    pub fn for_cache(cache_bytes: u64) -> IndexBudget {
        IndexBudget::with_limit((cache_bytes / CACHE_FRACTION).max(MIN_BUDGET))
    }

    /// A budget of exactly `limit` bytes.
    pub fn with_limit(limit: u64) -> IndexBudget {
        IndexBudget {
            limit,
            used: AtomicU64::new(0),
        }
    }

    /// The budget in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes the indexes keep now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    pub(crate) fn charge(&self, n: u64) {
        self.used.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn release(&self, n: u64) {
        // Never below zero, whatever the order of charges and releases.
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(n))
            });
    }

    /// Whether the indexes keep more than the budget.
    pub(crate) fn spent(&self) -> bool {
        self.used() > self.limit
    }
}

/// The bytes a decoded index structure takes in memory (its heap parts included).
pub(crate) trait Weigh {
    fn weight(&self) -> u64;
}

fn bytes_of<T>(v: &[T]) -> u64 {
    std::mem::size_of_val(v) as u64
}

impl Weigh for Vec<u8> {
    fn weight(&self) -> u64 {
        (std::mem::size_of::<Self>() + self.capacity()) as u64
    }
}

impl Weigh for BtreeV1Node {
    fn weight(&self) -> u64 {
        let keys = match &self.keys {
            NodeKeys::Group(k) => bytes_of(k),
            NodeKeys::Chunk(k) => bytes_of(k) + k.iter().map(|k| bytes_of(&k.offsets)).sum::<u64>(),
        };
        std::mem::size_of::<Self>() as u64 + keys + bytes_of(&self.children)
    }
}

impl Weigh for BtreeV2Node {
    fn weight(&self) -> u64 {
        std::mem::size_of::<Self>() as u64 + bytes_of(&self.records) + bytes_of(&self.children)
    }
}

impl Weigh for ExtensibleArraySuperBlock {
    fn weight(&self) -> u64 {
        std::mem::size_of::<Self>() as u64 + bytes_of(&self.page_init) + bytes_of(&self.dblk_addrs)
    }
}
