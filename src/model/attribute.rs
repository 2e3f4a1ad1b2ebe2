//! Attributes: compact attribute messages in the object header, or dense storage (attribute
//! info message → fractal heap of attribute messages, enumerated through the v2 B-tree name
//! index, record type 8). Shared datatypes and dataspaces are resolved; variable-length string
//! values are fetched from the global heap.

use std::collections::HashMap;

use super::file::File;
use super::value;
use crate::error::{Error, Result};
use crate::format::btree_v2::{self, BtreeV2Header};
use crate::format::fractal_heap::FractalHeap;
use crate::format::global_heap::{GlobalHeapCollection, GlobalHeapId};
use crate::format::messages::attribute::{AttributeMessage, MaybeShared};
use crate::format::messages::dataspace::{Dataspace, DataspaceKind};
use crate::format::messages::datatype::{Datatype, TypeClass, VarLenKind};
use crate::format::messages::{types, Message};
use crate::format::object_header::ObjectHeader;
use crate::io::{Cursor, UNDEFINED_ADDR};

/// Attributes read from one object at most.
const MAX_ATTRIBUTES: usize = 1_000_000;

/// An attribute with its value.
#[derive(Clone, Debug)]
pub struct Attribute {
    pub name: String,
    pub dtype: Datatype,
    /// Shape (empty for scalar; `None` for a null dataspace).
    pub shape: Option<Vec<u64>>,
    /// Raw value bytes in the file's representation (vlen elements: their heap references).
    pub raw: Vec<u8>,
    /// Variable-length strings, resolved from the global heap (vlen string attributes only).
    pub strings: Option<Vec<Option<String>>>,
}

impl Attribute {
    /// The value as text, the way numpy prints it (strings as UTF-8, numbers and arrays as
    /// numpy's `str()`), used for xattrs and `inspect`.
    pub fn render(&self) -> String {
        let Some(shape) = &self.shape else {
            return String::new();
        };
        if let Some(strings) = &self.strings {
            let items: Vec<String> = strings
                .iter()
                .map(|s| s.clone().unwrap_or_default())
                .collect();
            return value::render_strings(shape, &items);
        }
        value::render_array(&self.dtype, shape, &self.raw)
    }
}

/// All attributes of the object whose header is `h`, in storage order.
pub(super) fn read_attributes(file: &File, h: &ObjectHeader) -> Result<Vec<Attribute>> {
    let mut msgs = Vec::new();
    for raw in &h.messages {
        match raw.mtype {
            types::ATTRIBUTE => {
                if let Message::Attribute(a) = file.decode(raw)? {
                    msgs.push(a);
                }
            }
            types::ATTRIBUTE_INFO => {
                if let Message::AttributeInfo(info) = file.decode(raw)? {
                    if info.heap_addr != UNDEFINED_ADDR && info.name_btree_addr != UNDEFINED_ADDR {
                        read_dense(file, info.heap_addr, info.name_btree_addr, &mut msgs)?;
                    }
                }
            }
            _ => {}
        }
    }
    let mut heaps = HashMap::new();
    msgs.into_iter()
        .map(|m| to_attribute(file, m, &mut heaps))
        .collect()
}

fn read_dense(
    file: &File,
    heap_addr: u64,
    btree_addr: u64,
    out: &mut Vec<AttributeMessage>,
) -> Result<()> {
    let storage = file.storage();
    let sizes = file.sizes();
    let heap = FractalHeap::open(storage, heap_addr, sizes)?;
    let bt = BtreeV2Header::read(storage, btree_addr, sizes)?;
    if bt.record_type != 8 {
        return Err(Error::corrupt(
            "attribute name index",
            btree_addr,
            format!("record type {} (expected 8)", bt.record_type),
        ));
    }
    btree_v2::for_each_record(storage, &bt, sizes, &mut |rec| {
        // Record type 8: heap ID (8 bytes), flags, creation order, name hash.
        let id = rec.get(..8).ok_or_else(|| {
            Error::corrupt("attribute name record", btree_addr, "record too short")
        })?;
        let flags = rec.get(8).copied().unwrap_or(0);
        let body = heap.get(storage, sizes, id)?;
        let msg = if flags & crate::format::object_header::flags::SHARED != 0 {
            let shared =
                crate::format::messages::shared::SharedMessage::parse(&body, heap_addr, sizes)?;
            match file.resolve_shared(types::ATTRIBUTE, &shared)? {
                Message::Attribute(a) => a,
                _ => {
                    return Err(Error::corrupt(
                        "shared attribute",
                        heap_addr,
                        "not an attribute",
                    ))
                }
            }
        } else {
            AttributeMessage::parse(&body, heap_addr, sizes)?
        };
        out.push(msg);
        if out.len() > MAX_ATTRIBUTES {
            return Err(Error::limit(
                "dense attributes",
                btree_addr,
                "too many attributes",
            ));
        }
        Ok(true)
    })
}

