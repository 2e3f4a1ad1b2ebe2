//! Version 1 object headers (8-byte aligned messages, no signature).
