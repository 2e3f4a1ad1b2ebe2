//! The HDF5 files a mount serves: the mounted file and the files its external links lead to.
//!
//! An external link names a file and an object path in it. The file name is resolved the way
//! libhdf5 resolves it by default: a relative name against the directory of the file that
//! holds the link (so a chain of external links walks from file to file), an absolute name as
//! it is. Unless the mount allows outside paths (`-o allow_external_paths`), the resolved path
//! must stay inside the mounted file's directory tree, judged on the path's text after `.`
//! and `..` are folded; a file from elsewhere must not make the mount show arbitrary host
//! files.
//!
//! Files are opened on first use, once per canonical path (a link back to the mounted file is
//! the mounted file), and kept for the mount; at most [`MAX_FILES`] are open. They share the
//! mounted file's chunk cache, so the cache budget holds for the whole mount. A name that
//! could not be opened is remembered with its reason, so a listing does not retry it.
//!
//! Files are numbered by [`FileIdx`]; the mounted file is [`MAIN`].

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::model::{File, OpenOptions};

/// Index of a file of the mount.
pub type FileIdx = u32;

/// The mounted file.
pub const MAIN: FileIdx = 0;

/// Most files open at once (the mounted file included): each holds a descriptor and caches,
/// and the chunk-cache tag is one byte.
pub const MAX_FILES: usize = 64;

#[derive(Debug, Default)]
struct Inner {
    files: Vec<Arc<File>>,
    /// Outcome of opening each resolved path: the file's index, or why it is not shown.
    by_path: HashMap<PathBuf, Result<FileIdx, String>>,
}

/// The files of a mount.
#[derive(Debug)]
pub struct Files {
    /// Directory of the mounted file, with `.` and `..` folded (absolute when it could be
    /// made so).
    root_dir: PathBuf,
    /// The same, with symlinks resolved (what a file's canonical path must lie under).
    root_canon: PathBuf,
    options: OpenOptions,
    inner: RwLock<Inner>,
}

/// Fold `.` and `..` out of a path by its text (a `..` at the root stays at the root).
pub fn fold(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() && !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Files {
    /// The files of a mount of `main`, opening others with `options` (whose
    /// `allow_outside_paths` is the policy above).
    pub fn new(main: Arc<File>, options: OpenOptions) -> Files {
        let root_dir = fold(&absolute(&main.dir()));
        let mut inner = Inner::default();
        let key =
            std::fs::canonicalize(main.path()).unwrap_or_else(|_| fold(&absolute(main.path())));
        inner.by_path.insert(key, Ok(MAIN));
        inner.files.push(main);
        let root_canon = std::fs::canonicalize(&root_dir).unwrap_or_else(|_| root_dir.clone());
        Files {
            root_dir,
            root_canon,
            options,
            inner: RwLock::new(inner),
        }
    }

    /// The mounted file.
    pub fn main(&self) -> Arc<File> {
        self.get(MAIN).expect("the mounted file is always present")
    }

    /// File `idx`, if it was opened.
    pub fn get(&self, idx: FileIdx) -> Option<Arc<File>> {
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        inner.files.get(idx as usize).cloned()
    }

    /// Number of files open.
    pub fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .files
            .len()
    }

    /// Always false: the mounted file is always there.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Swap in a new handle on the mounted file (same path, re-read).
    pub fn replace_main(&self, file: Arc<File>) {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = inner.files.first_mut() {
            *slot = file;
        }
    }

    /// Where the external file `name`, named by a link in file `from`, lives; `Err` with the
    /// reason when it must not be followed.
    pub fn resolve_name(&self, from: FileIdx, name: &str) -> Result<PathBuf, String> {
        if name.is_empty() {
            return Err("empty file name".into());
        }
        let dir = match self.get(from) {
            Some(f) => fold(&absolute(&f.dir())),
            None => return Err("unknown file".into()),
        };
        let path = fold(&dir.join(name));
        if !self.options.allow_outside_paths && !path.starts_with(&self.root_dir) {
            return Err(format!(
                "{} lies outside the mounted file's directory \
                 (mount option allow_external_paths follows it)",
                path.display()
            ));
        }
        Ok(path)
    }

    /// The index of the external file `name`, named by a link in file `from`, opened on first
    /// use; `Err` with the reason when it is refused, missing or not readable HDF5.
    pub fn open(&self, from: FileIdx, name: &str) -> Result<FileIdx, String> {
        let path = self.resolve_name(from, name)?;
        {
            let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
            if let Some(r) = inner.by_path.get(&path) {
                return r.clone();
            }
        }
        // Canonical form: the same file reached by two spellings (or a symlink) is one file.
        let canon = match std::fs::canonicalize(&path) {
            Ok(c) => c,
            Err(e) => {
                let why = format!("{}: {e}", path.display());
                return self.remember(path, Err(why));
            }
        };
        // A symlink on disk may lead elsewhere: the canonical path must stay inside too.
        if !self.options.allow_outside_paths && !canon.starts_with(&self.root_canon) {
            let why = format!(
                "{} resolves to {}, outside the mounted file's directory",
                path.display(),
                canon.display()
            );
            return self.remember(path, Err(why));
        }
        let main = self.main();
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = inner.by_path.get(&canon) {
            let r = r.clone();
            inner.by_path.insert(path, r.clone());
            return r;
        }
        let idx = inner.files.len();
        let result = if idx >= MAX_FILES {
            Err(format!(
                "{}: more than {MAX_FILES} files open in this mount",
                path.display()
            ))
        } else {
            match File::open_sharing_cache(&canon, &self.options, main.chunk_cache().clone()) {
                Ok(f) => {
                    inner.files.push(f);
                    Ok(idx as FileIdx)
                }
                Err(e) => Err(format!("{}: {e}", path.display())),
            }
        };
        inner.by_path.insert(canon, result.clone());
        inner.by_path.insert(path, result.clone());
        result
    }

    fn remember(&self, path: PathBuf, r: Result<FileIdx, String>) -> Result<FileIdx, String> {
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        inner.by_path.insert(path, r.clone());
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_removes_dots() {
        assert_eq!(fold(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(fold(Path::new("/a/../../c")), PathBuf::from("/c"));
        assert_eq!(fold(Path::new("a/../../c")), PathBuf::from("../c"));
    }
}
