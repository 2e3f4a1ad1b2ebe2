//! Attribute message (0x000C), versions 1-3.

use super::dataspace::Dataspace;
use super::datatype::Datatype;
use super::shared::SharedMessage;
use crate::error::Result;
use crate::io::Sizes;

/// A datatype that is either stored inline or shared (a committed datatype or SOHM entry).
#[derive(Clone, Debug, PartialEq)]
pub enum MaybeShared<T> {
    Inline(T),
    Shared(SharedMessage),
}

/// An attribute message: name, type, space and raw value bytes.
#[derive(Clone, Debug)]
pub struct AttributeMessage {
    pub name: String,
    pub datatype: MaybeShared<Datatype>,
    pub dataspace: MaybeShared<Dataspace>,
    /// Raw value bytes: npoints × element size (vlen elements are heap references).
    pub data: Vec<u8>,
}

impl AttributeMessage {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<AttributeMessage> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("attribute", "not implemented yet"))
    }
}
