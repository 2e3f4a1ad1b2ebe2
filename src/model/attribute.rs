//! Attributes: compact attribute messages in the object header, or dense storage (attribute
//! info message → fractal heap of attribute messages, enumerated through the v2 B-tree name
//! index, record type 8). Shared datatypes and dataspaces are resolved; variable-length string
//! values are fetched from the global heap.
//!
//! Each attribute's type, space and value are resolved on their own: one that cannot be (a
//! vlen string whose heap object is refused, a shared type that is not one) is an error for
//! that attribute ([`RefusedAttribute`]), and [`super::File::attribute_results`] gives the
//! others beside it. The messages themselves (compact, or the dense heap and its index) are
//! the object's: a failure there fails the whole set.

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

/// An attribute whose type, space or value could not be resolved: its name and why.
#[derive(Clone, Debug)]
pub struct RefusedAttribute {
    pub name: String,
    pub error: Error,
}

/// An attribute, or why it could not be resolved.
pub type AttrResult = std::result::Result<Attribute, RefusedAttribute>;

/// All attributes of the object whose header is `h`, in storage order, each resolved on its
/// own: one that fails is refused alone.
pub(super) fn read_attribute_results(file: &File, h: &ObjectHeader) -> Result<Vec<AttrResult>> {
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
    Ok(msgs
        .into_iter()
        .map(|m| {
            let name = m.name.clone();
            to_attribute(file, h.addr, m, &mut heaps)
                .map_err(|error| RefusedAttribute { name, error })
        })
        .collect())
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

/// The datatype of attribute `name` of the object whose header is at `owner`.
fn resolve_type(file: &File, owner: u64, name: &str, t: MaybeShared<Datatype>) -> Result<Datatype> {
    match t {
        MaybeShared::Inline(t) => Ok(t),
        MaybeShared::Shared(s) => match file.resolve_shared(types::DATATYPE, &s)? {
            Message::Datatype(t) => Ok(t),
            _ => Err(Error::corrupt(
                "attribute",
                owner,
                format!("{name}: shared datatype is not a datatype"),
            )),
        },
    }
}

/// The dataspace of attribute `name` of the object whose header is at `owner`.
fn resolve_space(
    file: &File,
    owner: u64,
    name: &str,
    s: MaybeShared<Dataspace>,
) -> Result<Dataspace> {
    match s {
        MaybeShared::Inline(s) => Ok(s),
        MaybeShared::Shared(sh) => match file.resolve_shared(types::DATASPACE, &sh)? {
            Message::Dataspace(s) => Ok(s),
            _ => Err(Error::corrupt(
                "attribute",
                owner,
                format!("{name}: shared dataspace is not a dataspace"),
            )),
        },
    }
}

/// The value bytes of attribute `name` (of the object whose header is at `owner`), cut to
/// what its type and shape need. With a shared type or space the parser could not know the
/// value's length, so it is cut here; fewer bytes than needed is corrupt.
fn cut_value(
    owner: u64,
    name: &str,
    mut data: Vec<u8>,
    dtype: &Datatype,
    space: &Dataspace,
) -> Result<Vec<u8>> {
    let want = AttributeMessage::value_len(dtype, space).ok_or_else(|| {
        Error::corrupt("attribute", owner, format!("{name}: value size overflows"))
    })?;
    if (data.len() as u64) < want {
        return Err(Error::corrupt(
            "attribute",
            owner,
            format!(
                "{name}: value has {} bytes, type and shape need {want}",
                data.len()
            ),
        ));
    }
    data.truncate(want as usize);
    Ok(data)
}

/// Attribute `m` of the object whose header is at `owner`, its type and space resolved and
/// its vlen strings read.
fn to_attribute(
    file: &File,
    owner: u64,
    m: AttributeMessage,
    heaps: &mut HashMap<u64, GlobalHeapCollection>,
) -> Result<Attribute> {
    let dtype = resolve_type(file, owner, &m.name, m.datatype)?;
    let space = resolve_space(file, owner, &m.name, m.dataspace)?;
    let data = cut_value(owner, &m.name, m.data, &dtype, &space)?;
    let shape = match space.kind {
        DataspaceKind::Null => None,
        _ => Some(space.dims.clone()),
    };
    let strings = match &dtype.class {
        TypeClass::VarLen {
            kind: VarLenKind::String { .. },
            ..
        } => Some(read_vlen_strings(file, owner, &data, dtype.size, heaps)?),
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

/// Decode the vlen string elements of an attribute of the object whose header is at `owner`:
/// each is a 4-byte length and a global heap ID. A string's object is read only when its
/// recorded size is that length (see [`GlobalHeapCollection::object`]).
pub(super) fn read_vlen_strings(
    file: &File,
    owner: u64,
    data: &[u8],
    elem_size: u32,
    heaps: &mut HashMap<u64, GlobalHeapCollection>,
) -> Result<Vec<Option<String>>> {
    let sizes = file.sizes();
    let elem = elem_size as usize;
    if elem == 0 {
        return Ok(Vec::new());
    }
    let need = 8 + sizes.offset as usize;
    if elem < need {
        return Err(Error::corrupt(
            "attribute",
            owner,
            format!("variable-length string references of {elem} bytes, {need} needed"),
        ));
    }
    let mut out = Vec::with_capacity(data.len() / elem);
    for chunk in data.chunks_exact(elem) {
        let mut c = Cursor::new(chunk, owner, "variable-length string");
        let len = c.u32()?;
        let id = GlobalHeapId::parse(&mut c, sizes)?;
        if id.collection == 0 || id.collection == UNDEFINED_ADDR {
            out.push(None);
            continue;
        }
        if !heaps.contains_key(&id.collection) {
            if heaps.len() > 64 {
                heaps.clear();
            }
            let col = GlobalHeapCollection::open(file.storage(), id.collection, sizes)?;
            heaps.insert(id.collection, col);
        }
        let bytes = heaps[&id.collection].object(file.storage(), id.index, len as u64)?;
        out.push(Some(String::from_utf8_lossy(&bytes).into_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::messages::datatype::ByteOrder;

    fn u32_type() -> Datatype {
        Datatype {
            version: 1,
            size: 4,
            class: TypeClass::FixedPoint {
                order: ByteOrder::Little,
                signed: false,
                bit_offset: 0,
                precision: 32,
            },
        }
    }

    fn simple(dims: &[u64]) -> Dataspace {
        Dataspace {
            kind: DataspaceKind::Simple,
            dims: dims.to_vec(),
            max_dims: None,
        }
    }

    /// A value shorter than its type and shape need, and a shape whose size overflows, are
    /// refused naming the attribute and the address of the object header holding it (not
    /// the placeholder 0x0); a longer value is cut.
    #[test]
    fn value_errors_name_the_object_header() {
        let e = cut_value(0x4a0, "a", vec![0; 7], &u32_type(), &simple(&[2])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "corrupt attribute at 0x4a0: a: value has 7 bytes, type and shape need 8"
        );
        let e = cut_value(0x4a0, "b", vec![], &u32_type(), &simple(&[1 << 62, 8])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "corrupt attribute at 0x4a0: b: value size overflows"
        );
        let v = cut_value(0x4a0, "c", (0..10).collect(), &u32_type(), &simple(&[2])).unwrap();
        assert_eq!(v, [0, 1, 2, 3, 4, 5, 6, 7]);
    }

    /// A vlen string attribute whose heap object records another size than the string's
    /// length is refused, naming the collection, its address and the expected size; before,
    /// the object was cut to the length (or taken whole when shorter).
    #[test]
    fn a_vlen_string_of_another_size_than_its_heap_object_is_refused() {
        use crate::model::{File, OpenOptions};
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/mount-tests/fixtures/data/attrs_earliest.h5"
        );
        let mut bytes = std::fs::read(fixture).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.h5");
        std::fs::write(&path, &bytes).unwrap();
        let f = File::open(&path, &OpenOptions::default()).unwrap();
        let attrs = f.attributes(f.root()).unwrap();
        let title = attrs.iter().find(|a| a.name == "title").unwrap();
        assert_eq!(title.render(), "attribute fixtures");
        drop(f);
        // The heap object holding the title: its 8-byte size (18) just before the text.
        let text = b"attribute fixtures";
        let at = (8..bytes.len() - text.len())
            .find(|&i| &bytes[i..i + text.len()] == text && bytes[i - 8..i] == 18u64.to_le_bytes())
            .unwrap();
        bytes[at - 8..at].copy_from_slice(&19u64.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let f = File::open(&path, &OpenOptions::default()).unwrap();
        let e = f.attributes(f.root()).unwrap_err().to_string();
        assert!(e.contains("corrupt global heap collection at 0x"), "{e}");
        assert!(!e.contains("at 0x0:"), "{e}");
        assert!(
            e.contains("has 19 bytes where its reference expects 18"),
            "{e}"
        );
        // One by one, the title alone is refused, with that error; its neighbour is read.
        let each = f.attribute_results(f.root()).unwrap();
        assert_eq!(each.len(), 2);
        let Err(refused) = &each[0] else {
            panic!("{:?}", each[0])
        };
        assert_eq!(refused.name, "title");
        assert_eq!(refused.error.to_string(), e);
        let Ok(version) = &each[1] else {
            panic!("{:?}", each[1])
        };
        assert_eq!(
            (version.name.as_str(), version.render().as_str()),
            ("version", "3")
        );
    }
}
