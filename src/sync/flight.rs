//! Single flight: a load runs once however many callers miss the same key at the same
//! time, and every one of them gets its outcome. The chunk cache and the page cache both
//! load through it.
//!
//! Mechanism. A cache keeps a [`Flights`] table beside its entries, under its own lock, so
//! that one look under that lock tells a cached entry, a load in flight and a miss apart.
//! A miss either joins the flight of its key ([`Flights::join`]) and waits for it to land
//! ([`Flight::wait`]), or starts one ([`Flights::start`]) and runs the load itself, outside
//! the cache's lock: one loader per key. When the load ends, the loader takes its flight
//! out of the table ([`Flights::take`], under the cache's lock, where the cache also keeps
//! what was loaded) and lands it ([`Flight::land`]) once the lock is released: every waiter
//! wakes with a copy of the outcome.
//!
//! Errors. A flight lands once, and its first outcome is the one every waiter gets: a later
//! landing is ignored. Each waiter gets a clone of the loader's error, so the error type is
//! `Clone`: the crate's own error keeps its I/O error shared, and a bare I/O error, which is
//! not `Clone`, travels as a [`SharedIo`], from which each waiter gets an error of the same
//! [`std::io::ErrorKind`] and message, with the loader's error (shared) inside it. The layers above
//! decide by kind (a changed remote object is `StaleNetworkFileHandle`), so a waiter must
//! never see a generic error where the loader saw a typed one.
//!
//! Panics. A loader runs under [`on_panic`]: should it unwind, its flights are taken and
//! landed with an error before the panic goes on, so a waiter never hangs on a load that
//! will not end. The table itself caches nothing: once a flight is taken out, the next miss
//! of its key starts a new one, whatever its outcome (a cache may hold an error on its own
//! for a while, as the page cache does).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Condvar, Mutex};

use super::{lock, wait};

/// One load in flight: its waiters block until the loader lands its outcome.
pub(crate) struct Flight<T, E> {
    outcome: Mutex<Option<Result<T, E>>>,
    landed: Condvar,
}

impl<T: Clone, E: Clone> Flight<T, E> {
    fn new() -> Flight<T, E> {
        Flight {
            outcome: Mutex::new(None),
            landed: Condvar::new(),
        }
    }

    /// End the flight with `outcome` and wake its waiters; false (and `outcome` dropped) if
    /// it had landed already: the first outcome stays.
    pub(crate) fn land(&self, outcome: Result<T, E>) -> bool {
        {
            let mut slot = lock(&self.outcome);
            if slot.is_some() {
                return false;
            }
            *slot = Some(outcome);
        }
        self.landed.notify_all();
        true
    }

    /// Block until the flight lands; a copy of its outcome.
    pub(crate) fn wait(&self) -> Result<T, E> {
        let mut slot = lock(&self.outcome);
        loop {
            if let Some(outcome) = slot.as_ref() {
                return outcome.clone();
            }
            slot = wait(&self.landed, slot);
        }
    }
}

impl<T, E> std::fmt::Debug for Flight<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let landed = lock(&self.outcome).is_some();
        f.debug_struct("Flight").field("landed", &landed).finish()
    }
}

/// What a miss is to do ([`Flights::join_or_start`]).
pub(crate) enum Role<T, E> {
    /// Run the load, then take and land the flight.
    Loader,
    /// Wait for this flight.
    Waiter(Arc<Flight<T, E>>),
}

/// The loads in flight of a cache, by key; kept in the cache's state, under its lock.
#[derive(Debug)]
pub(crate) struct Flights<K, T, E> {
    flying: HashMap<K, Arc<Flight<T, E>>>,
    /// Test hook: told the key of each miss that joins a flight, once it holds the flight
    /// (from then on it gets that flight's outcome).
    #[cfg(test)]
    joins: Option<std::sync::mpsc::Sender<K>>,
}

impl<K: Copy + Eq + Hash, T: Clone, E: Clone> Flights<K, T, E> {
    pub(crate) fn new() -> Flights<K, T, E> {
        Flights {
            flying: HashMap::new(),
            #[cfg(test)]
            joins: None,
        }
    }

    /// The flight of `k` if one is in flight, to wait for.
    pub(crate) fn join(&self, k: K) -> Option<Arc<Flight<T, E>>> {
        let flight = self.flying.get(&k)?.clone();
        #[cfg(test)]
        if let Some(tx) = &self.joins {
            let _ = tx.send(k);
        }
        Some(flight)
    }

