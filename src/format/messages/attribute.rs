//! Attribute message (0x000C), versions 1-3 (spec "IV.A.2.m").
//!
//! Header: version, flags (reserved in version 1), the sizes of the name (with its NUL), of
//! the datatype and of the dataspace (2 bytes each), and in version 3 the name's character
//! set. Then the name, the datatype message, the dataspace message and the raw value.
//! * Version 1 pads the name, datatype and dataspace each to a multiple of 8 bytes (the stored
//!   sizes exclude that padding).
//! * Versions 2 and 3 pack them; flag bit 0 says the datatype field holds a shared-message
//!   reference instead of a datatype (a committed datatype, or a SOHM entry), bit 1 the same
//!   for the dataspace.
//!
//! The value is npoints × element size bytes. When the datatype or dataspace is shared, that
//! size is unknown until the caller resolves the reference, so [`AttributeMessage::data`]
//! then holds everything after the dataspace (possibly with trailing padding of a v1 object
//! header); use [`AttributeMessage::value_len`] to cut it once the parts are known.

use super::dataspace::Dataspace;
use super::datatype::Datatype;
use super::shared::SharedMessage;
use crate::error::Result;
use crate::io::{Cursor, Sizes};

/// A datatype that is either stored inline or shared (a committed datatype or SOHM entry).
#[derive(Clone, Debug, PartialEq)]
pub enum MaybeShared<T> {
    Inline(T),
    Shared(SharedMessage),
}

/// An attribute message (spec "IV.A.2.m"): name, type, space and raw value bytes.
#[derive(Clone, Debug)]
pub struct AttributeMessage {
    pub name: String,
    pub datatype: MaybeShared<Datatype>,
    pub dataspace: MaybeShared<Dataspace>,
    /// Raw value bytes: npoints × element size (vlen elements are heap references).
    pub data: Vec<u8>,
}

/// Flag bit 0 (v2, v3): the datatype is shared.
const FLAG_SHARED_DATATYPE: u8 = 0x01;
/// Flag bit 1 (v2, v3): the dataspace is shared.
const FLAG_SHARED_DATASPACE: u8 = 0x02;

impl AttributeMessage {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<AttributeMessage> {
        let mut c = Cursor::new(data, addr, "attribute message");
        let version = c.u8()?;
        if !(1..=3).contains(&version) {
            return Err(c.corrupt(format!("attribute message version {version}")));
        }
        let flags = if version == 1 {
            c.skip(1)?; // reserved
            0
        } else {
            c.u8()?
        };
        if flags & !(FLAG_SHARED_DATATYPE | FLAG_SHARED_DATASPACE) != 0 {
            return Err(c.corrupt(format!("unknown attribute flags {flags:#04x}")));
        }
        let name_size = c.u16()? as usize;
        let datatype_size = c.u16()? as usize;
        let dataspace_size = c.u16()? as usize;
        if version == 3 {
            // Name character set (ASCII or UTF-8): the name is decoded as UTF-8 either way.
            let charset = c.u8()?;
            if charset > 1 {
                return Err(c.corrupt(format!("attribute name character set {charset}")));
            }
        }
        let padded = |n: usize| {
            if version == 1 {
                n.next_multiple_of(8)
            } else {
                n
            }
        };

        let name_field = field(&mut c, name_size, padded(name_size))?;
        let end = name_field
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(name_field.len());
        let name = String::from_utf8_lossy(&name_field[..end]).into_owned();

        let dt_addr = c.addr();
        let dt = field(&mut c, datatype_size, padded(datatype_size))?;
        let datatype = if flags & FLAG_SHARED_DATATYPE != 0 {
            MaybeShared::Shared(SharedMessage::parse(dt, dt_addr, sizes)?)
        } else {
            MaybeShared::Inline(Datatype::parse(dt, dt_addr, sizes)?)
        };

        let ds_addr = c.addr();
        let ds = field(&mut c, dataspace_size, padded(dataspace_size))?;
        let dataspace = if flags & FLAG_SHARED_DATASPACE != 0 {
            MaybeShared::Shared(SharedMessage::parse(ds, ds_addr, sizes)?)
        } else {
            MaybeShared::Inline(Dataspace::parse(ds, ds_addr, sizes)?)
        };

