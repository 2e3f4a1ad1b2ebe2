//! Mount-wide counters, served as the text of the xattr [`STATS_XATTR`] on the mount root.
//!
//! Mechanism. The read path bumps a few relaxed atomics per request ([`Stats::on_read`]):
//! requests, bytes answered and the largest size the kernel asked for, which shows whether
//! the kernel really sends the large requests asked for at `init` (see [`super::fuse`]). The
//! daemon records the `read_ahead_kb` it set on the mount's bdi ([`Stats::set_readahead_kb`]).
//! Nothing else is kept here: the chunk-cache counters are read from the cache itself
//! ([`crate::cache::CacheStats`]) and the prefetch counters from the prefetcher
//! ([`super::prefetch::PrefetchStats`]) when the text is asked for, so a `getxattr` costs
//! one cache lock and no request pays for the report.
//!
//! The FUSE adapter counts every request it gets by kind ([`Stats::on_op`], one relaxed
//! atomic each, the `op_*` keys), so a benchmark can tell how many round trips a walk costs
//! and which ones; `op_forget` counts inodes forgotten (a batch forget counts each).
//!
//! The text is `key value` lines with fixed keys in a fixed order ([`Snapshot::render`]),
//! for `getfattr -n user.h5mount.stats --only-values MOUNT`. The name is not listed by
//! `listxattr` (so `getfattr -d` shows only the root group's HDF5 attributes); a root-group
//! attribute literally named `h5mount.stats` is listed but its value is hidden by ours.
//!
//! `inodes` is the number of inodes the kernel holds now: the daemon keeps a small record for
//! each (see `super::inode`), so a walk shows here as it grows and as the kernel forgets.
//!
//! The chunk cache is shared by the mounted file and every other file the mount opens
//! (`model::resolver`), and by every re-read of the file ([`super::refresh`]), so its counters
//! cover them all and run on across refreshes. The `files_*` counters are the resolver's:
//! files known, open now, opened (first opens and reopens) and closed by the bound.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cache::CacheStats;
use crate::io::RequestCounts;
use crate::model::resolver::ResolverStats;

use super::prefetch::PrefetchStats;

/// The xattr name of the statistics text (on the root directory only).
pub const STATS_XATTR: &str = "user.h5mount.stats";

/// The keys of the text, in order.
pub const KEYS: [&str; 34 + OPS.len()] = [
    "read_requests",
    "read_bytes",
    "read_max_request",
    "cache_hits",
    "cache_misses",
    "cache_evictions",
    "cache_entries",
    "cache_bytes",
    "cache_capacity",
    "prefetch_jobs",
    "prefetch_dropped",
    "prefetch_bytes",
    "prefetch_walk_steps",
    "prefetch_walk_done",
    "readahead_kb",
    "refreshes",
    "files_known",
    "files_open",
    "files_opened",
    "files_evicted",
    "inodes",
    "remote_heads",
    "remote_gets",
    "remote_bytes",
    "remote_failures",
    "remote_changed",
    "remote_lists",
    "remote_merged",
    "remote_readahead",
    "remote_sent",
    "remote_retries",
    "remote_p50_us",
    "remote_p99_us",
    "remote_warm_up",
    "op_lookup",
    "op_forget",
    "op_getattr",
    "op_readlink",
    "op_open",
    "op_release",
    "op_flush",
    "op_opendir",
    "op_readdir",
    "op_readdirplus",
    "op_releasedir",
    "op_getxattr",
    "op_listxattr",
    "op_access",
    "op_statfs",
    "op_other",
];

/// The kinds of FUSE request counted, in the order of their `op_*` keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Lookup,
    Forget,
    Getattr,
    Readlink,
    Open,
    Release,
    Flush,
    Opendir,
    Readdir,
    Readdirplus,
    Releasedir,
    Getxattr,
    Listxattr,
    Access,
    Statfs,
    /// Everything else (mutations refused, ioctls, reads: those are `read_requests`).
    Other,
}

/// Every [`Op`], in key order.
pub const OPS: [Op; 16] = [
    Op::Lookup,
    Op::Forget,
    Op::Getattr,
    Op::Readlink,
    Op::Open,
    Op::Release,
    Op::Flush,
    Op::Opendir,
    Op::Readdir,
    Op::Readdirplus,
    Op::Releasedir,
    Op::Getxattr,
    Op::Listxattr,
    Op::Access,
    Op::Statfs,
    Op::Other,
];

/// The longest the text can be (every value of 20 digits). A size query (`getxattr` with
/// no buffer) is answered this, not the current length: the counters may grow between the
/// query and the read, and a buffer sized for the old text would fail with `ERANGE`.
pub fn max_text_len() -> usize {
    KEYS.iter().map(|k| k.len() + " \n".len() + 20).sum()
}

