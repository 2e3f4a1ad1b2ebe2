//! A read-only memory mapping of a file, unmapped on drop: for tests that read a mounted file
//! through page faults (the kernel's `mmap` path of FUSE) rather than `read`.

use std::ffi::c_void;
use std::ptr::NonNull;

use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};

/// `len` bytes of a file from `offset`, mapped read-only.
pub struct Mapping {
    addr: NonNull<c_void>,
    len: usize,
}

impl Mapping {
    /// Map `len` (> 0) bytes of `f` from `offset` (a multiple of the page size), shared
    /// (`MAP_SHARED`: the page cache's pages) or private.
    pub fn new(f: &std::fs::File, offset: i64, len: usize, shared: bool) -> nix::Result<Mapping> {
        let nz = std::num::NonZeroUsize::new(len).ok_or(nix::errno::Errno::EINVAL)?;
        let flags = if shared {
            MapFlags::MAP_SHARED
        } else {
            MapFlags::MAP_PRIVATE
        };
        // SAFETY: a fresh read-only mapping at an address the kernel picks, so it aliases no
        // Rust object; the tests map files of read-only mounts, which nobody writes, and
        // `bytes` hands out slices that borrow `self`, so none outlives the munmap in drop.
        let addr = unsafe { mmap(None, nz, ProtFlags::PROT_READ, flags, f, offset)? };
        Ok(Mapping { addr, len })
    }

    /// Map the first `len` (> 0) bytes of the file at `path`.
    pub fn of(path: &std::path::Path, len: usize, shared: bool) -> nix::Result<Mapping> {
        let f = std::fs::File::open(path)
            .map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(nix::libc::EIO)))?;
        Mapping::new(&f, 0, len, shared)
    }

    /// The mapped bytes (reading them faults the pages in).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `addr` maps `len` readable bytes until drop; the borrow ties the slice to
        // `self`.
        unsafe { std::slice::from_raw_parts(self.addr.as_ptr().cast::<u8>(), self.len) }
    }

    /// The mapping's start, for `madvise` or `mlock` of exactly the mapped length.
    pub fn addr(&self) -> NonNull<c_void> {
        self.addr
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no slice of it outlives `self`.
        let _ = unsafe { munmap(self.addr, self.len) };
    }
}