    /// Start a flight for `k` unless one is in flight; true if started (the caller is its
    /// loader and must take and land it, also when it panics: see [`on_panic`]).
    pub(crate) fn start(&mut self, k: K) -> bool {
        if self.flying.contains_key(&k) {
            return false;
        }
        self.flying.insert(k, Arc::new(Flight::new()));
        true
    }

    /// Join the flight of `k`, or start one.
    pub(crate) fn join_or_start(&mut self, k: K) -> Role<T, E> {
        match self.join(k) {
            Some(flight) => Role::Waiter(flight),
            None => {
                self.start(k);
                Role::Loader
            }
        }
    }

    /// Whether `k` is in flight.
    pub(crate) fn contains(&self, k: K) -> bool {
        self.flying.contains_key(&k)
    }

    /// The flight of `k`, out of the table: to be landed by its loader, best once the
    /// cache's lock is released (waiters woken under it would only wait for it again).
    pub(crate) fn take(&mut self, k: K) -> Option<Arc<Flight<T, E>>> {
        self.flying.remove(&k)
    }

    /// The keys in flight.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.flying.keys()
    }

    /// The keys of the misses that join a flight, as they join.
    #[cfg(test)]
    pub(crate) fn watch_joins(&mut self) -> std::sync::mpsc::Receiver<K> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.joins = Some(tx);
        rx
    }
}

/// Run the load `load`; should it panic, `crashed` runs before the panic goes on, to take
/// and land the loader's flights with an error (so that no waiter hangs).
pub(crate) fn on_panic<R>(load: impl FnOnce() -> R, crashed: impl FnOnce()) -> R {
    struct Unwinding<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Unwinding<F> {
        fn drop(&mut self) {
            if let Some(crashed) = self.0.take() {
                crashed();
            }
        }
    }
    let mut guard = Unwinding(Some(crashed));
    let r = load();
    guard.0 = None;
    r
}

/// An I/O error as a flight hands it to each waiter: [`SharedIo::to_io`] makes an error of
/// its kind and message, with the original error (shared) inside it.
#[derive(Clone, Debug)]
pub(crate) struct SharedIo {
    kind: std::io::ErrorKind,
    error: Arc<std::io::Error>,
}

impl SharedIo {
    /// `error`, shared under its own kind.
    pub(crate) fn new(error: std::io::Error) -> SharedIo {
        SharedIo::with_kind(error.kind(), error)
    }

    /// `error`, shared under `kind` instead of its own (its message unchanged).
    pub(crate) fn with_kind(kind: std::io::ErrorKind, error: std::io::Error) -> SharedIo {
        SharedIo {
            kind,
            error: Arc::new(error),
        }
    }

    /// An error for one waiter: the kind, the message, the shared original behind it.
    pub(crate) fn to_io(&self) -> std::io::Error {
        std::io::Error::new(self.kind, self.error.clone())
    }
}

