//! The filesystem: fuser-free operations over the model, and the thin FUSE adapter.
