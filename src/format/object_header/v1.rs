//! Version 1 object headers (spec "IV.A.1.a"): no signature, no checksum.
//!
//! The prefix is 16 bytes: version 1, reserved, total message count (2), reference count (4),
//! chunk-0 size (4), then 4 bytes of padding so that messages start 8-byte aligned. Each
//! message has an 8-byte header (type 2, size 2, flags 1, reserved 3) and a body whose size
//! libhdf5 pads to a multiple of 8. Continuation chunks are raw runs of messages.

use super::{ChunkRef, Follow, ObjectHeader, RawMessage, Walk};
use crate::error::Result;
use crate::io::{Cursor, Sizes, Storage};

/// Prefix size including the alignment padding.
pub const PREFIX_LEN: u64 = 16;
/// Size of a message header.
const MSG_HEADER_LEN: usize = 8;
/// Messages are aligned on this boundary within a chunk.
const ALIGN: usize = 8;

/// Read a version 1 header at `addr` and the continuation chunks `follow` takes;
/// also the continuation chunks left unread (none when read whole).
pub(crate) fn read(
    storage: &Storage,
    addr: u64,
    sizes: Sizes,
    follow: Follow,
) -> Result<(ObjectHeader, Vec<ChunkRef>)> {
    let prefix = storage.read_vec(addr, PREFIX_LEN, "object header (v1)")?;
    let mut c = Cursor::new(&prefix, addr, "object header (v1)");
    let version = c.u8()?;
    if version != 1 {
        return Err(c.corrupt(format!("version {version}, expected 1")));
    }
    c.skip(1)?;
    let _nmessages = c.u16()?; // not trusted: chunks are parsed to their end instead
    let refcount = c.u32()?;
    let chunk0_len = c.u32()? as u64;
    let chunk0_addr = addr
        .checked_add(PREFIX_LEN)
        .ok_or_else(|| c.corrupt("address overflow"))?;

    let mut walk = Walk::new(storage, addr, sizes);
    walk.charge(PREFIX_LEN + chunk0_len)?;
    let chunk0 = storage.read_vec(chunk0_addr, chunk0_len, "object header (v1)")?;
    parse_chunk(&mut walk, &chunk0, chunk0_addr)?;
    while let Some(chunk) = walk.next_chunk(follow) {
        walk.charge(chunk.len)?;
        let data = storage.read_vec(chunk.addr, chunk.len, "object header continuation (v1)")?;
        parse_chunk(&mut walk, &data, chunk.addr)?;
    }
    let unread = walk.unread();
    let header = ObjectHeader {
        addr,
        version: 1,
        refcount,
        header_flags: 0,
        times: None,
        messages: walk.messages,
    };
    Ok((header, unread))
}