fn resolve_type(file: &File, t: MaybeShared<Datatype>) -> Result<Datatype> {
    match t {
        MaybeShared::Inline(t) => Ok(t),
        MaybeShared::Shared(s) => match file.resolve_shared(types::DATATYPE, &s)? {
            Message::Datatype(t) => Ok(t),
            _ => Err(Error::corrupt("shared datatype", 0, "not a datatype")),
        },
    }
}

fn resolve_space(file: &File, s: MaybeShared<Dataspace>) -> Result<Dataspace> {
    match s {
        MaybeShared::Inline(s) => Ok(s),
        MaybeShared::Shared(sh) => match file.resolve_shared(types::DATASPACE, &sh)? {
            Message::Dataspace(s) => Ok(s),
            _ => Err(Error::corrupt("shared dataspace", 0, "not a dataspace")),
        },
    }
}

fn to_attribute(
    file: &File,
    m: AttributeMessage,
    heaps: &mut HashMap<u64, GlobalHeapCollection>,
) -> Result<Attribute> {
    let dtype = resolve_type(file, m.datatype)?;
    let space = resolve_space(file, m.dataspace)?;
    // With a shared type or space the parser could not know the value's length: cut it now.
    let mut data = m.data;
    let want = AttributeMessage::value_len(&dtype, &space).ok_or_else(|| {
        Error::corrupt("attribute", 0, format!("{}: value size overflows", m.name))
    })?;
    if (data.len() as u64) < want {
        return Err(Error::corrupt(
            "attribute",
            0,
            format!(
                "{}: value has {} bytes, type and shape need {want}",
                m.name,
                data.len()
            ),
        ));
    }
    data.truncate(want as usize);
    let shape = match space.kind {
        DataspaceKind::Null => None,
        _ => Some(space.dims.clone()),
    };
    let strings = match &dtype.class {
        TypeClass::VarLen {
            kind: VarLenKind::String { .. },
            ..
        } => Some(read_vlen_strings(file, &data, dtype.size, heaps)?),
        _ => None,
    };
    Ok(Attribute {
        name: m.name,
        dtype,
        shape,
        raw: data,
        strings,
    })
}

/// Decode vlen string elements: each is a 4-byte length and a global heap ID.
pub(super) fn read_vlen_strings(
    file: &File,
    data: &[u8],
    elem_size: u32,
    heaps: &mut HashMap<u64, GlobalHeapCollection>,
) -> Result<Vec<Option<String>>> {
    let sizes = file.sizes();
    let elem = elem_size as usize;
    if elem == 0 {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(data.len() / elem);
    for chunk in data.chunks_exact(elem) {
        let mut c = Cursor::new(chunk, 0, "variable-length string");
        let len = c.u32()? as usize;
        let id = GlobalHeapId::parse(&mut c, sizes)?;
        if id.collection == 0 || id.collection == UNDEFINED_ADDR {
            out.push(None);
            continue;
        }
        if !heaps.contains_key(&id.collection) {
            if heaps.len() > 64 {
                heaps.clear();
            }
            let col = GlobalHeapCollection::read(file.storage(), id.collection, sizes)?;
            heaps.insert(id.collection, col);
        }
        let obj = heaps[&id.collection].get(id.index).ok_or_else(|| {
            Error::corrupt(
                "global heap",
                id.collection,
                format!("no object {}", id.index),
            )
        })?;
        let bytes = obj.get(..len).unwrap_or(obj);
        out.push(Some(String::from_utf8_lossy(bytes).into_owned()));
    }
    Ok(out)
}
