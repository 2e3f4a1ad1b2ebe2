//! Shared message references (spec "IV.A.2", the "Shared Message" encodings before IV.A.2.a):
//! a message whose flags have bit 1 set holds, instead of its body, a reference to the body
//! stored in another object header (a committed datatype) or in the shared-message heap (SOHM,
//! version 3).
//!
//! * Version 1 (before HDF5 1.6.1): version, type, six reserved bytes, then what was an old
//!   symbol-table entry: a name offset of "Size of Lengths" bytes (unused) and the object
//!   header address. The spec omits the name offset; the library skips it, and so do we when
//!   the message is long enough to hold it.
//! * Version 2: version, type, address. The library writes type 2 here as in version 3 and
//!   reads an 8-byte heap ID if the type is 1 (SOHM); any other type means an address.
//! * Version 3: version, type, then for type 1 an 8-byte fractal heap ID in the shared-message
//!   heap, for type 2 an object header address. Types 0 ("not shared") and 3 ("not shared but
//!   shareable") describe a message stored in place and never a reference: corrupt here.

use crate::error::Result;
use crate::io::{Cursor, Sizes};

/// Where a shared message body lives (spec "IV.A.2", Shared Message versions 1-3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SharedMessage {
    /// In the object header at this relative address (versions 1 and 2, and v3 type 2).
    ObjectHeader(u64),
    /// In the shared-message fractal heap, under this 8-byte heap ID (v3 type 1).
    SohmHeap([u8; 8]),
}

/// Location type: the shared-message heap.
const TYPE_SOHM: u8 = 1;
/// Location type: another object's header (a committed message).
const TYPE_COMMITTED: u8 = 2;

impl SharedMessage {
    /// Decode a shared-message reference.
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<SharedMessage> {
        let mut c = Cursor::new(data, addr, "shared message");
        let version = c.u8()?;
        let kind = c.u8()?;
        match version {
            1 => {
                c.skip(6)?; // reserved
                if c.remaining() >= sizes.length as usize + sizes.offset as usize {
                    c.skip(sizes.length as usize)?; // old symbol-table entry's name offset
                }
                Ok(SharedMessage::ObjectHeader(c.offset(sizes)?))
            }
            2 | 3 if kind == TYPE_SOHM => {
                let id = c.bytes(8)?;
                let mut heap_id = [0u8; 8];
                heap_id.copy_from_slice(id);
                Ok(SharedMessage::SohmHeap(heap_id))
            }
            2 => Ok(SharedMessage::ObjectHeader(c.offset(sizes)?)),
            3 if kind == TYPE_COMMITTED => Ok(SharedMessage::ObjectHeader(c.offset(sizes)?)),
            3 => Err(c.corrupt(format!(
                "shared message type {kind} (the message is not shared)"
            ))),
            v => Err(c.corrupt(format!("shared message version {v}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn parse(b: &[u8]) -> Result<SharedMessage> {
        SharedMessage::parse(b, 0x600, Sizes::DEFAULT)
    }

    #[test]
    fn versions() {
        // Version 2 as h5py writes it for a committed datatype (type byte 2).
        let b = [2, 2, 0xb8, 0x27, 0, 0, 0, 0, 0, 0];
        assert_eq!(parse(&b).unwrap(), SharedMessage::ObjectHeader(0x27b8));
        // Version 3, type 2 and type 1.
        let b = [3, 2, 0x10, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(parse(&b).unwrap(), SharedMessage::ObjectHeader(0x10));
        // A dataspace in the SOHM heap, as written by HDF5 2.0.
        let b = [3, 1, 0, 0x3e, 0, 0, 0, 0, 0x24, 0];
        assert_eq!(
            parse(&b).unwrap(),
            SharedMessage::SohmHeap([0, 0x3e, 0, 0, 0, 0, 0x24, 0])
        );
        let b = [3, 1, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(
            parse(&b).unwrap(),
            SharedMessage::SohmHeap([1, 2, 3, 4, 5, 6, 7, 8])
        );
        // Version 1 as the library writes it: reserved, name offset, address.
        let mut b = vec![1, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&0x320u64.to_le_bytes());
        assert_eq!(parse(&b).unwrap(), SharedMessage::ObjectHeader(0x320));
        // ... and as the spec draws it (no name offset).
        assert_eq!(
            parse(&[&b[..8], &b[16..]].concat()).unwrap(),
            SharedMessage::ObjectHeader(0x320)
        );
    }

    #[test]
    fn hostile() {
        assert!(matches!(parse(&[3, 0, 0, 0]), Err(Error::Corrupt { .. })));
        assert!(matches!(parse(&[3, 3, 0, 0]), Err(Error::Corrupt { .. })));
        assert!(matches!(parse(&[4, 2]), Err(Error::Corrupt { .. })));
        assert!(matches!(parse(&[3, 1, 1, 2]), Err(Error::Truncated { .. })));
        assert!(matches!(parse(&[2, 0, 1]), Err(Error::Truncated { .. })));
    }
}
