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
//!
//! Symlink texts never lead outside the mount. A text is safe when it is some `..` that climb
//! exactly to the mount root from the link's directory (the directory's depth is known: every
//! group is shown at one path only), followed by names going down: each later component is a
//! directory or another symlink that is itself safe, so by induction resolution stays inside.
//! HDF5 gives `..` no meaning (it would be a link literally named `..`, which is never shown),
//! so a soft link whose path has a `..` component, or an external link whose file name is
//! absolute or has one, cannot be shown as written: its text becomes [`REFUSED_PREFIX`] and the
//! original with `/` escaped, one component that names nothing — a dangling symlink.

use super::attr::FileKind;
use super::inode::NodeKind;
use super::name::Name;
use crate::model::{FileIdx, LinkTarget};

/// Longest name a Linux directory entry can hold.
pub const NAME_MAX: usize = 255;

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    pub kind: FileKind,
    pub name: Name,
}

/// The entries of a directory, `.` and `..` first, then links in the model's (name) order
/// (sidecars after them). Names are found by binary search: the entries after the dots are
/// in name order, or `order` sorts them.
#[derive(Debug, Default)]
pub struct Listing {
    pub entries: Vec<DirEntry>,
    /// Indices of the entries after the dots, sorted by name, when they are not in order.
    order: Option<Vec<u32>>,
    /// Where the entries come from whose inode numbers do not tell it, by entry index,
    /// sorted: a lookup or `readdirplus` makes their nodes from this.
    origins: Vec<(u32, Origin)>,
}

/// Where an entry of a listing comes from (see [`Listing::with_origins`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A link of a group, other than a hard link to an object of the group's file numbered
    /// by its address (the number tells that one).
    Link(LinkTarget),
    /// An entry of a mounted directory: its kind and, for an HDF5 file, its file.
    Host(NodeKind, FileIdx),
    /// A symlink of a mounted directory, with its text.
    HostSymlink(String),
}

/// The `.` and `..` entries of the directory `ino` whose parent is `parent`.
pub fn dots(ino: u64, parent: u64) -> Vec<DirEntry> {
    [(".", ino), ("..", parent)]
        .into_iter()
        .map(|(name, ino)| DirEntry {
            ino,
            kind: FileKind::Directory,
            name: name.into(),
        })
        .collect()
}

impl Listing {
    /// A listing from its entries (`.` and `..` included by the caller).
    pub fn new(entries: Vec<DirEntry>) -> Listing {
        Listing::with_origins(entries, Vec::new())
    }

    /// A listing from its entries and where those come from whose numbers do not tell it
    /// (by entry index, in any order).
    pub fn with_origins(mut entries: Vec<DirEntry>, mut origins: Vec<(u32, Origin)>) -> Listing {
        entries.shrink_to_fit();
        origins.sort_by_key(|(i, _)| *i);
        let rest = entries.get(2..).unwrap_or_default();
        let sorted = rest
            .windows(2)
            .all(|w| w[0].name.as_bytes() < w[1].name.as_bytes());
        let order = (!sorted).then(|| {
            let mut order: Vec<u32> = (2..entries.len() as u32).collect();
            order.sort_by(|&a, &b| {
                entries[a as usize]
                    .name
                    .as_bytes()
                    .cmp(entries[b as usize].name.as_bytes())
            });
            order
        });
        Listing {
            entries,
            order,
            origins,
        }
    }

