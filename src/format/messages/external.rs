//! External data files message (0x0007, spec "IV.A.2.h"): a list of (file name, offset, size)
//! segments whose names are stored in a local heap.
//!
//! Layout: version (1), three reserved bytes, allocated and used slot counts (2 bytes each),
//! the local heap address, then the used slots, each three "Size of Lengths" values. The
//! segments are in the order of the dataset's bytes; together they hold the raw data as if it
//! were contiguous.

use crate::error::Result;
use crate::io::{Cursor, Sizes};

/// One segment of external storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalSlot {
    /// Offset of the file name in the local heap.
    pub name_offset: u64,
    /// Byte offset in the external file where the segment starts.
    pub file_offset: u64,
    /// Size of the segment in bytes; `u64::MAX` for "unlimited" (stored as all ones).
    pub size: u64,
}

/// The external data files message (spec "IV.A.2.h").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalFileList {
    /// Address of the local heap holding the names.
    pub heap_addr: u64,
    pub slots: Vec<ExternalSlot>,
}

impl ExternalFileList {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<ExternalFileList> {
        let mut c = Cursor::new(data, addr, "external data files message");
        let version = c.u8()?;
        if version != 1 {
            return Err(c.corrupt(format!("external data files version {version}")));
        }
        c.skip(3)?; // reserved
        let allocated = c.u16()? as usize;
        let used = c.u16()? as usize;
        if used > allocated {
            return Err(c.corrupt(format!("{used} slots used of {allocated} allocated")));
        }
        let heap_addr = c.offset(sizes)?;
        let slot_len = 3 * sizes.length as usize;
        if used.saturating_mul(slot_len) > c.remaining() {
            return Err(c.truncated());
        }
        // "Unlimited" is all ones of the length width; normalise it to u64::MAX.
        let all_ones = match sizes.length {
            w @ 1..=8 => Some(u64::MAX >> (64 - 8 * w as u32)),
            _ => None,
        };
        let mut slots = Vec::with_capacity(used);
        for _ in 0..used {
            let (name_offset, file_offset) = (c.length(sizes)?, c.length(sizes)?);
            let size = c.length(sizes)?;
            slots.push(ExternalSlot {
                name_offset,
                file_offset,
                size: if Some(size) == all_ones {
                    u64::MAX
                } else {
                    size
                },
            });
        }
        Ok(ExternalFileList { heap_addr, slots })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    use crate::io::testutil::hex;

    #[test]
    fn real_two_segments() {
        // h5py: external=[('raw1.bin', 0, 20), ('raw2.bin', 8, 20)].
        let b = hex(
            "0100000002000200c80200000000000008000000000000000000000000000000140000000000\
             0000180000000000000008000000000000001400000000000000",
        );
        let e = ExternalFileList::parse(&b, 0, Sizes::DEFAULT).unwrap();
        assert_eq!(e.heap_addr, 0x2c8);
        assert_eq!(
            e.slots,
            vec![
                ExternalSlot {
                    name_offset: 8,
                    file_offset: 0,
                    size: 20
                },
                ExternalSlot {
                    name_offset: 24,
                    file_offset: 8,
                    size: 20
                },
            ]
        );
        assert!(matches!(
            ExternalFileList::parse(&b[..b.len() - 1], 0, Sizes::DEFAULT),
            Err(Error::Truncated { .. })
        ));
    }

    #[test]
    fn small_widths_and_hostile() {
        let sizes = Sizes {
            offset: 4,
            length: 2,
        };
        let b = [
            1, 0, 0, 0, 4, 0, 1, 0, 0x10, 0, 0, 0, 8, 0, 0, 1, 0xff, 0xff,
        ];
        let e = ExternalFileList::parse(&b, 0, sizes).unwrap();
        assert_eq!(e.heap_addr, 0x10);
        assert_eq!(e.slots[0].file_offset, 0x100);
        assert_eq!(e.slots[0].size, u64::MAX); // all ones of 2 bytes: unlimited
        assert!(ExternalFileList::parse(&[2, 0, 0, 0, 0, 0, 0, 0], 0, sizes).is_err());
        // More slots used than allocated; 65535 slots in a few bytes.
        assert!(ExternalFileList::parse(&[1, 0, 0, 0, 1, 0, 2, 0], 0, sizes).is_err());
        let mut big = vec![1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0];
        big.extend_from_slice(&[0; 12]);
        assert!(matches!(
            ExternalFileList::parse(&big, 0, sizes),
            Err(Error::Truncated { .. })
        ));
    }
}
