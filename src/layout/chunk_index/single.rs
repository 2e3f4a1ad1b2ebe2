//! Chunk index: single.
