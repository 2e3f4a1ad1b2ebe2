//! The one rule for locks: a lock whose holder panicked (poisoned) is taken anyway.
//!
//! Every structure behind a lock here is a cache or a table that stays valid after any
//! panic (a panic inside a read is contained to that request, see `fs`), so the data are
//! used as they are rather than failing every later request of the mount.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Lock `m`, recovering it if a panicking holder poisoned it.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-lock `l`, recovering it if a panicking holder poisoned it.
pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-lock `l`, recovering it if a panicking holder poisoned it.
pub(crate) fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}
