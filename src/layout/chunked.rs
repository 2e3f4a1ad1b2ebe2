//! Layout: chunked storage.