impl std::fmt::Display for SharedIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Barrier};
    use std::time::Duration;

    /// How long a loader waits for the misses that must join it, and the test for a
    /// released waiter: a bound only a broken flight (or a stalled machine) reaches.
    const BOUND: Duration = Duration::from_secs(30);

    type Table = Mutex<Flights<u32, u64, SharedIo>>;

    /// A cache's miss of `k`, as the caches do it: wait for the flight of `k`, or run
    /// `load` as its loader and land its outcome.
    fn lookup(
        table: &Table,
        k: u32,
        load: impl FnOnce() -> Result<u64, SharedIo>,
    ) -> Result<u64, SharedIo> {
        let role = lock(table).join_or_start(k);
        match role {
            Role::Waiter(flight) => flight.wait(),
            Role::Loader => {
                let outcome = on_panic(load, || {
                    if let Some(f) = lock(table).take(k) {
                        f.land(Err(SharedIo::new(std::io::Error::other(
                            "the loader panicked",
                        ))));
                    }
                });
                if let Some(f) = lock(table).take(k) {
                    f.land(outcome.clone());
                }
                outcome
            }
        }
    }

    /// Called by a loader: block until `n` misses of `k` joined its flight, so that none of
    /// them can come after it landed, however the threads are scheduled.
    fn wait_for_joins(joins: &Mutex<mpsc::Receiver<u32>>, k: u32, n: usize) {
        let rx = lock(joins);
        for i in 0..n {
            match rx.recv_timeout(BOUND) {
                Ok(j) => assert_eq!(j, k, "a miss of another key joined"),
                Err(e) => panic!("{i} of {n} misses joined the flight of {k}: {e}"),
            }
        }
    }

    /// `n` threads miss `k` at once; the one that loads runs `load` once the others joined.
    fn contend(
        table: &Arc<Table>,
        k: u32,
        n: usize,
        load: fn() -> Result<u64, SharedIo>,
    ) -> (usize, Vec<Result<u64, SharedIo>>) {
        let joins = Arc::new(Mutex::new(lock(table).watch_joins()));
        let loads = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(Barrier::new(n));
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let (table, joins, loads, barrier) =
                    (table.clone(), joins.clone(), loads.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    lookup(&table, k, || {
                        loads.fetch_add(1, Ordering::SeqCst);
                        wait_for_joins(&joins, k, n - 1);
                        load()
                    })
                })
            })
            .collect();
        let results = threads.into_iter().map(|t| t.join().unwrap()).collect();
        (loads.load(Ordering::SeqCst), results)
    }

    #[test]
    fn one_load_under_contention() {
        let table = Arc::new(Mutex::new(Flights::new()));
        let (loads, results) = contend(&table, 7, 8, || Ok(42));
        assert_eq!(loads, 1);
        assert!(results.iter().all(|r| matches!(r, Ok(42))), "{results:?}");
        assert!(!lock(&table).contains(7));
    }

    #[test]
    fn waiters_get_the_first_errors_kind_and_message_and_it_is_not_kept() {
        let table = Arc::new(Mutex::new(Flights::new()));
        let (loads, results) = contend(&table, 3, 4, || {
            Err(SharedIo::new(std::io::Error::new(
                ErrorKind::StaleNetworkFileHandle,
                "the object changed",
            )))
        });
        assert_eq!(loads, 1);
        let mut inner = Vec::new();
        for r in &results {
            let e = r.as_ref().expect_err("the loader's error").to_io();
            assert_eq!(e.kind(), ErrorKind::StaleNetworkFileHandle);
            assert_eq!(e.to_string(), "the object changed");
            let shared = e
                .get_ref()
                .and_then(|i| i.downcast_ref::<Arc<std::io::Error>>());
            inner.push(shared.expect("the loader's error inside").clone());
        }
        assert!(inner.iter().all(|i| Arc::ptr_eq(i, &inner[0])));
        // Not kept: the next miss loads.
        assert!(matches!(lookup(&table, 3, || Ok(5)), Ok(5)));
    }

    #[test]
    fn a_flight_lands_once() {
        let mut table: Flights<u32, u64, SharedIo> = Flights::new();
        assert!(table.start(1));
        assert!(!table.start(1), "one loader per key");
        let flight = table.join(1).expect("in flight");
        assert!(flight.land(Err(SharedIo::with_kind(
            ErrorKind::TimedOut,
            std::io::Error::other("no answer")
        ))));
        assert!(!flight.land(Ok(1)), "a second landing");
        let e = flight.wait().expect_err("the first outcome stays").to_io();
        assert_eq!(
            (e.kind(), e.to_string()),
            (ErrorKind::TimedOut, "no answer".into())
        );
    }

    #[test]
    fn a_panicking_loader_releases_its_waiters() {
        let table = Arc::new(Mutex::new(Flights::new()));
        let joins = Mutex::new(lock(&table).watch_joins());
        let (started_tx, started) = mpsc::channel();
        let t = table.clone();
        let loader = std::thread::spawn(move || {
            lookup(&t, 2, move || {
                started_tx.send(()).unwrap();
                // Panic only once the other miss waits for this flight.
                wait_for_joins(&joins, 2, 1);
                panic!("loader bug")
            })
        });
        started
            .recv_timeout(BOUND)
            .expect("the loader did not start");
        // The waiter runs in a thread of its own, so that a waiter never released fails the
        // test instead of hanging it.
        let (done_tx, done) = mpsc::channel();
        let t = table.clone();
        std::thread::spawn(move || {
            let _ = done_tx.send(lookup(&t, 2, || Ok(1)));
        });
        let e = done
            .recv_timeout(BOUND)
            .expect("the waiter was not released")
            .expect_err("the panicked load's error");
        assert!(e.to_string().contains("panicked"), "{e}");
        assert!(loader.join().is_err(), "the loader panicked");
        assert!(!lock(&table).contains(2));
        assert!(matches!(lookup(&table, 2, || Ok(2)), Ok(2)));
    }
}
