//! Which FUSE thread waits for the next request: the one that answered last, while
//! requests are quick.
//!
//! fuser runs several session loops (threads), each reading requests from the kernel in
//! turn. The kernel hands each request to the thread that has waited longest, so a serial
//! reader (a `find` or an `ls -lR`: one request, wait for the answer, the next request)
//! has its requests served by every thread in rotation: each answer wakes a thread that
//! has been asleep longest, whose caches are cold and which the scheduler may have moved
//! to another core. Most requests of a walk are answered from memory in microseconds, so
//! that rotation is a good part of their cost: measured on a `find` of 10,000 directories
//! in a directory mount, one thread cost about a fifth less CPU than four.
//!
//! The gate keeps one thread waiting in the kernel while the others are idle, and parks the
//! rest in the daemon. A thread that has answered a request parks when another thread
//! already waits in the kernel; otherwise it goes back to wait there itself. A request that
//! may take long (a read, a parse, anything not answered from what is in memory) first
//! wakes a parked thread to wait in the kernel in its place, so a slow request never holds
//! up the next one: as many requests run at once as before. A quick request wakes no one:
//! the thread that took it answers and goes back to wait, and the next quick request comes
//! to the same thread.
//!
//! A parked thread goes back to wait in the kernel on its own after [`PARK_LIMIT`]: the
//! session loops end when the kernel ends the session (an unmount), which only a thread
//! waiting in the kernel learns, and fuser joins every thread before the daemon can exit,
//! so a parked thread delays the end of an unmount by up to that long. An idle mount soon
//! has every thread waiting in the kernel, as without the gate, and no thread wakes
//! periodically. During a walk, a thread coming back takes over as the one that waits (the
//! kernel hands the next request to the thread that has waited longest, and the one that
//! answers it then parks): one change of thread per limit, against thousands of requests.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::sync::lock;

/// Longest a thread stays parked before it goes back to wait in the kernel.
pub const PARK_LIMIT: Duration = Duration::from_millis(10);

#[derive(Debug)]
struct State {
    /// Threads waiting in the kernel for a request, or on their way there.
    waiting: usize,
    /// Threads parked in [`Gate::depart`].
    parked: usize,
    /// Parked threads asked to go back to the kernel and not gone yet.
    called: usize,
}

/// The gate of one session (see the module doc).
#[derive(Debug)]
pub struct Gate {
    state: Mutex<State>,
    bell: Condvar,
}

/// A thread's turn with one request: on drop, after the answer is sent, the thread parks
/// or goes back to wait in the kernel.
#[must_use]
pub struct Turn<'a> {
    gate: &'a Gate,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.gate.depart();
    }
}

impl Gate {
    /// The gate of a session whose `threads` threads all start waiting in the kernel.
    pub fn new(threads: usize) -> Gate {
        Gate {
            state: Mutex::new(State {
                waiting: threads,
                parked: 0,
                called: 0,
            }),
            bell: Condvar::new(),
        }
    }

    /// A request came to this thread; `quick`: it is answered from memory. A request that
    /// is not first makes sure another thread waits in the kernel for the next one.
    pub fn arrive(&self, quick: bool) -> Turn<'_> {
        let mut st = lock(&self.state);
        st.waiting = st.waiting.saturating_sub(1);
        if !quick {
            Self::call_one(&mut st, &self.bell);
        }
        Turn { gate: self }
    }

    /// The request turned out to take long after all: as [`Gate::arrive`] with `quick` false.
    pub fn slow(&self) {
        let mut st = lock(&self.state);
        Self::call_one(&mut st, &self.bell);
    }

    /// With no thread waiting in the kernel, send a parked one there.
    fn call_one(st: &mut State, bell: &Condvar) {
        if st.waiting == 0 && st.parked > st.called {
            st.called += 1;
            st.waiting += 1;
            bell.notify_one();
        }
    }

    /// The answer is sent: park while another thread waits in the kernel, else go back to
    /// wait there.
    fn depart(&self) {
        let mut st = lock(&self.state);
        if st.waiting == 0 {
            st.waiting += 1;
            return;
        }
        st.parked += 1;
        let mut left = PARK_LIMIT;
        loop {
            let start = std::time::Instant::now();
            let (next, timeout) = match self.bell.wait_timeout(st, left) {
                Ok(r) => r,
                Err(poisoned) => poisoned.into_inner(),
            };
            st = next;
            if st.called > 0 {
                // Called: `call_one` counted it as waiting already.
                st.called -= 1;
                st.parked -= 1;
                return;
            }
            left = left.saturating_sub(start.elapsed());
            if timeout.timed_out() || left.is_zero() {
                st.parked -= 1;
                st.waiting += 1;
                return;
            }
        }
    }

    /// Threads waiting in the kernel and parked (for tests and statistics).
    pub fn counts(&self) -> (usize, usize) {
        let st = lock(&self.state);
        (st.waiting, st.parked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Instant;

    fn until(what: &str, mut cond: impl FnMut() -> bool) {
        let end = Instant::now() + Duration::from_secs(30);
        while !cond() {
            assert!(Instant::now() < end, "timed out waiting for {what}");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_quick_request_leaves_one_thread_waiting_and_parks_the_one_that_answered() {
        let g = Gate::new(2);
        // Two threads wait; one takes a quick request and parks after answering, since the
        // other still waits.
        std::thread::scope(|s| {
            s.spawn(|| {
                let t = g.arrive(true);
                assert_eq!(g.counts(), (1, 0));
                drop(t);
            });
            until("the thread to park", || g.counts() == (1, 1));
            // The waiting thread takes a quick request: no one is called, it answers and,
            // being the only one, goes back to the kernel itself.
            let t = g.arrive(true);
            assert_eq!(g.counts(), (0, 1));
            drop(t);
            assert_eq!(g.counts(), (1, 1));
            // A slow request calls the parked one to wait in its place.
            let t = g.arrive(false);
            until("the parked thread to leave", || g.counts() == (1, 0));
            drop(t);
            // Now this one parks in turn; it comes back by itself after the limit.
            assert_eq!(g.counts(), (2, 0));
        });
    }

    #[test]
    fn parked_threads_go_back_to_the_kernel_on_their_own() {
        let g = Gate::new(2);
        let start = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| drop(g.arrive(true)));
        });
        // The parked thread returned by itself (the scope joined it), after the limit.
        assert!(start.elapsed() >= PARK_LIMIT);
        assert_eq!(g.counts(), (2, 0));
    }

    /// Many threads and requests: every request is served (a thread parked while requests
    /// wait would stall them) and the counts end where they started.
    #[test]
    fn counts_stay_consistent_under_load() {
        let threads = 4;
        let g = Arc::new(Gate::new(threads));
        let served = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::sync_channel::<bool>(0);
        let rx = Arc::new(Mutex::new(rx));
        std::thread::scope(|s| {
            for _ in 0..threads {
                let (g, rx, served) = (g.clone(), rx.clone(), served.clone());
                s.spawn(move || loop {
                    // "The kernel": a rendezvous channel hands each request to one thread.
                    let Ok(quick) = lock(&rx).recv() else { return };
                    let t = g.arrive(quick);
                    if !quick {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    served.fetch_add(1, Ordering::Relaxed);
                    drop(t);
                });
            }
            for i in 0..2000 {
                tx.send(i % 7 != 0).unwrap();
            }
            drop(tx);
        });
        assert_eq!(served.load(Ordering::Relaxed), 2000);
        let (w, p) = g.counts();
        assert_eq!((w, p), (threads, 0));
    }
}
