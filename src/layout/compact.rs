//! Layout: compact storage.
