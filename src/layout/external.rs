//! Layout: external storage.
