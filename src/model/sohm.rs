//! Shared object header messages (SOHM): the master table (`SMTB`, spec "III.H") found through
//! the superblock extension's shared message table message, mapping message types to the
//! fractal heaps that hold shared bodies.

use std::collections::HashMap;

use super::file::File;
use super::ObjectId;
use crate::error::{Error, Result};
use crate::format::messages::{types, Message};
use crate::io::{checksum, Cursor};

/// Map message type → fractal heap address, empty when the file shares no messages.
pub(super) fn read_sohm_indexes(file: &File) -> Result<HashMap<u16, u64>> {
    let mut map = HashMap::new();
    let Some(ext) = file.superblock().extension_addr else {
        return Ok(map);
    };
    let h = file.header(ObjectId(ext))?;
    let Some(raw) = h.first(types::SOHM_TABLE) else {
        return Ok(map);
    };
    let Message::SohmTable(t) = file.decode(raw)? else {
        return Ok(map);
    };
    let sizes = file.sizes();
    let entry = 1 + 1 + 2 + 4 + 2 + 2 + 2 + 2 * sizes.offset as usize;
    let len = 4 + entry * t.nindexes as usize + 4;
    let data = file
        .storage()
        .read_vec(t.table_addr, len as u64, "shared message table")?;
    if !checksum::verify_lookup3(&data) {
        return Err(Error::Checksum {
            what: "shared message table",
            addr: t.table_addr,
        });
    }
    let mut c = Cursor::new(&data, t.table_addr, "shared message table");
    c.signature(b"SMTB")?;
    for _ in 0..t.nindexes {
        let _version = c.u8()?;
        let _index_type = c.u8()?;
        let flags = c.u16()?;
        let _min_size = c.u32()?;
        let _list_cutoff = c.u16()?;
        let _btree_cutoff = c.u16()?;
        let _count = c.u16()?;
        let _index_addr = c.offset(sizes)?;
        let heap_addr = c.offset(sizes)?;
        // "Message type flags": bit N set when the index holds messages of type N (libhdf5
        // writes `1 << type`; its fill-value flag covers both fill value messages).
        for mtype in 0..16u16 {
            if flags & (1 << mtype) != 0 {
                map.insert(mtype, heap_addr);
            }
        }
    }
    Ok(map)
}
