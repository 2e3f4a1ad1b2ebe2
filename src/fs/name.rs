//! Short strings kept inline: the names of directory entries and inodes.
//!
//! A mount may hold a million names at once (an inode and a listing entry per object of a
//! walk), nearly all a few bytes long. A `String` costs 24 bytes plus a heap block of at
//! least 32 for each; a [`Name`] of up to [`INLINE`] bytes lives in its own 24 bytes, and only
//! a longer one takes a heap block.

use std::fmt;
use std::ops::Deref;

/// Longest name kept inline.
pub const INLINE: usize = 22;

/// An immutable string, inline when short (see the module docs).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Name(Repr);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

impl Name {
    /// The name `s`.
    pub fn new(s: &str) -> Name {
        if s.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            // At most INLINE (22) bytes: fits in u8.
            Name(Repr::Inline {
                len: s.len() as u8,
                bytes,
            })
        } else {
            Name(Repr::Heap(s.into()))
        }
    }

    /// The name as a `&str`.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            // The bytes are a whole `&str` copied in, so they are UTF-8 up to `len`.
            Repr::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len).min(INLINE)]).unwrap_or("")
            }
            Repr::Heap(s) => s,
        }
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<std::ffi::OsStr> for Name {
    fn as_ref(&self) -> &std::ffi::OsStr {
        std::ffi::OsStr::new(self.as_str())
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name::new(s)
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        if s.len() <= INLINE {
            Name::new(&s)
        } else {
            Name(Repr::Heap(s.into_boxed_str()))
        }
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Name {
        Name::new(s)
    }
}

impl From<Name> for String {
    fn from(n: Name) -> String {
        n.as_str().to_string()
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        self == other.as_str()
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_inline_long_ones_on_the_heap() {
        assert_eq!(std::mem::size_of::<Name>(), 24);
        for s in [
            "",
            "a",
            "d0000123",
            "ümlaut ü",
            &"x".repeat(22),
            &"y".repeat(23),
            "🙂🙂🙂🙂🙂🙂",
        ] {
            let n = Name::new(s);
            assert_eq!(n.as_str(), s);
            assert_eq!(Name::from(s.to_string()), n);
            assert!(n == s, "{s}");
            assert!(s == n, "{s}");
            assert_eq!(n.len(), s.len());
        }
        assert!(matches!(Name::new(&"x".repeat(22)).0, Repr::Inline { .. }));
        assert!(matches!(Name::new(&"x".repeat(23)).0, Repr::Heap(_)));
        assert_eq!(format!("{:?}", Name::new("a\"b")), "\"a\\\"b\"");
    }
}
