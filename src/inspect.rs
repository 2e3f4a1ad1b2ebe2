//! `h5mount inspect`: a deterministic tree listing of a file, in the spirit of `h5ls -r -v`.

use std::io::Write;
use std::path::Path;

use crate::error::Result;

/// Write the listing of `path` (starting at object `start`, default `/`) to `out`.
pub fn inspect(path: &Path, start: Option<&str>, out: &mut dyn Write) -> Result<()> {
    let _ = (path, start, out);
    Err(crate::error::Error::unsupported("inspect", "not implemented yet"))
}
