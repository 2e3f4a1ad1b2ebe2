//! External links in the tree: the linked object appears at the link's place.
//!
//! An external link `FILE::PATH` is followed when `FILE` resolves under the policy of
//! [`super::files`] and `PATH` names an object there: the object is shown at the link's place
//! like a hard-linked one (a directory for a group, a file for a dataset), with an inode of its
//! own file's numbering. Otherwise the link is a dangling symlink whose text is `FILE::PATH`,
//! and the reason is logged once.
//!
//! Inside the subtree of a followed link, absolute soft links are paths of the other file.
//! Those that lead into the part of that file shown at the link (`PATH` and below) become
//! symlinks to the matching place in the mount; those that lead elsewhere in that file are
//! followed like hard links to the object they name, since the mount shows no root for that
//! file; those that name nothing dangle as `FILE::TARGET`. Relative soft links stay relative,
//! as in the mounted file.

use std::path::Path;
use std::sync::Arc;

use super::files::{self, FileIdx};
use super::inode::{self, Anchor, Node};
use super::{dir, H5Fs};
use crate::model::{File, LinkTarget, ObjectId, ObjectKind};

/// Most external links followed from one link (libhdf5's default limit on link traversals
/// is 16).
const MAX_CHAIN: usize = 16;

/// The rest of the absolute path `path` below `prefix` (both folded; `""` when equal), if
/// `path` is `prefix` or lies below it.
fn below<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let prefix = prefix.trim_end_matches('/');
    let rest = path.strip_prefix(prefix)?;
    if rest.is_empty() {
        Some("")
    } else {
        rest.strip_prefix('/').or(prefix.is_empty().then_some(rest))
    }
}

/// `path` with `.`, empty and `..` components folded, as an absolute HDF5 path.
fn fold_h5(path: &str) -> String {
    let folded = files::fold(&Path::new("/").join(path));
    folded.to_string_lossy().into_owned()
}

/// Where `path` goes on when it does not resolve in `file` because one of its components is
/// an external link: that link's file, and its path followed by the components after it.
fn external_step(file: &File, path: &str) -> Option<(String, String)> {
    let folded = fold_h5(path);
    let comps: Vec<&str> = folded.split('/').filter(|c| !c.is_empty()).collect();
    let mut parent = file.root();
    for (k, comp) in comps.iter().enumerate() {
        match file.resolve(&format!("/{}", comps[..=k].join("/"))) {
            Ok(id) => parent = id,
            Err(_) => {
                let LinkTarget::External { file, path } = file.lookup(parent, comp).ok()??.target
                else {
                    return None;
                };
                let rest = comps[k + 1..].join("/");
                return Some(if rest.is_empty() {
                    (file, path)
                } else {
                    (file, format!("{}/{rest}", path.trim_end_matches('/')))
                });
            }
        }
    }
    None
}

impl H5Fs {
    /// The node of object `id` of file `file` shown as `name` in `parent`. A group already
    /// shown at another path appears as a symlink to it: Linux directories cannot have
    /// several parents (the kernel answers ELOOP for a link to an ancestor and EIO for one to
    /// the root).
    pub(super) fn object_child(
        &self,
        parent: &Node,
        name: &str,
        file: FileIdx,
        id: ObjectId,
        anchor: Option<Arc<Anchor>>,
    ) -> Option<Arc<Node>> {
        let path = inode::join_path(&parent.path, name);
        if let Some(seen) = self.inodes.existing_object(file, id) {
            let is_group = self
                .files
                .get(file)
                .is_some_and(|f| matches!(f.kind(id), Ok(ObjectKind::Group)));
            if seen.path != path && is_group {
                let text = dir::soft_target(&parent.path, &seen.path);
                return Some(self.inodes.symlink(parent, name, text));
            }
        }
        Some(self.inodes.object_in(parent, name, file, id, anchor))
    }

    /// The file and object an external link in file `from` leads to, or why it is not
    /// followed. A target path that is or crosses an external link in the other file goes on
    /// through that link, as libhdf5's traversal does (a chain), up to [`MAX_CHAIN`] links.
    pub(super) fn follow_external(
        &self,
        from: FileIdx,
        file_name: &str,
        object_path: &str,
    ) -> Result<(FileIdx, ObjectId), String> {
        let (mut from, mut file_name, mut object_path) =
            (from, file_name.to_string(), object_path.to_string());
        for _ in 0..MAX_CHAIN {
            let idx = self.files.open(from, &file_name)?;
            let file = self.files.get(idx).ok_or("file not open")?;
            let err = match file.resolve(&object_path) {
                Ok(id) => return Ok((idx, id)),
                Err(e) => e.to_string(),
            };
            // The model does not cross external links: the path goes on in another file from
            // the first component that is one (a chain when it is the last one).
            match external_step(&file, &object_path) {
                Some((next_file, next_path)) => {
                    (from, file_name, object_path) = (idx, next_file, next_path);
                }
                None => return Err(err),
            }
        }
        Err(format!("more than {MAX_CHAIN} external links in a chain"))
    }

    /// The node of the soft link `name` to `target` in `parent`, a group reached through an
    /// external link (see the module docs).
    pub(super) fn soft_in_external(
        &self,
        parent: &Node,
        name: &str,
        target: &str,
    ) -> Option<Arc<Node>> {
        let anchor = parent.anchor.as_ref()?;
        let link_path = inode::join_path(&parent.path, name);
        if !target.starts_with('/') {
            let text = dir::soft_target(&parent.path, target);
            return Some(self.inodes.symlink(parent, name, text));
        }
        let folded = fold_h5(target);
        if let Some(rest) = below(&folded, &anchor.h5_path) {
            let mount = if rest.is_empty() {
                anchor.mount_path.clone()
            } else {
                inode::join_path(&anchor.mount_path, rest)
            };
            let text = dir::soft_target(&parent.path, &mount);
            return Some(self.inodes.symlink(parent, name, text));
        }
        let file = self.files.get(parent.file)?;
        match file.resolve(&folded) {
            Ok(id) => self.object_child(parent, name, parent.file, id, parent.anchor.clone()),
            Err(e) => {
                self.log_once(&link_path, || {
                    format!("soft link {link_path:?} to {target} names nothing: {e}")
                });
                let dangling = LinkTarget::External {
                    file: anchor.file_name.clone(),
                    path: target.to_string(),
                };
                let text = dir::symlink_text(&parent.path, &dangling).unwrap_or_default();
                Some(self.inodes.symlink(parent, name, text))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_below_a_prefix() {
        assert_eq!(below("/a/b", "/a"), Some("b"));
        assert_eq!(below("/a", "/a"), Some(""));
        assert_eq!(below("/ab", "/a"), None);
        assert_eq!(below("/a/b", "/"), Some("a/b"));
        assert_eq!(below("/", "/"), Some(""));
        assert_eq!(below("/x", "/a"), None);
        assert_eq!(fold_h5("/a/./b//c/"), "/a/b/c");
        assert_eq!(fold_h5("/../a"), "/a");
    }
}
