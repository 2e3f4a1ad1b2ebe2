//! Object headers, version 1 (spec "IV.A.1.a") and version 2 ("IV.A.1.b", signature `OHDR`,
//! continuation blocks `OCHK`), with continuation chains followed up to a bound and cycles
//! detected. Messages are returned raw; [`crate::format::messages`] decodes them.
//!
//! A header is a prefix plus one or more chunks of messages. Chunk 0 follows the prefix; every
//! further chunk is announced by a continuation message (0x0010: address, length) in an
//! earlier chunk. Chunks are visited in the order their continuation messages appear (as
//! libhdf5 does), each address at most once, at most [`limits::MAX_CONTINUATIONS`] of them, and
//! the total bytes read is bounded by the file length (chunks of a valid file are disjoint), so
//! a crafted chain can neither loop nor make us allocate more than the file can back.
//!
//! [`v1`] and [`v2`] decode their prefix and the message headers of one chunk; the walk over
//! chunks and the handling common to both (NIL and continuation messages dropped, unknown
//! messages marked "fail if unknown" rejected, message count bounded) live here.

pub mod v1;
pub mod v2;

use std::collections::{HashSet, VecDeque};

use crate::error::{Error, Result};
use crate::format::limits;
use crate::format::messages::types;
use crate::io::{Cursor, Sizes, Storage};

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

/// The body of a message of `size` bytes at the cursor, with its address; a size reaching past
/// the chunk (which starts at `chunk_addr`) is corruption, named as such.
fn message_body<'a>(
    c: &mut Cursor<'a>,
    mtype: u16,
    size: usize,
    chunk_addr: u64,
) -> Result<(u64, &'a [u8])> {
    let body_addr = c.addr();
    if size > c.remaining() {
        return Err(Error::corrupt(
            c.what(),
            chunk_addr,
            format!(
                "message type {mtype:#06x} at {body_addr:#x} has size {size}, beyond the chunk end"
            ),
        ));
    }
    Ok((body_addr, c.bytes(size)?))
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

/// Which continuation chunks a read follows, by their address and length.
pub type Follow<'a> = &'a dyn Fn(u64, u64) -> bool;

/// Where a chunk of messages lives, as announced by a continuation message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRef {
    pub addr: u64,
    pub len: u64,
}

/// State shared by the v1 and v2 walks: the messages so far and the chunks still to visit.
pub(crate) struct Walk {
    header_addr: u64,
    sizes: Sizes,
    pub messages: Vec<RawMessage>,
    queue: VecDeque<ChunkRef>,
    seen: HashSet<u64>,
    continuations: usize,
    /// Bytes of chunks read so far, bounded by the file length.
    bytes_read: u64,
    byte_budget: u64,
    /// Chunks announced and passed over by [`Walk::next_chunk`], unread.
    skipped: Vec<ChunkRef>,
}

impl Walk {
    pub(crate) fn new(storage: &Storage, header_addr: u64, sizes: Sizes) -> Walk {
        Walk {
            header_addr,
            sizes,
            messages: Vec::new(),
            queue: VecDeque::new(),
            seen: HashSet::from([header_addr]),
            continuations: 0,
            bytes_read: 0,
            byte_budget: storage.available(0),
            skipped: Vec::new(),
        }
    }

    /// The continuation chunks announced and not read (none once every chunk is read).
    pub(crate) fn unread(&self) -> Vec<ChunkRef> {
        self.skipped.iter().chain(&self.queue).copied().collect()
    }

    /// Account for `len` bytes about to be read as a chunk.
    pub(crate) fn charge(&mut self, len: u64) -> Result<()> {
        self.bytes_read = self.bytes_read.saturating_add(len);
        if self.bytes_read > self.byte_budget {
            return Err(Error::limit(
                "object header",
                self.header_addr,
                "chunks total more bytes than the file holds",
            ));
        }
        Ok(())
    }

    /// The next continuation chunk to read, if any: the next one `follow` takes (address,
    /// length); those it does not are passed over, unread.
    pub(crate) fn next_chunk(&mut self, follow: Follow) -> Option<ChunkRef> {
        while let Some(c) = self.queue.pop_front() {
            if follow(c.addr, c.len) {
                return Some(c);
            }
            self.skipped.push(c);
        }
        None
    }

    /// Take one message found in a chunk: drop NIL, queue continuations, reject unknown
    /// messages marked fail-if-unknown-always, keep the rest.
    pub(crate) fn accept(&mut self, msg: RawMessage) -> Result<()> {
        match msg.mtype {
            types::NIL => Ok(()),
            types::CONTINUATION => {
                let mut c = Cursor::new(&msg.data, msg.addr, "continuation message");
                let addr = c.offset(self.sizes)?;
                let len = c.length(self.sizes)?;
                self.continuations += 1;
                if self.continuations > limits::MAX_CONTINUATIONS {
                    return Err(Error::limit(
                        "object header",
                        self.header_addr,
                        format!(
                            "more than {} continuation chunks",
                            limits::MAX_CONTINUATIONS
                        ),
                    ));
                }
                if !self.seen.insert(addr) {
                    return Err(Error::corrupt(
                        "object header",
                        self.header_addr,
                        format!("continuation cycle: chunk at {addr:#x} referenced twice"),
                    ));
                }
                self.queue.push_back(ChunkRef { addr, len });
                Ok(())
            }
            t => {
                if !is_known(t) && msg.flags & flags::FAIL_IF_UNKNOWN_ALWAYS != 0 {
                    return Err(Error::unsupported(
                        "object header message",
                        format!(
                            "type {t:#06x} at {:#x} is unknown and marked fail-if-unknown",
                            msg.addr
                        ),
                    ));
                }
                if self.messages.len() >= limits::MAX_MESSAGES {
                    return Err(Error::limit(
                        "object header",
                        self.header_addr,
                        format!("more than {} messages", limits::MAX_MESSAGES),
                    ));
                }
                self.messages.push(msg);
                Ok(())
            }
        }
    }
}

