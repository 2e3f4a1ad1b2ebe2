//! External data files message (0x0007): a list of (file name, offset, size) segments whose
//! names are stored in a local heap.

use crate::error::Result;
use crate::io::Sizes;

/// One segment of external storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalSlot {
    /// Offset of the file name in the local heap.
    pub name_offset: u64,
    /// Byte offset in the external file where the segment starts.
    pub file_offset: u64,
    /// Size of the segment in bytes (`u64::MAX`-like "unlimited" is stored as all ones).
    pub size: u64,
}

/// The external data files message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalFileList {
    /// Address of the local heap holding the names.
    pub heap_addr: u64,
    pub slots: Vec<ExternalSlot>,
}

impl ExternalFileList {
    pub fn parse(data: &[u8], addr: u64, sizes: Sizes) -> Result<ExternalFileList> {
        let _ = (data, addr, sizes);
        Err(crate::error::Error::unsupported("external file list", "not implemented yet"))
    }
}
