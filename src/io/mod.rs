//! The lowest layer: positioned reads of the HDF5 file, a little-endian byte cursor that knows
//! the file's offset and length widths, and the two checksums the format uses.

pub mod checksum;
pub mod cursor;
pub mod storage;

pub use cursor::{Cursor, Sizes, UNDEFINED_ADDR};
pub use storage::Storage;