/// Message types this reader knows (the [`types`] list: 0x0000 to 0x0017).
pub fn is_known(mtype: u16) -> bool {
    mtype <= types::FSINFO
}

impl ObjectHeader {
    /// Read the header at relative address `addr`, following continuations.
    pub fn read(storage: &Storage, addr: u64, sizes: Sizes) -> Result<ObjectHeader> {
        Ok(Self::read_following(storage, addr, sizes, &|_, _| true)?.0)
    }

    /// Read the header at `addr` without following continuations: its first chunk's
    /// messages, and the continuation chunks that chunk announces, unread (none: it is the
    /// whole header). Enough to tell what most objects are (a directory listing needs each
    /// child's kind, not its attributes).
    pub fn read_first_chunk(
        storage: &Storage,
        addr: u64,
        sizes: Sizes,
    ) -> Result<(ObjectHeader, Vec<ChunkRef>)> {
        Self::read_following(storage, addr, sizes, &|_, _| false)
    }

    /// Read the header at `addr` following only the continuation chunks `follow` takes:
    /// its messages so far, and the chunks announced and left unread (none: it is the whole
    /// header). With `follow` saying which chunks are here already, that is what the rest of
    /// the header needs fetched, for a hint.
    pub fn read_following(
        storage: &Storage,
        addr: u64,
        sizes: Sizes,
        follow: Follow,
    ) -> Result<(ObjectHeader, Vec<ChunkRef>)> {
        let mut first = [0u8; 4];
        let n = storage.available(addr).min(4) as usize;
        storage.read_at(addr, &mut first[..n], "object header")?;
        if n == 4 && &first == v2::SIGNATURE {
            v2::read(storage, addr, sizes, follow)
        } else if n >= 1 && first[0] == 1 {
            v1::read(storage, addr, sizes, follow)
        } else if n == 0 {
            Err(Error::truncated("object header", addr, 4, 0))
        } else {
            Err(Error::corrupt(
                "object header",
                addr,
                format!(
                    "neither a version 1 header nor OHDR (first byte {:#04x})",
                    first[0]
                ),
            ))
        }
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

/// Builders of header images for tests (here and in other modules' tests).
#[cfg(test)]
pub(crate) mod testutil {
    use crate::io::checksum::lookup3;

    /// A v1 message: type (2), size (2), flags, 3 reserved, body padded to 8 bytes.
    pub fn v1_msg(mtype: u16, flags: u8, body: &[u8]) -> Vec<u8> {
        let padded = body.len().div_ceil(8) * 8;
        let mut v = Vec::new();
        v.extend_from_slice(&mtype.to_le_bytes());
        v.extend_from_slice(&(padded as u16).to_le_bytes());
        v.extend_from_slice(&[flags, 0, 0, 0]);
        v.extend_from_slice(body);
        v.resize(8 + padded, 0);
        v
    }

    /// A v1 header prefix (16 bytes) followed by the chunk-0 messages.
    pub fn v1_header(nmsgs: u16, refcount: u32, msgs: &[u8]) -> Vec<u8> {
        let mut v = vec![1, 0];
        v.extend_from_slice(&nmsgs.to_le_bytes());
        v.extend_from_slice(&refcount.to_le_bytes());
        v.extend_from_slice(&(msgs.len() as u32).to_le_bytes());
        v.extend_from_slice(&[0; 4]);
        v.extend_from_slice(msgs);
        v
    }

    /// A v2 message header and body; `order` adds the 2-byte creation order field.
    pub fn v2_msg(mtype: u8, flags: u8, order: Option<u16>, body: &[u8]) -> Vec<u8> {
        let mut v = vec![mtype];
        v.extend_from_slice(&(body.len() as u16).to_le_bytes());
        v.push(flags);
        if let Some(o) = order {
            v.extend_from_slice(&o.to_le_bytes());
        }
        v.extend_from_slice(body);
        v
    }

    /// A v2 header: `OHDR`, version 2, `hflags` (chunk-0 size width from bits 0-1), optional
    /// times and phase change values as the flags say, the messages, then the checksum.
    pub fn v2_header(hflags: u8, msgs: &[u8]) -> Vec<u8> {
        let mut v = b"OHDR".to_vec();
        v.push(2);
        v.push(hflags);
        if hflags & 0x20 != 0 {
            for t in [1u32, 2, 3, 4] {
                v.extend_from_slice(&t.to_le_bytes());
            }
        }
        if hflags & 0x10 != 0 {
            v.extend_from_slice(&12u16.to_le_bytes());
            v.extend_from_slice(&10u16.to_le_bytes());
        }
        let width = 1usize << (hflags & 3);
        v.extend_from_slice(&(msgs.len() as u64).to_le_bytes()[..width]);
        v.extend_from_slice(msgs);
        seal(v)
    }

    /// A v2 continuation chunk: `OCHK`, messages, checksum.
    pub fn v2_chunk(msgs: &[u8]) -> Vec<u8> {
        let mut v = b"OCHK".to_vec();
        v.extend_from_slice(msgs);
        seal(v)
    }

    /// Append the lookup3 checksum of `v`.
    pub fn seal(mut v: Vec<u8>) -> Vec<u8> {
        let sum = lookup3(&v, 0);
        v.extend_from_slice(&sum.to_le_bytes());
        v
    }

    /// A continuation message body with 8-byte address and length.
    pub fn cont(addr: u64, len: u64) -> Vec<u8> {
        let mut v = addr.to_le_bytes().to_vec();
        v.extend_from_slice(&len.to_le_bytes());
        v
    }
}
