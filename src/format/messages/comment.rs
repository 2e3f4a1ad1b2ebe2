//! Object comment message (0x000D, spec "IV.A.2.n"): a NUL-terminated string.

use crate::error::Result;
use crate::io::Cursor;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment(pub String);

impl Comment {
    /// Decode the comment; bytes that are not UTF-8 are replaced (the spec says ASCII).
    pub fn parse(data: &[u8], addr: u64) -> Result<Comment> {
        let mut c = Cursor::new(data, addr, "comment message");
        Ok(Comment(String::from_utf8_lossy(c.cstring()?).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        assert_eq!(Comment::parse(b"hello\0\0\0", 0).unwrap().0, "hello");
        assert_eq!(Comment::parse(b"\0", 0).unwrap().0, "");
        assert!(Comment::parse(b"no terminator", 0).is_err());
    }
}
