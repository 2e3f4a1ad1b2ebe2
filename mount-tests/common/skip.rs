//! Skips that are counted. A test that cannot run here (a tool, server, fixture, Python
//! package or privilege is missing) calls [`skip`] and returns: it prints
//! `SKIP <binary>::<test>: <why>` and appends that line to the file named by
//! `H5MOUNT_SKIP_LOG` when set. libtest still reports such a test as passed, so
//! `mount-tests/run` sets that variable to a fresh file and counts its lines apart from the
//! passes in its summary. A test that runs only part of its checks calls `skip` for the part
//! and goes on; it is counted among the skipped too, since it did not run in full.
//!
//! When the missing thing is one an `H5MOUNT_REQUIRE_*` variable asks for (set, not empty,
//! not `0`), [`require_or_skip`] fails the test instead: `mount-tests/run` sets those
//! variables once it has installed or made what they name, so a run that should have
//! everything cannot pass by skipping.
//!
//! This file is included by `harness.rs` and by `servers.rs` (which the binaries without the
//! harness include), hence `allow(dead_code)`.

#![allow(dead_code)]

use std::io::Write as _;

/// The variable naming the file that collects skip lines.
pub const SKIP_LOG: &str = "H5MOUNT_SKIP_LOG";

/// True when the variable `var` (an `H5MOUNT_REQUIRE_*`) is set, not empty and not `0`.
pub fn required(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0")
}

/// `<binary>::<test>` of the running test (libtest names each test's thread after it).
pub fn test_name() -> String {
    let t = std::thread::current();
    format!(
        "{}::{}",
        env!("CARGO_CRATE_NAME"),
        t.name().unwrap_or("<unnamed thread>")
    )
}

/// Report that the running test (or the part of it named in `why`) cannot run here, because
/// `why`. The caller returns (or goes on without that part).
pub fn skip(why: &str) {
    let line = format!("SKIP {}: {}", test_name(), why.replace('\n', " "));
    eprintln!("{line}");
    let Some(log) = std::env::var_os(SKIP_LOG).filter(|p| !p.is_empty()) else {
        return;
    };
    // One write of a whole line to a file opened for appending: lines of tests running in
    // parallel (threads or binaries) do not interleave.
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap_or_else(|e| panic!("{SKIP_LOG} {}: {e}", log.to_string_lossy()));
    f.write_all(format!("{line}\n").as_bytes())
        .unwrap_or_else(|e| panic!("{SKIP_LOG} {}: {e}", log.to_string_lossy()));
}

/// Something the test needs is missing (`why`): fail when `require` (an `H5MOUNT_REQUIRE_*`
/// variable) asks for it, else [`skip`].
pub fn require_or_skip(require: &str, why: &str) {
    assert!(!required(require), "{why}, and {require} is set");
    skip(why);
}
