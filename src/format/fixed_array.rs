//! Fixed array (`FAHD`, `FADB`, spec "VII.B"): chunk index type 3, with paged data blocks.
