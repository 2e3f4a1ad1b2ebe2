//! Header messages (spec "IV.A.2"): one module per message type, one dispatch point
//! ([`parse`]). Every parser takes the message body, its relative file address (for errors)
//! and the file's [`Sizes`].

pub mod attribute;
pub mod attribute_info;
pub mod comment;
pub mod dataspace;
pub mod datatype;
pub mod external;
pub mod fill_value;
pub mod filter_pipeline;
pub mod group_info;
pub mod layout;
pub mod link;
pub mod link_info;
pub mod mtime;
pub mod shared;
pub mod sohm_table;
pub mod symbol_table;

use crate::error::Result;
use crate::io::{Cursor, Sizes};

/// Message type numbers.
pub mod types {
    pub const NIL: u16 = 0x0000;
    pub const DATASPACE: u16 = 0x0001;
    pub const LINK_INFO: u16 = 0x0002;
    pub const DATATYPE: u16 = 0x0003;
    pub const FILL_VALUE_OLD: u16 = 0x0004;
    pub const FILL_VALUE: u16 = 0x0005;
    pub const LINK: u16 = 0x0006;
    pub const EXTERNAL_FILES: u16 = 0x0007;
    pub const LAYOUT: u16 = 0x0008;
    pub const BOGUS: u16 = 0x0009;
    pub const GROUP_INFO: u16 = 0x000A;
    pub const FILTER_PIPELINE: u16 = 0x000B;
    pub const ATTRIBUTE: u16 = 0x000C;
    pub const COMMENT: u16 = 0x000D;
    pub const MTIME_OLD: u16 = 0x000E;
    pub const SOHM_TABLE: u16 = 0x000F;
    pub const CONTINUATION: u16 = 0x0010;
    pub const SYMBOL_TABLE: u16 = 0x0011;
    pub const MTIME: u16 = 0x0012;
    pub const BTREE_K: u16 = 0x0013;
    pub const DRIVER_INFO: u16 = 0x0014;
    pub const ATTRIBUTE_INFO: u16 = 0x0015;
    pub const REFCOUNT: u16 = 0x0016;
    pub const FSINFO: u16 = 0x0017;
}

/// A decoded message.
#[derive(Clone, Debug)]
pub enum Message {
    Dataspace(dataspace::Dataspace),
    LinkInfo(link_info::LinkInfo),
    Datatype(datatype::Datatype),
    FillValue(fill_value::FillValue),
    Link(link::Link),
    ExternalFiles(external::ExternalFileList),
    Layout(layout::Layout),
    GroupInfo(group_info::GroupInfo),
    FilterPipeline(filter_pipeline::FilterPipeline),
    Attribute(attribute::AttributeMessage),
    Comment(comment::Comment),
    ModificationTime(mtime::ModificationTime),
    SohmTable(sohm_table::SohmTable),
    SymbolTable(symbol_table::SymbolTableMessage),
    AttributeInfo(attribute_info::AttributeInfo),
    /// Reference count of the object (0x0016).
    RefCount(u32),
    /// A message this reader does not decode (skipped unless marked fail-if-unknown).
    Other(u16),
}

/// Decode a message body of type `mtype`. Shared messages (flag bit 1) must be resolved by the
/// caller first with [`shared::SharedMessage::parse`]; this function sees only real bodies.
pub fn parse(mtype: u16, data: &[u8], addr: u64, sizes: Sizes) -> Result<Message> {
    Ok(match mtype {
        types::DATASPACE => Message::Dataspace(dataspace::Dataspace::parse(data, addr, sizes)?),
        types::LINK_INFO => Message::LinkInfo(link_info::LinkInfo::parse(data, addr, sizes)?),
        types::DATATYPE => Message::Datatype(datatype::Datatype::parse(data, addr, sizes)?),
        types::FILL_VALUE_OLD => Message::FillValue(fill_value::FillValue::parse_old(data, addr)?),
        types::FILL_VALUE => Message::FillValue(fill_value::FillValue::parse(data, addr, sizes)?),
        types::LINK => Message::Link(link::Link::parse(data, addr, sizes)?),
        types::EXTERNAL_FILES => {
            Message::ExternalFiles(external::ExternalFileList::parse(data, addr, sizes)?)
        }
        types::LAYOUT => Message::Layout(layout::Layout::parse(data, addr, sizes)?),
        types::GROUP_INFO => Message::GroupInfo(group_info::GroupInfo::parse(data, addr)?),
        types::FILTER_PIPELINE => {
            Message::FilterPipeline(filter_pipeline::FilterPipeline::parse(data, addr, sizes)?)
        }
        types::ATTRIBUTE => {
            Message::Attribute(attribute::AttributeMessage::parse(data, addr, sizes)?)
        }
        types::COMMENT => Message::Comment(comment::Comment::parse(data, addr)?),
        types::MTIME_OLD => {
            Message::ModificationTime(mtime::ModificationTime::parse_old(data, addr)?)
        }
        types::SOHM_TABLE => Message::SohmTable(sohm_table::SohmTable::parse(data, addr, sizes)?),
        types::SYMBOL_TABLE => {
            Message::SymbolTable(symbol_table::SymbolTableMessage::parse(data, addr, sizes)?)
        }
        types::MTIME => Message::ModificationTime(mtime::ModificationTime::parse(data, addr)?),
        types::ATTRIBUTE_INFO => {
            Message::AttributeInfo(attribute_info::AttributeInfo::parse(data, addr, sizes)?)
        }
        types::REFCOUNT => Message::RefCount(parse_refcount(data, addr)?),
        other => Message::Other(other),
    })
}

/// Object reference count message (0x0016, spec "IV.A.2.w"): version 0, then a 4-byte count.
pub fn parse_refcount(data: &[u8], addr: u64) -> Result<u32> {
    let mut c = Cursor::new(data, addr, "reference count message");
    let version = c.u8()?;
    if version != 0 {
        return Err(c.corrupt(format!("unknown version {version}")));
    }
    c.u32()
}

/// Check a message's version byte against the versions a decoder knows.
pub(crate) fn expect_version(c: &mut Cursor<'_>, known: &[u8]) -> Result<u8> {
    let v = c.u8()?;
    if known.contains(&v) {
        Ok(v)
    } else {
        Err(c.corrupt(format!("unknown version {v}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_own_messages() {
        let s = Sizes::DEFAULT;
        assert!(matches!(
            parse(types::REFCOUNT, &[0, 3, 0, 0, 0], 0, s).unwrap(),
            Message::RefCount(3)
        ));
        assert!(parse(types::REFCOUNT, &[1, 3, 0, 0, 0], 0, s).is_err());
        assert!(matches!(
            parse(types::COMMENT, b"hi\0", 0, s).unwrap(),
            Message::Comment(comment::Comment(ref t)) if t == "hi"
        ));
        assert!(matches!(
            parse(types::MTIME, &[1, 0, 0, 0, 10, 0, 0, 0], 0, s).unwrap(),
            Message::ModificationTime(mtime::ModificationTime { seconds: 10 })
        ));
        assert!(matches!(
            parse(types::BOGUS, &[], 0, s).unwrap(),
            Message::Other(types::BOGUS)
        ));
        assert!(matches!(
            parse(0x00ff, &[], 0, s).unwrap(),
            Message::Other(0x00ff)
        ));
    }
}
