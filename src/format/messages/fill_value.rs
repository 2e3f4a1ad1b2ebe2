//! Fill value messages: old (0x0004, spec "IV.A.2.e") and new (0x0005, versions 1-3, spec
//! "IV.A.2.f").
//!
//! The old message is a 4-byte size and that many bytes; it is only written for user-defined
//! fill values. The new message states when space is allocated and when the fill value is
//! written, and whether a fill value is defined:
//! * versions 1 and 2: one byte each for allocation time, fill time and "defined"; the 4-byte
//!   size and the value follow only when "defined" is set (the spec says version 1 always
//!   stores them, but the library reads them only when defined, and so do we);
//! * version 3 packs allocation time (bits 0-1) and fill time (bits 2-3) in a flags byte, with
//!   bit 4 "undefined" and bit 5 "value present" (size and value follow).
//!
//! "Defined" with no bytes (size 0, or version 3 with neither bit 4 nor bit 5) is the library
//! default fill value: zeros, like an undefined one for a reader.

use crate::error::Result;
use crate::io::{Cursor, Sizes};

/// When storage space is allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocTime {
    Early,
    Late,
    Incremental,
    /// Not stated (old message, or reserved value).
    Default,
}

/// When the fill value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillTime {
    OnAlloc,
    Never,
    IfSet,
}

/// A fill value message (either kind; spec "IV.A.2.e" and "IV.A.2.f").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FillValue {
    pub alloc_time: AllocTime,
    pub fill_time: FillTime,
    /// False when the fill value is "undefined" (reads as zeros for us).
    pub defined: bool,
    /// The user-defined fill value bytes (one element), if any.
    pub value: Option<Vec<u8>>,
}

/// Version 3 flag bits.
const V3_UNDEFINED: u8 = 0x10;
const V3_HAVE_VALUE: u8 = 0x20;
const V3_RESERVED: u8 = 0xc0;

impl FillValue {
    /// New fill value message (0x0005).
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<FillValue> {
        let _ = sizes;
        let mut c = Cursor::new(data, addr, "fill value message");
        let version = c.u8()?;
        match version {
            1 | 2 => {
                let alloc_time = alloc_time(c.u8()?);
                let fill_time = c.u8()?;
                let fill_time = fill_time_of(&c, fill_time)?;
                let defined = c.u8()? != 0;
                let value = if defined { value(&mut c)? } else { None };
                Ok(FillValue {
                    alloc_time,
                    fill_time,
                    defined,
                    value,
                })
            }
            3 => {
                let flags = c.u8()?;
                if flags & V3_RESERVED != 0 {
                    return Err(c.corrupt(format!("unknown fill value flags {flags:#04x}")));
                }
                if flags & V3_UNDEFINED != 0 && flags & V3_HAVE_VALUE != 0 {
                    return Err(c.corrupt("fill value both undefined and present"));
                }
                let value = if flags & V3_HAVE_VALUE != 0 {
                    value(&mut c)?
                } else {
                    None
                };
                Ok(FillValue {
                    alloc_time: alloc_time(flags & 0x03),
                    fill_time: fill_time_of(&c, (flags >> 2) & 0x03)?,
                    defined: flags & V3_UNDEFINED == 0,
                    value,
                })
            }
            v => Err(c.corrupt(format!("fill value message version {v}"))),
        }
    }

    /// Old fill value message (0x0004): size then value.
    pub fn parse_old(data: &[u8], addr: u64) -> Result<FillValue> {
        let mut c = Cursor::new(data, addr, "fill value message (old)");
        Ok(FillValue {
            alloc_time: AllocTime::Default,
            // The library's default for datasets described only by the old message.
            fill_time: FillTime::IfSet,
            defined: true,
            value: value(&mut c)?,
        })
    }
}

/// A 4-byte size and that many bytes; `None` for size 0.
fn value(c: &mut Cursor<'_>) -> Result<Option<Vec<u8>>> {
    let n = c.u32()? as usize;
    let bytes = c.bytes(n)?;
    Ok((n > 0).then(|| bytes.to_vec()))
}

fn alloc_time(v: u8) -> AllocTime {
    match v {
        1 => AllocTime::Early,
        2 => AllocTime::Late,
        3 => AllocTime::Incremental,
        _ => AllocTime::Default,
    }
}

fn fill_time_of(c: &Cursor<'_>, v: u8) -> Result<FillTime> {
    match v {
        0 => Ok(FillTime::OnAlloc),
        1 => Ok(FillTime::Never),
        2 => Ok(FillTime::IfSet),
        v => Err(c.corrupt(format!("fill time {v}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    use crate::io::testutil::hex;

    fn parse(h: &str) -> Result<FillValue> {
        FillValue::parse(&hex(h), 0x300, Sizes::DEFAULT)
    }

    const ONE_AND_HALF: [u8; 8] = [0, 0, 0, 0, 0, 0, 0xf8, 0x3f];

    #[test]
    fn real_v2_and_old() {
        // h5py earliest, fillvalue=1.5 on an f8 dataset: v2 message, plus the old message.
        let f = parse("0203020108000000000000000000f83f").unwrap();
        assert_eq!(f.alloc_time, AllocTime::Incremental);
        assert_eq!(f.fill_time, FillTime::IfSet);
        assert!(f.defined);
        assert_eq!(f.value.as_deref(), Some(&ONE_AND_HALF[..]));
        let old = FillValue::parse_old(&hex("08000000000000000000f83f00000000"), 0).unwrap();
        assert_eq!(old.value, f.value);
        // Library default (defined, size 0).
        let f = parse("0202020100000000").unwrap();
        assert_eq!(
            (f.alloc_time, f.defined, f.value),
            (AllocTime::Late, true, None)
        );
    }

    #[test]
    fn real_v3() {
        let f = parse("032b08000000000000000000f83f").unwrap();
        assert_eq!(f.alloc_time, AllocTime::Incremental);
        assert_eq!(f.fill_time, FillTime::IfSet);
        assert_eq!(f.value.as_deref(), Some(&ONE_AND_HALF[..]));
        let f = parse("0309").unwrap();
        assert_eq!(
            (f.alloc_time, f.defined, f.value),
            (AllocTime::Early, true, None)
        );
        // Undefined (bit 4), fill time never.
        let f = parse("0316").unwrap();
        assert_eq!(f.fill_time, FillTime::Never);
        assert!(!f.defined);
    }

    #[test]
    fn v1_and_undefined() {
        // v1 with a 2-byte value; v1/v2 undefined carry no size.
        let f = parse("01010001020000003412").unwrap();
        assert_eq!(f.alloc_time, AllocTime::Early);
        assert_eq!(f.fill_time, FillTime::OnAlloc);
        assert_eq!(f.value, Some(vec![0x34, 0x12]));
        let f = parse("02020100").unwrap();
        assert!(!f.defined && f.value.is_none());
    }

    #[test]
    fn hostile() {
        assert!(matches!(parse("04"), Err(Error::Corrupt { .. })));
        assert!(matches!(parse("03c0"), Err(Error::Corrupt { .. }))); // reserved bits
        assert!(matches!(parse("0330"), Err(Error::Corrupt { .. }))); // both bits 4 and 5
        assert!(matches!(parse("030c"), Err(Error::Corrupt { .. }))); // fill time 3
        assert!(matches!(
            parse("02020201ffffffff00"),
            Err(Error::Truncated { .. })
        ));
        assert!(matches!(
            FillValue::parse_old(&[0xff, 0xff, 0xff, 0x7f, 1], 0),
            Err(Error::Truncated { .. })
        ));
    }
}