    /// The index of the entry named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        for (i, e) in self.entries.iter().take(2).enumerate() {
            if e.name == name {
                return Some(i);
            }
        }
        let key = |i: usize| self.entries.get(i).map_or(&b""[..], |e| e.name.as_bytes());
        match &self.order {
            None => {
                let rest = self.entries.get(2..)?;
                rest.binary_search_by(|e| e.name.as_bytes().cmp(name.as_bytes()))
                    .ok()
                    .map(|i| i + 2)
            }
            Some(order) => order
                .binary_search_by(|&i| key(i as usize).cmp(name.as_bytes()))
                .ok()
                .map(|k| order[k] as usize),
        }
    }

    /// The entry named `name`.
    pub fn find(&self, name: &str) -> Option<&DirEntry> {
        self.entries.get(self.position(name)?)
    }

    /// Where entry `index` comes from, if kept (see [`Listing::with_origins`]).
    pub fn origin(&self, index: usize) -> Option<&Origin> {
        let i = u32::try_from(index).ok()?;
        let k = self.origins.binary_search_by_key(&i, |(p, _)| *p).ok()?;
        Some(&self.origins[k].1)
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

    /// The memory this listing takes, about: what the cache of listings weighs it by.
    pub fn bytes(&self) -> usize {
        let heap_names: usize = self
            .entries
            .iter()
            .filter(|e| e.name.len() > super::name::INLINE)
            .map(|e| e.name.len())
            .sum();
        std::mem::size_of::<Listing>()
            + self.entries.capacity() * std::mem::size_of::<DirEntry>()
            + heap_names
            + self.order.as_ref().map_or(0, |o| o.capacity() * 4)
            + self.origins.capacity() * std::mem::size_of::<(u32, Origin)>()
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

/// Start of the text of a symlink whose link would lead outside the mount.
pub const REFUSED_PREFIX: &str = "h5mount-refused:";

/// Symlink text for a soft or external link found in the group at `group_path`; `None` for
/// hard and user-defined links. A link that would lead outside the mount gets a dangling text
/// (see the module docs); [`is_refused`] tells.
pub fn symlink_text(group_path: &str, target: &LinkTarget) -> Option<String> {
    match target {
        LinkTarget::Soft(path) => Some(soft_target(group_path, path)),
        LinkTarget::External { file, path } => {
            let text = format!("{file}::{path}");
            // `..` in the object path counts too: the `FILE::` component may be a symlink.
            if file.starts_with('/') || has_dotdot(file) || has_dotdot(path) {
                Some(refused(&text))
            } else {
                Some(text)
            }
        }
        LinkTarget::Hard(_) | LinkTarget::UserDefined(_) => None,
    }
}

/// True if `text` is the dangling text of a refused link.
pub fn is_refused(text: &str) -> bool {
    text.starts_with(REFUSED_PREFIX)
}

fn has_dotdot(path: &str) -> bool {
    path.split('/').any(|c| c == "..")
}

/// The dangling text for `original`: one path component (`%` and `/` escaped), so the kernel
/// looks it up in the link's own directory and climbs nowhere.
fn refused(original: &str) -> String {
    let escaped = original.replace('%', "%25").replace('/', "%2F");
    format!("{REFUSED_PREFIX}{escaped}")
}

/// Rewrite an HDF5 soft-link path for a symlink living in the directory `group_path`.
/// Absolute paths climb to the mount root with one `..` per component of `group_path`;
/// relative paths are relative to the link's group in HDF5 too and are kept (`.` and empty
/// components dropped). A path with a `..` component is refused (dangling text).
pub fn soft_target(group_path: &str, target: &str) -> String {
    if has_dotdot(target) {
        return refused(target);
    }
    let depth = if target.starts_with('/') {
        group_path.split('/').filter(|c| !c.is_empty()).count()
    } else {
        0
    };
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

    /// Walk `text` as the kernel would from a directory `depth` below the mount root: the
    /// lowest depth reached (negative = outside the mount).
    fn lowest_depth(depth: i64, text: &str) -> i64 {
        assert!(!text.starts_with('/'), "absolute text {text:?}");
        let mut d = depth;
        let mut low = d;
        for c in text.split('/') {
            match c {
                ".." => d -= 1,
                "" | "." => {}
                _ => d += 1,
            }
            low = low.min(d);
        }
        low
    }

    #[test]
    fn no_symlink_text_leads_outside_the_mount() {
        let soft = [
            "../../../etc",
            "/../../etc/passwd",
            "a/../../b",
            "..",
            "/a/..",
            "./../x",
            "//..//..",
        ];
        for group in ["/", "/g", "/g/h/i"] {
            let depth = group.split('/').filter(|c| !c.is_empty()).count() as i64;
            for t in soft {
                let text = soft_target(group, t);
                assert!(is_refused(&text), "{group} {t} -> {text}");
                assert!(!text.contains('/'), "{text}");
                assert!(lowest_depth(depth, &text) >= 0);
            }
            for t in ["/a/b", "a/./b", "/", "x", "/..a/b..", "..."] {
                let text = soft_target(group, t);
                assert!(!is_refused(&text), "{t}");
                assert_eq!(
                    lowest_depth(depth, &text),
                    if t.starts_with('/') { 0 } else { depth },
                    "{group} {t} {text}"
                );
            }
            for (file, ok) in [
                ("o.h5", true),
                ("sub/o.h5", true),
                ("/etc/passwd", false),
                ("../o.h5", false),
                ("a/../../o.h5", false),
            ] {
                let l = LinkTarget::External {
                    file: file.into(),
                    path: "/x/y".into(),
                };
                let text = symlink_text(group, &l).unwrap();
                assert_eq!(!is_refused(&text), ok, "{file} -> {text}");
                if ok {
                    assert!(lowest_depth(depth, &text) >= depth, "{text}");
                } else {
                    assert!(!text.contains('/'), "{text}");
                }
            }
        }
        let l = LinkTarget::External {
            file: "o.h5".into(),
            path: "/../..".into(),
        };
        assert!(is_refused(&symlink_text("/g", &l).unwrap()));
        assert_eq!(soft_target("/", "a%/b"), "a%/b");
        assert_eq!(soft_target("/", "../a%/b"), "h5mount-refused:..%2Fa%25%2Fb");
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
        let rest: Vec<_> = l
            .from_offset(3)
            .map(|(o, e)| (o, e.name.to_string()))
            .collect();
        assert_eq!(rest, vec![(4, "b".to_string())]);
        assert_eq!(l.from_offset(u64::MAX).count(), 0);
        assert_eq!(l.find("b").map(|e| e.ino), Some(6));
        assert!(l.find("c").is_none());
        assert_eq!(l.find("..").map(|e| e.ino), Some(1));
        // Out of order (sidecars after the links): found all the same.
        let l = Listing::new(vec![
            e(".", 1),
            e("..", 1),
            e("b", 5),
            e("a", 6),
            e("b.npy", 7),
        ]);
        for (n, ino) in [("a", 6), ("b", 5), ("b.npy", 7)] {
            assert_eq!(l.find(n).map(|e| e.ino), Some(ino), "{n}");
        }
        assert!(l.find("c").is_none() && l.find("").is_none());
    }
}
