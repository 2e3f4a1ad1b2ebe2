//! Which requests the core answers from memory, without a parse or a read: what the FUSE
//! adapter tells its thread gate (`super::gate`), so that only requests that may take long
//! call another thread to wait for the next request.
//!
//! The answers are cautious: `false` costs one thread wake-up, `true` for a request that
//! then reads holds up the next request until it is answered.

use super::{views, xattr, H5Fs};
use crate::sync::lock;

/// Most entries a `readdirplus` answered from memory may still have to send (a longer
/// answer is work of its own).
const QUICK_ENTRIES: usize = 64;

impl H5Fs {
    /// Whether `getattr(ino)` is answered from memory: of a known inode of a local mount,
    /// whose attributes come from the model's caches or a `stat` of a host file (with
    /// refresh on, only the attributes already shown); never on a remote source, where a
    /// header evicted from its cache costs a round trip.
    pub fn attr_in_memory(&self, ino: u64) -> bool {
        if self.zarr().is_some() || views::is_sidecar(ino) {
            return false;
        }
        if self.opts.refresh.is_some() {
            return lock(&self.shown).contains_key(&ino);
        }
        !self.remote && self.inodes.get(ino).is_some()
    }

    /// Whether a `readdir` (`plus`: `readdirplus`) of `ino` from `offset` on is answered
    /// from memory: the listing is built and, for `readdirplus`, the attributes of the
    /// (few) entries left are known.
    pub fn listing_in_memory(&self, ino: u64, offset: u64, plus: bool) -> bool {
        if self.zarr().is_some() {
            return false;
        }
        let Some(listing) = self.cached_listing(ino) else {
            return false;
        };
        if !plus {
            return true;
        }
        let mut left = listing.from_offset(offset);
        (&mut left)
            .take(QUICK_ENTRIES)
            .all(|(_, e)| e.name == "." || e.name == ".." || self.attr_in_memory(e.ino))
            && left.next().is_none()
    }

    /// Whether `lookup(parent, name)` is answered from memory: the parent's listing is built
    /// and the entry's attributes are known (or it is not there).
    pub fn lookup_in_memory(&self, parent: u64, name: &std::ffi::OsStr) -> bool {
        if self.zarr().is_some() {
            return false;
        }
        let Some(listing) = self.cached_listing(parent) else {
            return false;
        };
        match name.to_str().and_then(|n| listing.find(n)) {
            Some(e) => self.attr_in_memory(e.ino),
            None => true,
        }
    }

    /// Whether `getxattr` of `name` is answered from memory: names outside the user
    /// namespace (the security and ACL names `ls -l` asks for) have no value here.
    pub fn xattr_in_memory(name: &std::ffi::OsStr) -> bool {
        !name.to_str().is_some_and(|n| n.starts_with(xattr::USER))
    }
}
