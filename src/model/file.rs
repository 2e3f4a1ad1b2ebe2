//! An open HDF5 file: superblock, object header cache, and the entry points of the model API.

use std::path::Path;
use std::sync::Arc;

use super::{Attribute, Dataset, Link, ObjectId, ObjectKind};
use crate::error::{Error, Result};

/// Options for opening a file.
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Bytes of decoded chunks to cache.
    pub cache_bytes: u64,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            cache_bytes: 256 << 20,
        }
    }
}

/// An open HDF5 file. Shared between threads behind an `Arc`.
#[derive(Debug)]
pub struct File {
    root: ObjectId,
}

fn todo_err() -> Error {
    Error::unsupported("model", "not implemented yet")
}

impl File {
    /// Open and parse the superblock and root object header.
    pub fn open(path: &Path, options: &OpenOptions) -> Result<Arc<File>> {
        let _ = (path, options);
        Err(todo_err())
    }

    /// The root group.
    pub fn root(&self) -> ObjectId {
        self.root
    }

    /// What kind of object this is.
    pub fn kind(&self, id: ObjectId) -> Result<ObjectKind> {
        let _ = id;
        Err(todo_err())
    }

    /// Links of a group, sorted by name (byte order, as h5py's default iteration).
    pub fn links(&self, group: ObjectId) -> Result<Vec<Link>> {
        let _ = group;
        Err(todo_err())
    }

    /// One link of a group by name.
    pub fn lookup(&self, group: ObjectId, name: &str) -> Result<Option<Link>> {
        let _ = (group, name);
        Err(todo_err())
    }

    /// Resolve an absolute path (following hard and soft links) to an object.
    pub fn resolve(&self, path: &str) -> Result<ObjectId> {
        let _ = path;
        Err(todo_err())
    }

    /// The dataset at `id` (parsed once, then cached).
    pub fn dataset(&self, id: ObjectId) -> Result<Arc<Dataset>> {
        let _ = id;
        Err(todo_err())
    }

    /// Attributes of any object, in name order.
    pub fn attributes(&self, id: ObjectId) -> Result<Vec<Attribute>> {
        let _ = id;
        Err(todo_err())
    }

    /// Modification time of the object (seconds since the epoch), if stored.
    pub fn mtime(&self, id: ObjectId) -> Result<Option<u64>> {
        let _ = id;
        Err(todo_err())
    }

    /// Hard-link count of the object.
    pub fn refcount(&self, id: ObjectId) -> Result<u32> {
        let _ = id;
        Err(todo_err())
    }
}
