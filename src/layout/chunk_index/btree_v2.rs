//! Chunk index: btree_v2.
