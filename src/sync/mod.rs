//! Locks, and loads that many threads wait for.
//!
//! The one rule for locks: a lock whose holder panicked (poisoned) is taken anyway. Every
//! structure behind a lock here is a cache or a table that stays valid after any panic (a
//! panic inside a read is contained to that request, see `fs`), so the data are used as
//! they are rather than failing every later request of the mount. Every lock of the crate
//! is taken through [`lock`], [`try_lock`], [`read`], [`write`] and [`wait`].
//!
//! The one single-flight loader of the caches is [`flight`].

pub(crate) mod flight;

use std::sync::{
    Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

/// Lock `m`, recovering it if a panicking holder poisoned it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Lock `m` if no one holds it (`None` if someone does), recovering it if a panicking
/// holder poisoned it.
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// Read-lock `l`, recovering it if a panicking holder poisoned it.
pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-lock `l`, recovering it if a panicking holder poisoned it.
pub(crate) fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

/// Wait on `cv` with `guard` (see [`Condvar::wait`]), recovering the lock if a panicking
/// holder poisoned it meanwhile.
pub(crate) fn wait<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

/// Wait on `cv` with `guard` while `condition` holds, `timeout` at most (see
/// [`Condvar::wait_timeout_while`]), recovering the lock if a panicking holder poisoned it
/// meanwhile.
pub(crate) fn wait_timeout_while<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: std::time::Duration,
    condition: impl FnMut(&mut T) -> bool,
) -> MutexGuard<'a, T> {
    cv.wait_timeout_while(guard, timeout, condition)
        .unwrap_or_else(PoisonError::into_inner)
        .0
}
