//! Layout: contiguous storage.
