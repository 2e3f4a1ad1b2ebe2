//! External links in the tree: the linked object appears at the link's place.
//!
//! An external link `FILE::PATH` is followed when `FILE` resolves under the path policy of
//! the mount's resolver (`model::resolver`) and `PATH` names an object there: the object is shown at the link's place
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

use super::inode::{self, Anchor, Node};
use super::{dir, H5Fs};
use crate::model::resolver::fold;
use crate::model::{FileIdx, LinkTarget, ObjectId, ObjectKind};

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
    let folded = fold(&Path::new("/").join(path));
    folded.to_string_lossy().into_owned()
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
        let target = self.resolver.get(file).ok();
        let seen = self.inodes.existing_object(file, id).or_else(|| {
            // The root group of an HDF5 file of a mounted directory is the file's directory.
            self.inodes
                .file_root(file)
                .filter(|_| target.as_ref().is_some_and(|f| f.root() == id))
        });
        if let Some(seen) = seen {
            // Found again after a refresh: the object is where it is found now (the file
            // may have moved or replaced it; its old path may lead elsewhere or nowhere).
            if seen.before_refresh && matches!(seen.kind, inode::NodeKind::Object(_)) {
                return Some(self.inodes.rebind(&seen, parent, name));
            }
            let is_group = target
                .as_ref()
                .is_some_and(|f| matches!(f.kind(id), Ok(ObjectKind::Group)));
            if seen.path != path && is_group {
                let text = dir::soft_target(&parent.path, &seen.path);
                return Some(self.inodes.symlink(parent, name, text));
            }
        }
        Some(self.inodes.object_in(parent, name, file, id, anchor))
    }

    /// The file and object an external link in the file of `from` leads to, or why it is
    /// not followed. A target path that is or crosses an external link in the other file
    /// goes on through that link, as libhdf5's traversal does (a chain).
    pub(super) fn follow_external(
        &self,
        from: &Node,
        file_name: &str,
        object_path: &str,
    ) -> Result<(FileIdx, ObjectId), String> {
        let file = self.resolver.get(from.file).map_err(|e| e.to_string())?;
        let (target, id) = file
            .follow_external(file_name, object_path)
            .map_err(|e| e.to_string())?;
        Ok((target.idx(), id))
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
        let file = self.resolver.get(parent.file).ok()?;
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
