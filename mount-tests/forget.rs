//! The daemon drops the inodes the kernel forgets, through a real mount.
//!
//! A walk leaves the kernel holding an inode per entry (its dentry cache), and the daemon a
//! record per inode the kernel holds; when the kernel drops its caches it sends `forget`, and
//! the daemon's count of inodes (`inodes` of the statistics xattr) falls back. Nothing but
//! memory pressure or `echo 2 > /proc/sys/vm/drop_caches` makes the kernel drop dentries that
//! are not in use (an unmount ends the daemon too), and only root may write that file, so
//! these tests skip, saying so, for another user. Dropping dentries and inodes does not touch
//! the page cache; it only makes the machine's next path walks look their names up again.

mod harness;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

use harness::{fixture, skip, stats, wait_for, Mount};

/// Held by each test: dropping the caches is machine-wide, and would forget another test's
/// walk half way.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Drop the kernel's dentries and inodes, if this user may; false (after a skip line) when
/// not root.
fn drop_dentries() -> bool {
    if !nix::unistd::geteuid().is_root() {
        skip("writing /proc/sys/vm/drop_caches needs root: the kernel cannot be made to forget");
        return false;
    }
    std::fs::write("/proc/sys/vm/drop_caches", "2\n").expect("drop_caches");
    true
}

/// Every entry below `dir` with its inode number (not following symlinks): what `ls -lR`
/// or `find` with a stat of each entry does.
fn walk(dir: &Path, out: &mut Vec<(String, u64)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let md = std::fs::symlink_metadata(&p).unwrap();
        out.push((p.display().to_string(), md.ino()));
        if md.is_dir() {
            walk(&p, out);
        }
    }
}

fn inodes(m: &Mount) -> u64 {
    stats(m)["inodes"]
}

#[test]
fn a_walk_is_forgotten_when_the_kernel_drops_its_dentries() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for form in ["earliest", "latest"] {
        // Groups of 200 links and one of 5,000 (soft links and hard links to one dataset).
        let file = fixture("data").join(format!("biggroups_{form}.h5"));
        let m = Mount::background(&file, &[]);
        let start = inodes(&m);
        let mut seen = Vec::new();
        walk(m.path(), &mut seen);
        assert!(seen.len() > 5000, "{} entries", seen.len());
        let walked = inodes(&m);
        // The hard links share one inode: one record for the 1,000 of them (fewer if memory
        // pressure made the kernel forget some during the walk).
        assert!(
            walked > 1000 && walked <= start + seen.len() as u64 - 999,
            "{walked} inodes known after a walk of {} entries",
            seen.len()
        );
        if !drop_dentries() {
            return;
        }
        // The kernel sends its forgets as it evicts: wait for the count to come down.
        assert!(
            wait_for(|| inodes(&m) < walked / 10),
            "{} inodes still known of {walked}",
            inodes(&m)
        );
        // A stat of what was forgotten works, under the same number.
        let mut again = Vec::new();
        walk(m.path(), &mut again);
        assert_eq!(again, seen, "the same entries, the same numbers");
        assert!(stats(&m)["op_forget"] >= walked / 2);
    }
}

#[test]
fn hard_links_keep_one_number_across_a_forget() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for form in ["earliest", "latest"] {
        let file = fixture("data").join(format!("links_{form}.h5"));
        let m = Mount::background(&file, &[]);
        let ino = |p: &str| std::fs::metadata(m.at(p)).unwrap().ino();
        let data = ino("/a/data");
        assert_eq!(ino("/hard/data_alias1"), data);
        let before = std::fs::metadata(m.at("/a/data")).unwrap();
        if !drop_dentries() {
            return;
        }
        assert!(wait_for(|| inodes(&m) <= 2), "{} inodes", inodes(&m));
        // Found first by another name this time: the same number, the same attributes.
        let after = std::fs::metadata(m.at("/hard/data_alias2")).unwrap();
        assert_eq!(after.ino(), data);
        assert_eq!(
            (after.len(), after.nlink(), after.mtime()),
            (before.len(), before.nlink(), before.mtime())
        );
        assert_eq!(ino("/a/data"), data);
        assert_eq!(
            std::fs::read(m.at("/a/data")).unwrap().len() as u64,
            before.len()
        );
    }
}
