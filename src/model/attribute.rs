//! Attributes: name, type, shape and value, from compact attribute messages or dense storage.

use crate::format::messages::datatype::Datatype;

/// An attribute with its value.
#[derive(Clone, Debug)]
pub struct Attribute {
    pub name: String,
    pub dtype: Datatype,
    /// Shape (empty for scalar; `None` for a null dataspace).
    pub shape: Option<Vec<u64>>,
    /// Raw value bytes in the file's representation (fixed-size types).
    pub raw: Vec<u8>,
    /// Variable-length strings, resolved from the global heap (vlen string attributes only).
    pub strings: Option<Vec<Option<String>>>,
}

impl Attribute {
    /// The value as text, the way numpy prints it (strings as UTF-8, numbers and arrays as
    /// numpy's `str()`), used for xattrs and `inspect`.
    pub fn render(&self) -> String {
        String::new()
    }
}
