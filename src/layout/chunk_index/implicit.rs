//! Chunk index: implicit.
