//! Chunk index: extensible_array.
