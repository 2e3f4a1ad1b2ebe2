//! Chunk index: btree_v1.
