//! Whether a Python interpreter can import what a check script needs. The scripts that
//! compare a mount with real consumers (h5py, numpy, zarr-python, GDAL, ...) run only where
//! their packages are installed; elsewhere the test skips, saying which import failed, or
//! fails under the `H5MOUNT_REQUIRE_*` variable `mount-tests/run` sets once it installed them.

use std::process::{Command, Stdio};

use super::skip::require_or_skip;

/// The interpreter the pip packages are installed for.
pub const PYTHON: &str = "python3";

/// Debian's interpreter, the one `python3-gdal` is built for (a pip-installed `python3` on
/// the PATH may be another).
pub const GDAL_PYTHON: &str = "/usr/bin/python3";

/// True when `python -c import_line` succeeds (`import_line` as `"import numpy, h5py"`).
pub fn python_can(python: &str, import_line: &str) -> bool {
    Command::new(python)
        .args(["-c", import_line])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// True when `python` can run `import_line`; otherwise the test skips (false), or fails when
/// the variable `require` is set.
pub fn python_or_skip(python: &str, import_line: &str, require: &str) -> bool {
    if python_can(python, import_line) {
        return true;
    }
    require_or_skip(require, &format!("{python} cannot run `{import_line}`"));
    false
}
