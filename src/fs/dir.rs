//! Directory listings: the links of a group turned into directory entries, once per inode.
//!
//! A listing is built on the first `opendir`/`readdir`/`lookup` that needs it and kept for the
//! mount (the file cannot change), so a directory of 100,000 links is decoded once and every
//! `readdir` continues in O(1): entry `i` carries offset `i + 1`, the index of the entry after
//! it, and `.` and `..` are entries 0 and 1.
//!
//! Link names the kernel cannot take (empty, `.`, `..`, containing `/` or NUL, longer than 255
//! bytes) and user-defined links are left out of listings and lookups; the caller logs them.
//! Soft links become symlinks whose text is a path relative to the link's directory, so they
//! resolve inside the mount wherever it is mounted; external links become dangling symlinks
//! whose text is `FILE::PATH`.

use std::collections::HashMap;

use super::attr::FileKind;
use crate::model::LinkTarget;

/// Longest name a Linux directory entry can hold.
pub const NAME_MAX: usize = 255;

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    pub kind: FileKind,
    pub name: String,
}

/// The entries of a directory, `.` and `..` first, then links in the model's (name) order.
#[derive(Debug, Default)]
pub struct Listing {
    pub entries: Vec<DirEntry>,
    by_name: HashMap<String, usize>,
}

impl Listing {
    /// A listing from its entries (`.` and `..` included by the caller).
    pub fn new(entries: Vec<DirEntry>) -> Listing {
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Listing { entries, by_name }
    }

    /// The entry named `name`.
    pub fn find(&self, name: &str) -> Option<&DirEntry> {
        self.by_name.get(name).and_then(|&i| self.entries.get(i))
    }

    /// Entries from the kernel's `offset` on, each with the offset that resumes after it.
    pub fn from_offset(&self, offset: u64) -> impl Iterator<Item = (u64, &DirEntry)> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        self.entries
            .iter()
            .enumerate()
            .skip(start)
            .map(|(i, e)| (i as u64 + 1, e))
    }
}

/// Why a link name cannot be a directory entry, if it cannot.
pub fn bad_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("empty name")
    } else if name == "." || name == ".." {
        Some("name is . or ..")
    } else if name.contains('/') {
        Some("name contains '/'")
    } else if name.contains('\0') {
        Some("name contains NUL")
    } else if name.len() > NAME_MAX {
        Some("name longer than 255 bytes")
    } else {
        None
    }
}

/// Symlink text for a soft or external link found in the group at `group_path`; `None` for
/// hard and user-defined links.
pub fn symlink_text(group_path: &str, target: &LinkTarget) -> Option<String> {
    match target {
        LinkTarget::Soft(path) => Some(soft_target(group_path, path)),
        LinkTarget::External { file, path } => Some(format!("{file}::{path}")),
        LinkTarget::Hard(_) | LinkTarget::UserDefined(_) => None,
    }
}

/// Rewrite an HDF5 soft-link path for a symlink living in the directory `group_path`.
/// Absolute paths climb to the mount root with one `..` per component of `group_path`;
/// relative paths are relative to the link's group in HDF5 too and are kept.
pub fn soft_target(group_path: &str, target: &str) -> String {
    if !target.starts_with('/') {
        return target.to_string();
    }
    let depth = group_path.split('/').filter(|c| !c.is_empty()).count();
    let mut parts: Vec<&str> = vec![".."; depth];
    parts.extend(target.split('/').filter(|c| !c.is_empty() && *c != "."));
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ObjectId;

    #[test]
    fn absolute_soft_links_become_relative() {
        assert_eq!(soft_target("/", "/a/b"), "a/b");
        assert_eq!(soft_target("/x/y", "/a/b"), "../../a/b");
        assert_eq!(soft_target("/x", "/"), "..");
        assert_eq!(soft_target("/", "/"), ".");
        assert_eq!(soft_target("/x", "//a/./b"), "../a/b");
        assert_eq!(soft_target("/x", "sib/c"), "sib/c");
        assert_eq!(
            symlink_text(
                "/",
                &LinkTarget::External {
                    file: "o.h5".into(),
                    path: "/g".into()
                }
            ),
            Some("o.h5::/g".into())
        );
        assert_eq!(symlink_text("/", &LinkTarget::Hard(ObjectId(1))), None);
    }

    #[test]
    fn names_the_kernel_cannot_take() {
        for n in ["", ".", "..", "a/b", "a\0b"] {
            assert!(bad_name(n).is_some(), "{n:?}");
        }
        assert!(bad_name(&"x".repeat(256)).is_some());
        assert!(bad_name(&"x".repeat(255)).is_none());
        assert!(bad_name("-é 中文 🙂.h5").is_none());
    }

    #[test]
    fn offsets_resume_after_each_entry() {
        let e = |n: &str, ino| DirEntry {
            ino,
            kind: FileKind::RegularFile,
            name: n.into(),
        };
        let l = Listing::new(vec![e(".", 1), e("..", 1), e("a", 5), e("b", 6)]);
        let all: Vec<_> = l.from_offset(0).map(|(o, e)| (o, e.ino)).collect();
        assert_eq!(all, vec![(1, 1), (2, 1), (3, 5), (4, 6)]);
        let rest: Vec<_> = l.from_offset(3).map(|(o, e)| (o, e.name.clone())).collect();
        assert_eq!(rest, vec![(4, "b".to_string())]);
        assert_eq!(l.from_offset(u64::MAX).count(), 0);
        assert_eq!(l.find("b").map(|e| e.ino), Some(6));
        assert!(l.find("c").is_none());
    }
}
