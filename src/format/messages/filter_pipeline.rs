//! Filter pipeline message (0x000B), versions 1 and 2 (spec "IV.A.2.l").
//!
//! A count of filters, then one description per filter in the order they were applied when
//! writing: identifier, (name length), flags, number of client data values, (name), client
//! data as 4-byte integers.
//! * Version 1 has six reserved bytes after the count, always stores the name length, pads
//!   names with NULs to a multiple of 8 bytes and pads an odd number of client data values
//!   with four zero bytes.
//! * Version 2 stores no name length and no name for identifiers below 256 (the filters
//!   defined by the format) and pads nothing.
//!
//! The library refuses more than 32 filters; so do we, and every count is checked against the
//! bytes left before anything is allocated.

use crate::error::Result;
use crate::io::{Cursor, Sizes};

/// Filter flag bit 0: the filter is optional (may be skipped, recorded in the chunk's mask).
pub const FILTER_OPTIONAL: u16 = 0x0001;

/// Most filters a pipeline may hold (`H5Z_MAX_NFILTERS`).
pub const MAX_FILTERS: usize = 32;

/// Filter identifiers below this have no stored name in version 2 (`H5Z_FILTER_RESERVED`).
const FIRST_UNNAMED_FREE_ID: u16 = 256;

/// One filter in the pipeline, in the order applied when writing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterSpec {
    pub id: u16,
    pub flags: u16,
    /// Name stored in the message, if any.
    pub name: Option<String>,
    /// Client data ("cd_values").
    pub client_data: Vec<u32>,
}

impl FilterSpec {
    /// True if the filter is optional: a chunk may skip it (its bit set in the chunk's mask).
    pub fn is_optional(&self) -> bool {
        self.flags & FILTER_OPTIONAL != 0
    }
}

/// The filter pipeline (spec "IV.A.2.l").
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FilterPipeline {
    pub filters: Vec<FilterSpec>,
}

impl FilterPipeline {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<FilterPipeline> {
        let _ = sizes;
        let mut c = Cursor::new(data, addr, "filter pipeline message");
        let version = c.u8()?;
        if !(1..=2).contains(&version) {
            return Err(c.corrupt(format!("filter pipeline version {version}")));
        }
        let n = c.u8()? as usize;
        if n > MAX_FILTERS {
            return Err(c.corrupt(format!("{n} filters (at most {MAX_FILTERS})")));
        }
        if version == 1 {
            c.skip(6)?; // reserved
        }
        let mut filters = Vec::with_capacity(n);
        for _ in 0..n {
            filters.push(filter(&mut c, version)?);
        }
        Ok(FilterPipeline { filters })
    }
}

/// One filter description.
fn filter(c: &mut Cursor<'_>, version: u8) -> Result<FilterSpec> {
    let id = c.u16()?;
    let name_len = if version == 1 || id >= FIRST_UNNAMED_FREE_ID {
        c.u16()? as usize
    } else {
        0
    };
    let flags = c.u16()?;
    let ncd = c.u16()? as usize;
    // Version 1 lengths already include the padding to 8 bytes.
    let name = (name_len > 0)
        .then(|| c.bytes(name_len))
        .transpose()?
        .map(|b| {
            let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
            String::from_utf8_lossy(&b[..end]).into_owned()
        });
    let raw = c.bytes(ncd.checked_mul(4).ok_or_else(|| c.truncated())?)?;
    let client_data = raw
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    if version == 1 && ncd % 2 == 1 {
        // Padding to an even count; tolerate its absence at the very end of the message.
        c.skip(c.remaining().min(4))?;
    }
    Ok(FilterSpec {
        id,
        flags,
        name,
        client_data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    use crate::io::testutil::hex;

    fn parse(h: &str) -> Result<FilterPipeline> {
        FilterPipeline::parse(&hex(h), 0x500, Sizes::DEFAULT)
    }

    fn spec(id: u16, flags: u16, name: Option<&str>, cd: &[u32]) -> FilterSpec {
        FilterSpec {
            id,
            flags,
            name: name.map(String::from),
            client_data: cd.to_vec(),
        }
    }

    #[test]
    fn real_v1() {
        // h5py earliest: lzf (optional, 3 values, odd count padded) then fletcher32.
        let p = parse(
            "0102000000000000007d0800010003006c7a660000000000040000000501000040000000000000\
             000300100000000000666c6574636865723332000000000000",
        )
        .unwrap();
        assert_eq!(
            p.filters,
            vec![
                spec(32000, 1, Some("lzf"), &[4, 261, 64]),
                spec(3, 0, Some("fletcher32"), &[]),
            ]
        );
        assert!(p.filters[0].is_optional());
        // shuffle + deflate.
        let p = parse(
            "0102000000000000020008000100010073687566666c6500080000000000000001000800010001\
             006465666c617465000400000000000000",
        )
        .unwrap();
        assert_eq!(p.filters[0], spec(2, 1, Some("shuffle"), &[8]));
        assert_eq!(p.filters[1], spec(1, 1, Some("deflate"), &[4]));
    }

    #[test]
    fn real_v2() {
        // h5py latest: lzf keeps its (unpadded) name, fletcher32 (id < 256) stores none.
        let p = parse("0202007d0400010003006c7a6600040000000501000040000000030000000000").unwrap();
        assert_eq!(
            p.filters,
            vec![
                spec(32000, 1, Some("lzf"), &[4, 261, 64]),
                spec(3, 0, None, &[]),
            ]
        );
        // hdf5plugin Blosc: 7 client data values.
        let p = parse(
            "0201017d060001000700626c6f73630002000000020000000400000028000000050000000100\
             000001000000",
        )
        .unwrap();
        assert_eq!(
            p.filters,
            vec![spec(32001, 1, Some("blosc"), &[2, 2, 4, 40, 5, 1, 1])]
        );
    }

    #[test]
    fn v1_odd_client_data_at_end_without_padding() {
        let mut b = vec![1, 1, 0, 0, 0, 0, 0, 0];
        for x in [4u16, 0, 0, 1] {
            b.extend_from_slice(&x.to_le_bytes());
        }
        b.extend_from_slice(&9u32.to_le_bytes());
        let p = FilterPipeline::parse(&b, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(p.filters, vec![spec(4, 0, None, &[9])]);
    }

    #[test]
    fn hostile() {
        assert!(matches!(parse("03"), Err(Error::Corrupt { .. })));
        assert!(matches!(parse("0221"), Err(Error::Corrupt { .. })));
        // 65535 client data values claimed.
        assert!(matches!(
            parse("02010100000000ffff00000000"),
            Err(Error::Truncated { .. })
        ));
        // Name longer than the message.
        assert!(matches!(
            parse("020100010010000000000000"),
            Err(Error::Truncated { .. })
        ));
        // Fewer filters than announced.
        assert!(parse("0202010000000000").is_err());
    }
}
