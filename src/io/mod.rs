//! The lowest layer: positioned reads of the HDF5 file, a little-endian byte cursor that knows
//! the file's offset and length widths, and the two checksums the format uses.

pub mod checksum;
pub mod cursor;
pub mod storage;

pub use cursor::{Cursor, Sizes, UNDEFINED_ADDR};
pub use storage::Storage;

/// Helpers for unit tests across the crate.
#[cfg(test)]
pub(crate) mod testutil {
    /// Bytes from a hex string (`"0a1b"` → `[0x0a, 0x1b]`), for byte images in tests.
    pub fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
