//! Version 2 object headers (spec "IV.A.1.b"): signature `OHDR`, lookup3 checksum per chunk.
//!
//! Prefix: `OHDR`, version 2, flags, then as the flags say: four 4-byte times (bit 5), the
//! attribute phase change values max-compact/min-dense (bit 4), and the chunk-0 size in 1, 2,
//! 4 or 8 bytes (bits 0-1). Chunk 0's messages follow, then the checksum of everything from
//! `OHDR` on. Continuation chunks are `OCHK`, messages, checksum; their length in the
//! continuation message covers signature and checksum. A message header is type (1), size (2),
//! flags (1) and, when flag bit 2 (attribute creation order tracked) is set, a 2-byte creation
//! order. Messages are not aligned; a chunk may end in a gap shorter than a message header.

use super::{ChunkRef, Follow, HeaderTimes, ObjectHeader, RawMessage, Walk};
use crate::error::{Error, Result};
use crate::format::messages::{self, types};
use crate::io::checksum::verify_lookup3;
use crate::io::{Cursor, Sizes, Storage};

/// Signature of a v2 header's first chunk.
pub const SIGNATURE: &[u8; 4] = b"OHDR";
/// Signature of a v2 continuation chunk.
pub const CHUNK_SIGNATURE: &[u8; 4] = b"OCHK";

/// Header flag bits (spec "Version 2 Object Header", field "Flags").
pub mod header_flags {
    /// Bits 0-1: width of the chunk-0 size field is `1 << (flags & 3)`.
    pub const CHUNK0_SIZE_MASK: u8 = 0x03;
    /// Attribute creation order is tracked: each message header carries a creation order.
    pub const ATTR_ORDER_TRACKED: u8 = 0x04;
    /// Attribute creation order is indexed.
    pub const ATTR_ORDER_INDEXED: u8 = 0x08;
    /// Attribute phase change values are stored.
    pub const ATTR_PHASE_CHANGE: u8 = 0x10;
    /// Access, modification, change and birth times are stored.
    pub const TIMES: u8 = 0x20;
    /// Bits 6-7 are reserved.
    pub const RESERVED: u8 = 0xC0;
}

/// Longest prefix: signature 4, version 1, flags 1, times 16, phase change 4, size 8.
const MAX_PREFIX_LEN: u64 = 34;
/// Signature plus checksum of a continuation chunk.
const CHUNK_OVERHEAD: u64 = 8;

/// Read a version 2 header at `addr` and the continuation chunks `follow` takes;
/// also the continuation chunks left unread (none when read whole).
pub(crate) fn read(
    storage: &Storage,
    addr: u64,
    sizes: Sizes,
    follow: Follow,
) -> Result<(ObjectHeader, Vec<ChunkRef>)> {
    const WHAT: &str = "object header (v2)";
    let prefix = storage.read_up_to(addr, MAX_PREFIX_LEN, WHAT)?;
    let mut c = Cursor::new(&prefix, addr, WHAT);
    c.signature(SIGNATURE)?;
    let version = c.u8()?;
    if version != 2 {
        return Err(c.corrupt(format!("version {version}, expected 2")));
    }
    let hflags = c.u8()?;
    if hflags & header_flags::RESERVED != 0 {
        return Err(c.corrupt(format!("reserved header flag bits set ({hflags:#04x})")));
    }
    let times = if hflags & header_flags::TIMES != 0 {
        Some(HeaderTimes {
            access: c.u32()?,
            modification: c.u32()?,
            change: c.u32()?,
            birth: c.u32()?,
        })
    } else {
        None
    };
    if hflags & header_flags::ATTR_PHASE_CHANGE != 0 {
        c.skip(4)?; // max compact, min dense attributes: storage policy, not needed to read
    }
    let chunk0_len = c.uint(1 << (hflags & header_flags::CHUNK0_SIZE_MASK))?;
    let prefix_len = c.pos() as u64;
    let total = prefix_len
        .checked_add(chunk0_len)
        .and_then(|n| n.checked_add(4))
        .ok_or_else(|| c.corrupt("chunk 0 size overflows"))?;

    let mut walk = Walk::new(storage, addr, sizes);
    let track_order = hflags & header_flags::ATTR_ORDER_TRACKED != 0;
    walk.charge(total)?;
    let data = storage.read_vec(addr, total, WHAT)?;
    if !verify_lookup3(&data) {
        return Err(Error::Checksum { what: WHAT, addr });
    }
    let body = &data[prefix_len as usize..data.len() - 4];
    parse_chunk(&mut walk, body, addr + prefix_len, track_order)?;

    while let Some(chunk) = walk.next_chunk(follow) {
        const CWHAT: &str = "object header continuation (v2)";
        if chunk.len < CHUNK_OVERHEAD {
            return Err(Error::corrupt(
                CWHAT,
                chunk.addr,
                format!("length {} too small", chunk.len),
            ));
        }
        walk.charge(chunk.len)?;
        let data = storage.read_vec(chunk.addr, chunk.len, CWHAT)?;
        Cursor::new(&data, chunk.addr, CWHAT).signature(CHUNK_SIGNATURE)?;
        if !verify_lookup3(&data) {
            return Err(Error::Checksum {
                what: CWHAT,
                addr: chunk.addr,
            });
        }
        parse_chunk(
            &mut walk,
            &data[4..data.len() - 4],
            chunk.addr + 4,
            track_order,
        )?;
    }

    let refcount = match walk.messages.iter().find(|m| m.mtype == types::REFCOUNT) {
        Some(m) => messages::parse_refcount(&m.data, m.addr)?,
        None => 1,
    };
    let unread = walk.unread();
    let header = ObjectHeader {
        addr,
        version: 2,
        refcount,
        header_flags: hflags,
        times,
        messages: walk.messages,
    };
    Ok((header, unread))
}

