//! Link message (0x0006, spec "IV.A.2.g"): one link of a new-style group, stored in the
//! group's object header (compact) or as a record in the group's fractal heap (dense).
//!
//! Layout: version 1, flags, then as the flags say: link type (bit 3; hard when absent),
//! 8-byte creation order (bit 2), name character set (bit 4; ASCII when absent); the name
//! length in 1, 2, 4 or 8 bytes (bits 0-1), the name (no NUL), and the link information:
//! an address for hard links, or a 2-byte length and that many bytes for every other type.
//! External links' bytes are a version/flags byte then two NUL-terminated strings (file name,
//! object path).

use crate::error::{Error, Result};
use crate::io::{Cursor, Sizes, UNDEFINED_ADDR};

/// Link message flag bits.
pub mod link_flags {
    /// Bits 0-1: width of the name length field is `1 << (flags & 3)`.
    pub const NAME_LEN_MASK: u8 = 0x03;
    pub const CREATION_ORDER: u8 = 0x04;
    pub const LINK_TYPE: u8 = 0x08;
    pub const CHARSET: u8 = 0x10;
    /// Bits 5-7 are reserved.
    pub const RESERVED: u8 = 0xE0;
}

/// Link type values.
pub mod link_types {
    pub const HARD: u8 = 0;
    pub const SOFT: u8 = 1;
    pub const EXTERNAL: u8 = 64;
    /// Types from 64 up are user-defined (64 itself is the library's external link); 2-63
    /// are reserved for future library link types.
    pub const FIRST_USER_DEFINED: u8 = 64;
}

/// Where a link points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkTarget {
    /// Object header address.
    Hard(u64),
    /// Path, absolute or relative to the link's group.
    Soft(String),
    /// External link: file name and object path in that file.
    External { file: String, path: String },
    /// User-defined link type (64-255) with its raw data: reported, not followed.
    UserDefined { link_type: u8, data: Vec<u8> },
}

/// A link message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub name: String,
    pub creation_order: Option<u64>,
    pub target: LinkTarget,
}

const WHAT: &str = "link message";

