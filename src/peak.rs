//! Test support: the peak resident memory one piece of work adds, measured in a child test
//! process that runs only that test, since the peak of the whole test process counts every
//! test that ran in it.

/// The environment variable that marks the child.
const CHILD: &str = "H5MOUNT_TEST_PEAK_CHILD";

/// The peak resident memory of this process (VmHWM), in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// In the test process: runs the test `name` (its full path, such as `cache::tests::x`) again
/// in a child and returns how far `work` raised the child's peak, in KiB. In that child: runs
/// `work`, prints the rise for the parent and returns `None`, and the test returns.
pub(crate) fn rise_kib(name: &str, work: impl FnOnce()) -> Option<u64> {
    if std::env::var_os(CHILD).is_some() {
        let before = peak_kib();
        work();
        println!("PEAK_RISE_KIB {}", peak_kib() - before);
        return None;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let rise = text
        .lines()
        .find_map(|l| l.split_once("PEAK_RISE_KIB ")?.1.split_whitespace().next())
        .unwrap_or_else(|| panic!("no measure from the child: {text}"))
        .parse()
        .unwrap();
    Some(rise)
}
