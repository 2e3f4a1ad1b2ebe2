//! Shared message references (spec "IV.A.2.h"? see "Shared Message" encodings): a message whose
//! flags have bit 1 set holds, instead of its body, a reference to the body stored in another
//! object header (a committed datatype) or in the shared-message heap (SOHM, version 3).

use crate::error::Result;
use crate::io::Sizes;

/// Where a shared message body lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SharedMessage {
    /// In the object header at this relative address (versions 1 and 2, and v3 type 2).
    ObjectHeader(u64),
    /// In the shared-message fractal heap, under this 8-byte heap ID (v3 type 1).
    SohmHeap([u8; 8]),
}

impl SharedMessage {
    /// Decode a shared-message reference.
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<SharedMessage> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("shared message", "not implemented yet"))
    }
}
