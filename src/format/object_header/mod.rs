//! Object headers, version 1 (spec "IV.A.1.a") and version 2 ("IV.A.1.b", signature `OHDR`,
//! continuation blocks `OCHK`), with continuation chains followed up to a bound and cycles
//! detected. Messages are returned raw; [`crate::format::messages`] decodes them.

pub mod v1;
pub mod v2;

use crate::error::Result;
use crate::io::{Sizes, Storage};

/// Message flag bits (spec: "Header Message Flags").
pub mod flags {
    /// The message is constant.
    pub const CONSTANT: u8 = 0x01;
    /// The message is shared: its body is a shared-message reference, not the message itself.
    pub const SHARED: u8 = 0x02;
    /// Do not share this message.
    pub const DONT_SHARE: u8 = 0x04;
    /// Fail to open for writing if the type is unknown.
    pub const FAIL_IF_UNKNOWN_WRITE: u8 = 0x08;
    /// Set bit 5 of this flag field when unknown and the object is modified.
    pub const MARK_IF_UNKNOWN: u8 = 0x10;
    /// The object was modified by software that did not know this message.
    pub const WAS_UNKNOWN: u8 = 0x20;
    /// The message is shareable.
    pub const SHAREABLE: u8 = 0x40;
    /// Fail to open the object at all if the message type is unknown.
    pub const FAIL_IF_UNKNOWN_ALWAYS: u8 = 0x80;
}

/// One header message, undecoded.
#[derive(Clone, Debug)]
pub struct RawMessage {
    /// Message type number (0x0001 dataspace, 0x0003 datatype, ...).
    pub mtype: u16,
    /// Message flags (see [`flags`]).
    pub flags: u8,
    /// Creation order, when the header tracks it (v2 only).
    pub creation_order: Option<u16>,
    /// Relative file address of the message body.
    pub addr: u64,
    /// The message body.
    pub data: Vec<u8>,
}

/// Times stored in a v2 object header (seconds since the epoch).
#[derive(Clone, Copy, Debug, Default)]
pub struct HeaderTimes {
    pub access: u32,
    pub modification: u32,
    pub change: u32,
    pub birth: u32,
}

/// A decoded object header: every message from every chunk, in order. Null (0x0000) and
/// continuation (0x0010) messages are consumed here and not returned.
#[derive(Clone, Debug)]
pub struct ObjectHeader {
    /// Relative address of the header.
    pub addr: u64,
    /// Header version (1 or 2).
    pub version: u8,
    /// Hard-link reference count.
    pub refcount: u32,
    /// v2 header flags byte (0 for v1).
    pub header_flags: u8,
    /// Times, if the v2 header stores them.
    pub times: Option<HeaderTimes>,
    /// The messages.
    pub messages: Vec<RawMessage>,
}

impl ObjectHeader {
    /// Read the header at relative address `addr`, following continuations.
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<ObjectHeader> {
        let _ = (storage, addr, sizes);
        Err(crate::error::Error::unsupported("object header", "not implemented yet"))
    }

    /// Messages of one type.
    pub fn messages_of(&self, mtype: u16) -> impl Iterator<Item = &RawMessage> {
        self.messages.iter().filter(move |m| m.mtype == mtype)
    }

    /// The first message of one type.
    pub fn first(&self, mtype: u16) -> Option<&RawMessage> {
        self.messages.iter().find(|m| m.mtype == mtype)
    }
}