impl Link {
    /// Decode a link message body. Names and soft-link values that are not valid UTF-8 are
    /// decoded lossily (the ASCII character set allows any byte).
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<Link> {
        let mut c = Cursor::new(data, addr, WHAT);
        let version = c.u8()?;
        if version != 1 {
            return Err(c.corrupt(format!("unknown version {version}")));
        }
        let flags = c.u8()?;
        if flags & link_flags::RESERVED != 0 {
            return Err(c.corrupt(format!("reserved flag bits set ({flags:#04x})")));
        }
        let link_type = if flags & link_flags::LINK_TYPE != 0 {
            c.u8()?
        } else {
            link_types::HARD
        };
        let creation_order = if flags & link_flags::CREATION_ORDER != 0 {
            Some(c.u64()?)
        } else {
            None
        };
        if flags & link_flags::CHARSET != 0 {
            let charset = c.u8()?;
            if charset > 1 {
                return Err(c.corrupt(format!("unknown character set {charset}")));
            }
        }
        let name_len = c.uint(1 << (flags & link_flags::NAME_LEN_MASK))?;
        if name_len == 0 {
            return Err(c.corrupt("empty link name"));
        }
        let name_len = usize::try_from(name_len)
            .ok()
            .filter(|&n| n <= c.remaining())
            .ok_or_else(|| c.corrupt(format!("name length {name_len} exceeds the message")))?;
        let name = String::from_utf8_lossy(c.bytes(name_len)?).into_owned();
        let target = match link_type {
            link_types::HARD => {
                let a = c.offset(sizes)?;
                if a == UNDEFINED_ADDR {
                    return Err(c.corrupt(format!("hard link {name:?} has an undefined address")));
                }
                LinkTarget::Hard(a)
            }
            link_types::SOFT => {
                let len = c.u16()? as usize;
                LinkTarget::Soft(String::from_utf8_lossy(c.bytes(len)?).into_owned())
            }
            link_types::EXTERNAL => {
                let len = c.u16()? as usize;
                let mut e = c.sub(len)?;
                let vf = e.u8()?;
                if vf >> 4 != 0 {
                    return Err(c.corrupt(format!("external link version {}", vf >> 4)));
                }
                let file = String::from_utf8_lossy(e.cstring()?).into_owned();
                let path = String::from_utf8_lossy(e.cstring()?).into_owned();
                LinkTarget::External { file, path }
            }
            t if t > link_types::FIRST_USER_DEFINED => {
                let len = c.u16()? as usize;
                LinkTarget::UserDefined {
                    link_type: t,
                    data: c.bytes(len)?.to_vec(),
                }
            }
            t => {
                return Err(Error::unsupported(
                    "link type",
                    format!("{t} (reserved) in link {name:?} at {addr:#x}"),
                ))
            }
        };
        Ok(Link {
            name,
            creation_order,
            target,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Sizes = Sizes::DEFAULT;

    #[test]
    fn hard_link_minimal() {
        // Flags 0: 1-byte name length, hard link, no order, ASCII.
        let mut d = vec![1, 0, 3];
        d.extend_from_slice(b"abc");
        d.extend_from_slice(&0x1234u64.to_le_bytes());
        let l = Link::parse(&d, 0, S).unwrap();
        assert_eq!(l.name, "abc");
        assert_eq!(l.creation_order, None);
        assert_eq!(l.target, LinkTarget::Hard(0x1234));
    }

    #[test]
    fn soft_link_with_all_fields() {
        // 2-byte name length, creation order, link type, charset UTF-8.
        let mut d = vec![1, 0x01 | 0x04 | 0x08 | 0x10, 1];
        d.extend_from_slice(&9u64.to_le_bytes());
        d.push(1);
        d.extend_from_slice(&4u16.to_le_bytes());
        d.extend_from_slice("né1".as_bytes());
        d.extend_from_slice(&2u16.to_le_bytes());
        d.extend_from_slice(b"/g");
        let l = Link::parse(&d, 0, S).unwrap();
        assert_eq!(l.name, "né1");
        assert_eq!(l.creation_order, Some(9));
        assert_eq!(l.target, LinkTarget::Soft("/g".into()));
    }

    #[test]
    fn external_and_user_defined() {
        let mut d = vec![1, 0x08, 64, 1, b'e'];
        let payload = b"\0f.h5\0/a/b\0";
        d.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        d.extend_from_slice(payload);
        let l = Link::parse(&d, 0, S).unwrap();
        assert_eq!(
            l.target,
            LinkTarget::External {
                file: "f.h5".into(),
                path: "/a/b".into()
            }
        );

        let d = [1, 0x08, 200, 1, b'u', 2, 0, 7, 8];
        let l = Link::parse(&d, 0, S).unwrap();
        assert_eq!(
            l.target,
            LinkTarget::UserDefined {
                link_type: 200,
                data: vec![7, 8]
            }
        );
    }

    #[test]
    fn bad_links() {
        // Reserved link type.
        assert!(matches!(
            Link::parse(&[1, 0x08, 5, 1, b'x', 0, 0], 0, S),
            Err(Error::Unsupported { .. })
        ));
        // Name longer than the message.
        assert!(Link::parse(&[1, 0, 200, b'x'], 0, S).is_err());
        // Empty name, bad version, truncated address, unterminated external path.
        assert!(Link::parse(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0, S).is_err());
        assert!(Link::parse(&[2, 0, 1, b'x', 0, 0, 0, 0, 0, 0, 0, 0], 0, S).is_err());
        assert!(Link::parse(&[1, 0, 1, b'x', 0, 0], 0, S).is_err());
        assert!(Link::parse(&[1, 0x08, 64, 1, b'e', 3, 0, 0, b'f', 0], 0, S).is_err());
        // 4-byte offsets.
        let s4 = Sizes {
            offset: 4,
            length: 4,
        };
        let l = Link::parse(&[1, 0, 1, b'x', 0x10, 0, 0, 0], 0, s4).unwrap();
        assert_eq!(l.target, LinkTarget::Hard(0x10));
    }
}
