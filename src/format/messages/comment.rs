//! Object comment message (0x000D): a NUL-terminated string.

use crate::error::Result;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment(pub String);

impl Comment {
    pub fn parse(data: &[u8], addr: u64) -> Result<Comment> {
        let _ = (data, addr);
        Err(crate::error::Error::unsupported("comment", "not implemented yet"))
    }
}
