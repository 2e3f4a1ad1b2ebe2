//! Mounting on a directory that is already a mountpoint is refused: a second mount would
//! stack over the first and hide it (almost always a mistake, and a hidden mount is hard to
//! find). One line on stderr, exit status 2, and the first mount goes on serving.

mod harness;

use std::path::Path;

use harness::{mount_line, run, Mount};

#[test]
fn a_second_mount_on_the_same_directory_is_refused() {
    let file = harness::fixture("data/groups_earliest.h5");
    let m = Mount::background(&file, &[]);
    let before = std::fs::read_dir(m.path()).unwrap().count();
    assert!(before > 0);
    let lines = |p: &Path| {
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter(|l| l.split(' ').nth(4) == Some(p.to_str().unwrap()))
            .count()
    };
    let mp = std::fs::canonicalize(m.path()).unwrap();
    assert_eq!(lines(&mp), 1);
    for extra in [&[][..], &["-f"][..]] {
        let mut args = vec![file.as_os_str(), m.path().as_os_str()];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains("already a mountpoint"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        // Still one mount, still serving.
        assert_eq!(lines(&mp), 1, "{extra:?}");
        assert!(mount_line(m.path()).is_some());
        assert_eq!(std::fs::read_dir(m.path()).unwrap().count(), before);
    }
}
