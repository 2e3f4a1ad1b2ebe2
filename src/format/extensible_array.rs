//! Extensible array (`EAHD`, `EAIB`, `EASB`, `EADB`, spec "VII.C"): chunk index type 4.
