//! Version 2 object headers (OHDR/OCHK signatures, lookup3 checksums).
