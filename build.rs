//! Build script: records the commit the binary is built from, for `h5mount --version`.
//!
//! The checkout's `HEAD` (", modified" when tracked files differ from it) when the sources
//! are a git checkout and git is installed; "unknown commit" otherwise (a source tarball).

use std::process::Command;

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
    };
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]).filter(|s| !s.is_empty()) {
        Some(hash) => {
            // Tracked files changed since that commit.
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            format!("commit {hash}{}", if dirty { ", modified" } else { "" })
        }
        None => "unknown commit".to_string(),
    };
    println!("cargo:rustc-env=H5MOUNT_COMMIT={commit}");
    // A new commit or a change of the checked-out branch changes the answer.
    for path in [".git/HEAD", ".git/index", ".git/refs"] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