/// Counters kept by the filesystem itself.
#[derive(Debug, Default)]
pub struct Stats {
    read_requests: AtomicU64,
    read_bytes: AtomicU64,
    read_max_request: AtomicU64,
    readahead_kb: AtomicU64,
    refreshes: AtomicU64,
    warm_up: AtomicU64,
    ops: [AtomicU64; OPS.len()],
}

impl Stats {
    /// Count `n` FUSE requests of kind `op` (for [`Op::Forget`]: `n` inodes forgotten).
    pub fn on_op(&self, op: Op, n: u64) {
        self.ops[op as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Count a read request of `size` bytes that answered `answered` bytes.
    pub fn on_read(&self, size: u32, answered: usize) {
        self.read_requests.fetch_add(1, Ordering::Relaxed);
        self.read_bytes
            .fetch_add(answered as u64, Ordering::Relaxed);
        self.read_max_request
            .fetch_max(u64::from(size), Ordering::Relaxed);
    }

    /// Count a new state of the file swapped in by `--refresh`.
    pub fn on_refresh(&self) {
        self.refreshes.fetch_add(1, Ordering::Relaxed);
    }

    /// Record the readahead the daemon set on the mount (0: it could not).
    pub fn set_readahead_kb(&self, kb: u64) {
        self.readahead_kb.store(kb, Ordering::Relaxed);
    }

    /// Record where the warm-up of a remote mount is (see [`Snapshot::warm_up`]).
    pub fn set_warm_up(&self, state: u64) {
        self.warm_up.store(state, Ordering::Relaxed);
    }

    /// The counters now, with the cache's and the prefetcher's.
    pub fn snapshot(
        &self,
        cache: CacheStats,
        cache_capacity: u64,
        prefetch: PrefetchStats,
        files: ResolverStats,
        remote: RequestCounts,
        inodes: u64,
    ) -> Snapshot {
        Snapshot {
            read_requests: self.read_requests.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            read_max_request: self.read_max_request.load(Ordering::Relaxed),
            cache,
            cache_capacity,
            prefetch,
            readahead_kb: self.readahead_kb.load(Ordering::Relaxed),
            refreshes: self.refreshes.load(Ordering::Relaxed),
            files,
            inodes,
            remote,
            warm_up: self.warm_up.load(Ordering::Relaxed),
            ops: std::array::from_fn(|i| self.ops[i].load(Ordering::Relaxed)),
        }
    }
}

/// One reading of every counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Read requests served (datasets and sidecar views).
    pub read_requests: u64,
    /// Bytes answered to them.
    pub read_bytes: u64,
    /// Largest size the kernel asked for in one request.
    pub read_max_request: u64,
    pub cache: CacheStats,
    pub cache_capacity: u64,
    pub prefetch: PrefetchStats,
    /// What the daemon set the mount's `read_ahead_kb` to; 0 if it could not.
    pub readahead_kb: u64,
    /// New states of the file served since the mount (`--refresh`).
    pub refreshes: u64,
    /// The resolver's counters.
    pub files: ResolverStats,
    /// Inodes the kernel holds now (sidecars included): what the daemon keeps for them
    /// follows this (see `super::inode`).
    pub inodes: u64,
    /// Requests of the mount's remote objects (zeros for a local source).
    pub remote: RequestCounts,
    /// The background listing of a remote file's root after the mount: 0 none (a local
    /// source, `--no-warm-up`), 1 running, 2 done.
    pub warm_up: u64,
    /// FUSE requests by kind, indexed by [`Op`].
    pub ops: [u64; OPS.len()],
}

impl Snapshot {
    /// `key value` lines, one per counter, in a fixed order.
    pub fn render(&self) -> String {
        let values = [
            self.read_requests,
            self.read_bytes,
            self.read_max_request,
            self.cache.hits,
            self.cache.misses,
            self.cache.evictions,
            self.cache.entries,
            self.cache.bytes,
            self.cache_capacity,
            self.prefetch.jobs,
            self.prefetch.dropped,
            self.prefetch.bytes,
            self.prefetch.walk_steps,
            self.prefetch.walk_done,
            self.readahead_kb,
            self.refreshes,
            self.files.known,
            self.files.open,
            self.files.opens,
            self.files.evictions,
            self.inodes,
            self.remote.heads,
            self.remote.gets,
            self.remote.bytes,
            self.remote.failures,
            self.remote.changed,
            self.remote.lists,
            self.remote.merged,
            self.remote.readahead,
            self.remote.sent,
            self.remote.retries,
            self.remote.p50_us,
            self.remote.p99_us,
            self.warm_up,
        ];
        let values = values.iter().chain(&self.ops);
        let mut out = String::new();
        for (k, v) in KEYS.iter().zip(values) {
            // Writing to a String cannot fail.
            let _ = writeln!(out, "{k} {v}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_renders() {
        let s = Stats::default();
        s.on_read(4096, 4096);
        s.on_read(1 << 20, 1000);
        s.on_read(8192, 0);
        s.set_readahead_kb(1024);
        s.set_warm_up(2);
        s.on_refresh();
        s.on_op(Op::Lookup, 1);
        s.on_op(Op::Lookup, 1);
        s.on_op(Op::Forget, 7);
        s.on_op(Op::Other, 1);
        let cache = CacheStats {
            hits: 5,
            misses: 2,
            evictions: 1,
            bytes: 300,
            entries: 1,
        };
        let pf = PrefetchStats {
            jobs: 3,
            dropped: 0,
            bytes: 77,
            walk_steps: 4,
            walk_done: 2,
        };
        let files = ResolverStats {
            known: 4,
            open: 2,
            opens: 5,
            evictions: 3,
        };
        let remote = RequestCounts {
            heads: 1,
            gets: 2,
            bytes: 3,
            failures: 4,
            changed: 5,
            lists: 6,
            merged: 7,
            readahead: 8,
            sent: 9,
            retries: 10,
            p50_us: 11,
            p99_us: 12,
        };
        let text = s.snapshot(cache, 1 << 30, pf, files, remote, 42).render();
        let full = Stats::default();
        full.on_read(u32::MAX, usize::MAX);
        full.on_read(u32::MAX, usize::MAX);
        full.set_readahead_kb(u64::MAX);
        full.set_warm_up(u64::MAX);
        full.refreshes.store(u64::MAX, Ordering::Relaxed);
        for op in OPS {
            full.on_op(op, u64::MAX);
        }
        let max = CacheStats {
            hits: u64::MAX,
            misses: u64::MAX,
            evictions: u64::MAX,
            bytes: u64::MAX,
            entries: u64::MAX,
        };
        let pmax = PrefetchStats {
            jobs: u64::MAX,
            dropped: u64::MAX,
            bytes: u64::MAX,
            walk_steps: u64::MAX,
            walk_done: u64::MAX,
        };
        let fmax = ResolverStats {
            known: u64::MAX,
            open: u64::MAX,
            opens: u64::MAX,
            evictions: u64::MAX,
        };
        let rmax = RequestCounts {
            heads: u64::MAX,
            gets: u64::MAX,
            bytes: u64::MAX,
            failures: u64::MAX,
            changed: u64::MAX,
            lists: u64::MAX,
            merged: u64::MAX,
            readahead: u64::MAX,
            sent: u64::MAX,
            retries: u64::MAX,
            p50_us: u64::MAX,
            p99_us: u64::MAX,
        };
        let long = full
            .snapshot(max, u64::MAX, pmax, fmax, rmax, u64::MAX)
            .render();
        assert!(long.len() <= max_text_len() && long.len() > KEYS.len() * 20);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "read_requests 3",
                "read_bytes 5096",
                "read_max_request 1048576",
                "cache_hits 5",
                "cache_misses 2",
                "cache_evictions 1",
                "cache_entries 1",
                "cache_bytes 300",
                "cache_capacity 1073741824",
                "prefetch_jobs 3",
                "prefetch_dropped 0",
                "prefetch_bytes 77",
                "prefetch_walk_steps 4",
                "prefetch_walk_done 2",
                "readahead_kb 1024",
                "refreshes 1",
                "files_known 4",
                "files_open 2",
                "files_opened 5",
                "files_evicted 3",
                "inodes 42",
                "remote_heads 1",
                "remote_gets 2",
                "remote_bytes 3",
                "remote_failures 4",
                "remote_changed 5",
                "remote_lists 6",
                "remote_merged 7",
                "remote_readahead 8",
                "remote_sent 9",
                "remote_retries 10",
                "remote_p50_us 11",
                "remote_p99_us 12",
                "remote_warm_up 2",
                "op_lookup 2",
                "op_forget 7",
                "op_getattr 0",
                "op_readlink 0",
                "op_open 0",
                "op_release 0",
                "op_flush 0",
                "op_opendir 0",
                "op_readdir 0",
                "op_readdirplus 0",
                "op_releasedir 0",
                "op_getxattr 0",
                "op_listxattr 0",
                "op_access 0",
                "op_statfs 0",
                "op_other 1",
            ]
        );
    }
}