        let value = match (&datatype, &dataspace) {
            (MaybeShared::Inline(t), MaybeShared::Inline(s)) => {
                let n = Self::value_len(t, s)
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| c.corrupt("attribute value size overflows"))?;
                c.bytes(n)?
            }
            _ => c.rest(),
        };
        Ok(AttributeMessage {
            name,
            datatype,
            dataspace,
            data: value.to_vec(),
        })
    }

    /// Bytes of the value of an attribute of this type and space: npoints × element size
    /// (`None` on overflow).
    pub fn value_len(datatype: &Datatype, dataspace: &Dataspace) -> Option<u64> {
        dataspace.npoints()?.checked_mul(datatype.size as u64)
    }
}

/// A field of `len` meaningful bytes occupying `padded_len` bytes of the message.
fn field<'a>(c: &mut Cursor<'a>, len: usize, padded_len: usize) -> Result<&'a [u8]> {
    let b = c.bytes(len)?;
    // The padding of the last field may be cut by the end of the message: tolerate that.
    c.skip((padded_len - len).min(c.remaining()))?;
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::format::messages::dataspace::DataspaceKind;

    use crate::io::testutil::hex;

    fn parse(h: &str) -> Result<AttributeMessage> {
        AttributeMessage::parse(&hex(h), 0x700, Sizes::DEFAULT)
    }

    fn inline<T: Clone>(m: &MaybeShared<T>) -> T {
        match m {
            MaybeShared::Inline(t) => t.clone(),
            MaybeShared::Shared(s) => panic!("shared: {s:?}"),
        }
    }

    #[test]
    fn real_v1() {
        // h5py earliest: g.attrs['short'] = np.int32(7); scalar, padded fields.
        let a = parse(
            "010006000c00080073686f72740000001008000004000000000020000000000001000000000000\
             000700000000000000",
        )
        .unwrap();
        assert_eq!(a.name, "short");
        assert_eq!(inline(&a.datatype).numpy_str(), "<i4");
        assert_eq!(inline(&a.dataspace).kind, DataspaceKind::Scalar);
        assert_eq!(a.data, vec![7, 0, 0, 0]);
    }

    #[test]
    fn real_v1_array_value() {
        // h5py earliest: 2x3 big-endian floats 0..5.
        let a = parse(
            "0100040014002800617272000000000011211f000400000000002000170800177f00000000000000\
             01020100000000000200000000000000030000000000000002000000000000000300000000000000\
             000000003f80000040000000404000004080000040a00000",
        )
        .unwrap();
        assert_eq!(a.name, "arr");
        assert_eq!(inline(&a.datatype).numpy_str(), ">f4");
        assert_eq!(inline(&a.dataspace).dims, vec![2, 3]);
        assert_eq!(a.data.len(), 24);
        assert_eq!(&a.data[20..], &[0x40, 0xa0, 0, 0]);
    }

    #[test]
    fn real_v3_latest() {
        // h5py latest: scalar int and an empty (null dataspace) attribute.
        let a = parse("030006000c0004000073686f7274001008000004000000000020000200000007000000")
            .unwrap();
        assert_eq!(a.name, "short");
        assert_eq!(a.data, vec![7, 0, 0, 0]);
        let a = parse("030006000c00040000656d7074790010080000040000000000200002000002").unwrap();
        assert_eq!(inline(&a.dataspace).kind, DataspaceKind::Null);
        assert!(a.data.is_empty());
        // vlen string: value is a 16-byte global heap reference.
        let a = parse(
            "030002001400040000730019010100100000001000000001000000000008000200000005000000\
             271d00000000000001000000",
        )
        .unwrap();
        assert_eq!(inline(&a.datatype).numpy_str(), "vlen-str");
        assert_eq!(a.data.len(), 16);
    }

    #[test]
    fn shared_datatype_v2_and_v3() {
        // h5py earliest (v2) and latest (v3): attribute of 2 elements typed by a committed
        // 12-byte compound. The earliest message is padded to 8 bytes by its v1 header, and
        // with a shared type the padding stays in `data` until the caller cuts it.
        let a = parse(
            "020109000a0018007368617265645f74000202b82700000000000001010100000000000200000000\
             00000002000000000000000000000000000000000000000000000000000000000000000000000000",
        )
        .unwrap();
        assert_eq!(a.name, "shared_t");
        assert_eq!(
            a.datatype,
            MaybeShared::Shared(SharedMessage::ObjectHeader(0x27b8))
        );
        assert_eq!(inline(&a.dataspace).dims, vec![2]);
        assert_eq!(a.data.len(), 29);
        let a = parse(
            "030109000a001400007368617265645f740002028f1a000000000000020101010200000000000000\
             0200000000000000000000000000000000000000000000000000000000000000",
        )
        .unwrap();
        assert_eq!(
            a.datatype,
            MaybeShared::Shared(SharedMessage::ObjectHeader(0x1a8f))
        );
        assert_eq!(a.data.len(), 24);
        // Once the committed type (12 bytes) is resolved, the value length is known.
        let space = inline(&a.dataspace);
        let t = Datatype {
            version: 1,
            size: 12,
            class: crate::format::messages::datatype::TypeClass::Opaque { tag: String::new() },
        };
        assert_eq!(AttributeMessage::value_len(&t, &space), Some(24));
    }

    #[test]
    fn real_sohm_both_shared() {
        // File with one SOHM index for every message type: the attribute's datatype and
        // dataspace are 8-byte heap IDs (shared message v3, type 1); value 4 doubles.
        let a = parse(
            "030303000a000a0000617400030100160000000014000301002a00000000140000000000000000\
             00000000000000f03f00000000000000400000000000000840",
        )
        .unwrap();
        assert_eq!(a.name, "at");
        assert_eq!(
            a.datatype,
            MaybeShared::Shared(SharedMessage::SohmHeap([0, 0x16, 0, 0, 0, 0, 0x14, 0]))
        );
        assert_eq!(
            a.dataspace,
            MaybeShared::Shared(SharedMessage::SohmHeap([0, 0x2a, 0, 0, 0, 0, 0x14, 0]))
        );
        assert_eq!(a.data.len(), 32);
    }

    #[test]
    fn shared_dataspace_keeps_the_rest() {
        // v2, both shared: value length unknown here; everything after is kept.
        let mut b = vec![2, 3, 2, 0, 10, 0, 10, 0, b'x', 0];
        b.extend_from_slice(&[2, 2, 0x10, 0, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&[2, 2, 0x20, 0, 0, 0, 0, 0, 0, 0]);
        b.extend_from_slice(&[1, 2, 3]);
        let a = AttributeMessage::parse(&b, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(
            a.dataspace,
            MaybeShared::Shared(SharedMessage::ObjectHeader(0x20))
        );
        assert_eq!(a.data, vec![1, 2, 3]);
    }

    #[test]
    fn mutated_real_messages_never_panic() {
        // With both parts shared the value length is unknown, so truncating the value of the
        // second message is not an error.
        for (h, value_len) in [
            (
                "0100040014002800617272000000000011211f000400000000002000170800177f00000000000000\
             01020100000000000200000000000000030000000000000002000000000000000300000000000000\
             000000003f80000040000000404000004080000040a00000",
                0,
            ),
            (
                "030303000a000a0000617400030100160000000014000301002a00000000140000000000000000\
                 00000000000000f03f00000000000000400000000000000840",
                32,
            ),
        ] {
            let orig = hex(h);
            for pos in 0..orig.len() {
                for v in [0u8, 0xff, orig[pos].wrapping_add(1)] {
                    let mut b = orig.clone();
                    b[pos] = v;
                    let _ = AttributeMessage::parse(&b, 0, Sizes::DEFAULT);
                }
                let short = AttributeMessage::parse(&orig[..pos], 0, Sizes::DEFAULT);
                assert_eq!(
                    short.is_err(),
                    pos < orig.len() - value_len,
                    "truncated to {pos}"
                );
            }
        }
    }

    #[test]
    fn hostile() {
        assert!(matches!(parse("04"), Err(Error::Corrupt { .. })));
        assert!(matches!(parse("0204"), Err(Error::Corrupt { .. })));
        // Name size beyond the message.
        assert!(matches!(parse("0200ff00"), Err(Error::Truncated { .. })));
        // Value shorter than npoints × size (scalar <i4 with 2 bytes).
        assert!(matches!(
            parse("030006000c0004000073686f72740010080000040000000000200002000000070000"),
            Err(Error::Truncated { .. })
        ));
        // Bad character set.
        assert!(
            parse("030006000c0004000573686f7274001008000004000000000020000200000007000000")
                .is_err()
        );
    }
}
