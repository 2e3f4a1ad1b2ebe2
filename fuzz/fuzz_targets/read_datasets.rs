//! Open a file, walk it and read every dataset at its start, middle and end.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(file) = h5mount_fuzz::open(data) {
        h5mount_fuzz::walk(&file, true);
    }
});