/// Decode the messages of one chunk's message area (`data`, at file address `addr`).
fn parse_chunk(walk: &mut Walk, data: &[u8], addr: u64, track_order: bool) -> Result<()> {
    let header_len = if track_order { 6 } else { 4 };
    let mut c = Cursor::new(data, addr, "object header chunk (v2)");
    // Fewer bytes than a message header left: the gap before the checksum.
    while c.remaining() >= header_len {
        let mtype = c.u8()? as u16;
        let size = c.u16()? as usize;
        let flags = c.u8()?;
        let creation_order = if track_order { Some(c.u16()?) } else { None };
        let (body_addr, body) = super::message_body(&mut c, mtype, size, addr)?;
        walk.accept(RawMessage {
            mtype,
            flags,
            creation_order,
            addr: body_addr,
            data: body.to_vec(),
        })?;
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
    fn v2_creation_order_gap_times_and_continuation() {
        // Flags: 2-byte chunk size, order tracked, phase change, times.
        let hflags = 0x01 | 0x04 | 0x10 | 0x20;
        let mut msgs = v2_msg(0x0C, 0, Some(7), b"attr");
        msgs.extend(v2_msg(0x10, 0, Some(0), &cont(0x100, 0)));
        msgs.extend(v2_msg(0x16, 0, Some(0), &[0, 5, 0, 0, 0]));
        msgs.extend(v2_msg(0x00, 0, Some(0), &[0; 3]));
        msgs.extend([0u8; 5]); // gap shorter than a 6-byte message header
        let mut image = v2_header(hflags, &msgs);
        let chunk = v2_chunk(&{
            let mut m = v2_msg(0x0C, 0, Some(8), b"second");
            m.extend([0u8; 2]);
            m
        });
        // Patch the continuation length now that the chunk size is known.
        let len_pos = image
            .windows(8)
            .position(|w| w == 0x100u64.to_le_bytes())
            .unwrap()
            + 8;
        image[len_pos..len_pos + 8].copy_from_slice(&(chunk.len() as u64).to_le_bytes());
        let n = image.len() - 4;
        image.truncate(n);
        let mut image = seal(image);
        image.resize(0x100, 0);
        image.extend(&chunk);
        let s = memory_storage(&image);
        let h = ObjectHeader::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(h.version, 2);
        assert_eq!(h.refcount, 5);
        assert_eq!(h.times.unwrap().birth, 4);
        let got: Vec<(u16, Option<u16>)> = h
            .messages
            .iter()
            .map(|m| (m.mtype, m.creation_order))
            .collect();
        assert_eq!(got, [(0x0C, Some(7)), (0x16, Some(0)), (0x0C, Some(8))]);
        assert_eq!(h.messages[2].data, b"second");
        assert_eq!(h.messages[2].addr, 0x100 + 4 + 6);
    }

    #[test]
    fn v2_plain() {
        let msgs = v2_msg(0x0D, 0, None, b"hello\0");
        let s = memory_storage(&v2_header(0, &msgs));
        let h = ObjectHeader::read(&s, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(h.refcount, 1);
        assert!(h.times.is_none());
        assert_eq!(h.messages.len(), 1);
        assert_eq!(h.messages[0].addr, 4 + 1 + 1 + 1 + 4);
    }

    #[test]
    fn v2_checksum_failure() {
        let msgs = v2_msg(0x0D, 0, None, b"hello\0");
        let mut image = v2_header(0, &msgs);
        image[10] ^= 1;
        let s = memory_storage(&image);
        let e = ObjectHeader::read(&s, 0, Sizes::DEFAULT).unwrap_err();
        assert!(matches!(e, Error::Checksum { addr: 0, .. }), "{e}");
    }

    #[test]
    fn v2_continuation_cycle() {
        // Chunk at 0x80 continues to itself.
        let msgs = v2_msg(0x10, 0, None, &cont(0x80, 28));
        let mut image = v2_header(0, &msgs);
        image.resize(0x80, 0);
        let chunk = v2_chunk(&v2_msg(0x10, 0, None, &cont(0x80, 28)));
        assert_eq!(chunk.len(), 28);
        image.extend(chunk);
        let s = memory_storage(&image);
        let e = ObjectHeader::read(&s, 0, Sizes::DEFAULT).unwrap_err();
        assert!(e.to_string().contains("cycle"), "{e}");
    }

    #[test]
    fn v2_message_beyond_chunk_and_fail_if_unknown() {
        let mut msgs = v2_msg(0x0D, 0, None, b"hello\0");
        msgs[1] = 200;
        let s = memory_storage(&v2_header(0, &msgs));
        let e = ObjectHeader::read(&s, 0, Sizes::DEFAULT).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }), "{e}");

        let msgs = v2_msg(0x30, 0x80, None, b"x");
        let s = memory_storage(&v2_header(0, &msgs));
        let e = ObjectHeader::read(&s, 0, Sizes::DEFAULT).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    }

    #[test]
    fn v2_bad_chunk_signature() {
        let msgs = v2_msg(0x10, 0, None, &cont(0x80, 12));
        let mut image = v2_header(0, &msgs);
        image.resize(0x80, 0);
        let mut chunk = v2_chunk(&[0u8; 4]);
        chunk[0] = b'X';
        image.extend(chunk);
        let s = memory_storage(&image);
        assert!(ObjectHeader::read(&s, 0, Sizes::DEFAULT).is_err());
    }
}
