//! Chunk index: fixed_array.