/// Decode the messages of one chunk (its bytes `data`, read from `addr`).
fn parse_chunk(walk: &mut Walk, data: &[u8], addr: u64) -> Result<()> {
    let mut c = Cursor::new(data, addr, "object header chunk (v1)");
    while c.remaining() >= MSG_HEADER_LEN {
        let mtype = c.u16()?;
        let size = c.u16()? as usize;
        let flags = c.u8()?;
        c.skip(3)?;
        let (body_addr, body) = super::message_body(&mut c, mtype, size, addr)?;
        walk.accept(RawMessage {
            mtype,
            flags,
            creation_order: None,
            addr: body_addr,
            data: body.to_vec(),
        })?;
        // A final message may end short of an alignment boundary at the chunk end.
        if c.remaining() >= ALIGN {
            c.align(ALIGN)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::ObjectHeader;
    use crate::error::Error;
    use crate::io::testutil::memory_storage;
    use crate::io::Sizes;

    #[test]
    fn v1_with_continuation() {
        // Header at 0: dataspace-like message, continuation to 0x60 (24 bytes), NIL.
        let mut chunk0 = v1_msg(0x0001, 0, &[1, 2, 3]);
        chunk0.extend(v1_msg(0x0010, 0, &cont(0x60, 24)));
        chunk0.extend(v1_msg(0x0000, 0, &[0; 8]));
        let mut image = v1_header(4, 3, &chunk0);
        assert!(image.len() <= 0x60);
        image.resize(0x60, 0);
        image.extend(v1_msg(0x000D, 0, b"comment\0"));
        image.extend(v1_msg(0x0000, 0, &[]));
        let s = memory_storage(&image);
        let h = ObjectHeader::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(h.version, 1);
        assert_eq!(h.refcount, 3);
        let types: Vec<u16> = h.messages.iter().map(|m| m.mtype).collect();
        assert_eq!(types, [0x0001, 0x000D]);
        assert_eq!(h.messages[0].addr, 16 + 8);
        assert_eq!(&h.messages[0].data[..3], &[1, 2, 3]);
        assert_eq!(h.messages[1].addr, 0x68);
        assert_eq!(h.messages[1].data, b"comment\0");
    }

    #[test]
    fn v1_first_chunk_only() {
        // As above, but the continuation points past the end of the file: reading the first
        // chunk alone does not touch it, and names the chunk left unread.
        let mut chunk0 = v1_msg(0x0001, 0, &[1, 2, 3]);
        chunk0.extend(v1_msg(0x0010, 0, &cont(0x1_0000, 24)));
        let image = v1_header(2, 1, &chunk0);
        let s = memory_storage(&image);
        let (h, unread) = ObjectHeader::read_first_chunk(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(
            unread,
            [super::super::ChunkRef {
                addr: 0x1_0000,
                len: 24
            }]
        );
        assert_eq!(h.messages.len(), 1);
        assert!(ObjectHeader::read(&s, 0, Sizes::DEFAULT).is_err());
        // A header of one chunk is whole.
        let image = v1_header(1, 1, &v1_msg(0x0001, 0, &[1, 2, 3]));
        let s = memory_storage(&image);
        assert!(ObjectHeader::read_first_chunk(&s, 0, Sizes::DEFAULT)
            .unwrap()
            .1
            .is_empty());
    }

    #[test]
    fn v1_message_beyond_chunk() {
        let mut m = v1_msg(0x0001, 0, &[0; 8]);
        m[2] = 64; // size 64 in a 16-byte chunk
        let image = v1_header(1, 1, &m);
        let s = memory_storage(&image);
        let e = ObjectHeader::read(&s, 0, Sizes::DEFAULT).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    }

    #[test]
    fn v1_continuation_cycle() {
        // Chunk at 0x40 continues to itself.
        let chunk0 = v1_msg(0x0010, 0, &cont(0x40, 24));
        let mut image = v1_header(2, 1, &chunk0);
        image.resize(0x40, 0);
        image.extend(v1_msg(0x0010, 0, &cont(0x40, 24)));
        let s = memory_storage(&image);
        let e = ObjectHeader::read(&s, 0, Sizes::DEFAULT).unwrap_err();
        assert!(e.to_string().contains("cycle"), "{e}");
    }

    #[test]
    fn v1_continuation_back_to_header() {
        let chunk0 = v1_msg(0x0010, 0, &cont(0, 24));
        let image = v1_header(1, 1, &chunk0);
        let s = memory_storage(&image);
        assert!(ObjectHeader::read(&s, 0, Sizes::DEFAULT).is_err());
    }

    #[test]
    fn v1_chunk_past_eof() {
        let chunk0 = v1_msg(0x0010, 0, &cont(0x1000, 1 << 40));
        let image = v1_header(1, 1, &chunk0);
        let s = memory_storage(&image);
        assert!(ObjectHeader::read(&s, 0, Sizes::DEFAULT).is_err());
    }

    #[test]
    fn v1_fail_if_unknown() {
        let chunk0 = v1_msg(0x00C8, 0x80, &[0; 8]);
        let s = memory_storage(&v1_header(1, 1, &chunk0));
        let e = ObjectHeader::read(&s, 0, Sizes::DEFAULT).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        // Without the flag an unknown message is kept raw.
        let chunk0 = v1_msg(0x00C8, 0, &[0; 8]);
        let s = memory_storage(&v1_header(1, 1, &chunk0));
        let h = ObjectHeader::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(h.messages[0].mtype, 0x00C8);
        // A known type with the flag is fine.
        let chunk0 = v1_msg(0x000D, 0x80, b"x\0");
        let s = memory_storage(&v1_header(1, 1, &chunk0));
        assert!(ObjectHeader::read(&s, 0, Sizes::DEFAULT).is_ok());
    }
}
