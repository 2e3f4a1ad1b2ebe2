//! Remote sources through real mounts and real servers on 127.0.0.1: nginx serving HTTP
//! ranges (and, through its echo module, a fixed delay per request) and SeaweedFS serving S3.
//!
//! What a remote mount shows:
//! - `the_corpus_over_http_is_the_local_corpus`: each corpus file mounted from a URL shows
//!   the same tree, sizes and bytes (read, pread, mmap) as the same file mounted from disk,
//!   which `mount.rs` checks against h5py.
//! - `s3_objects_signed_and_anonymous`: an object on SeaweedFS, with credentials from the
//!   environment, unsigned, and with wrong credentials (status 2, no secret shown).
//! - `missing_objects_and_non_hdf5_files_are_one_line_and_status_2`.
//!
//! Faults:
//! - `an_object_replaced_while_mounted_fails_its_reads_never_mixing` (If-Match, 412).
//! - `a_server_gone_fails_reads_within_the_bound_and_the_mount_lives_on`: nginx killed.
//! - `a_server_back_after_an_outage_serves_what_was_never_fetched`: nginx killed and started
//!   again on the same port: reads during the outage fail with EIO within the retry bound,
//!   the daemon lives on, and afterwards the same reads give h5py's bytes (`soak.json`).
//! - `answers_503_and_cut_short_are_retried_then_served` (a fault-injecting proxy).
//! - `a_server_slower_than_the_request_timeout_is_an_error_within_the_bound`.
//!
//! Requests counted, by the mount's statistics (`user.h5mount.stats`) and by nginx's access
//! log (what it was asked, with the Range, and when each request started and ended). The
//! fixtures of `fixtures/remote` (see `make_remote.py`) put what is counted past the first
//! MiB (which the first GET takes) in known 64 KiB pages (what one GET fetches at least):
//! - `a_mount_is_ready_after_one_head_and_one_get`, and a second walk sends nothing.
//! - `listing_a_group_fetches_its_childrens_headers_in_one_round_trip`: `ls -l` of a group of
//!   10 datasets whose headers lie in two runs of pages, with 500 ms per request: at most one
//!   GET per run, all started before the first one ended.
//! - `random_preads_cost_one_get_per_chunk_missed_and_none_on_a_hit`: seeded random 4 KiB
//!   preads (kernel readahead off) touching every chunk of a filtered dataset three times:
//!   exactly one GET per chunk, of that chunk's page, in the order first touched; then other
//!   blocks of the same chunks: none.
//! - `readers_missing_the_same_chunk_at_once_cause_one_get`: 16 threads, each reading its own
//!   4 KiB of one chunk, released together while a GET takes 300 ms.
//! - `a_sequential_read_is_fetched_ahead_in_few_large_gets`: `cat` of a 20 MiB contiguous
//!   dataset (a committed head plus generated elements): readahead GETs, fewer GETs than
//!   read requests, the right bytes.
//! - `a_sequential_reader_has_the_chunk_index_named_ahead_of_its_data`: two 1 MiB reads
//!   of a dataset of 4,096 small chunks fetch every leaf of its B-tree (72, spread over the
//!   file) but not the data beyond the read-ahead; a `cat` of it then gives the right bytes
//!   and fetches no leaf again. `a_first_read_alone_has_only_its_own_read_ahead_indexed`:
//!   one 4 KiB read there fetches nothing past its read-ahead.
//! - `a_mount_learns_in_the_background_whether_its_server_answers_several_ranges`: the
//!   warm-up of a file whose listing needs no GET of several ranges sends one GET of 32
//!   single bytes,
//!   and two readers' first GETs of several ranges (with 500 ms per request) then all start
//!   before the first one ends.
//! - `a_walk_through_a_listing_has_the_next_datasets_decoded_ahead`: reading a group's
//!   deflated datasets in listing order gives a local mount's bytes, and the datasets after
//!   the second are decoded ahead, each once.
//! - `statistics_show_every_remote_counter`: every `remote_*` key, requests sent at least
//!   those asked for, as many as nginx answered, latency percentiles, no failure.
//!
//! Nothing here waits a fixed time: outcomes are counts, bytes and the order of requests in
//! the log; waits are on conditions with generous bounds.
//!
//! The servers are installed by `mount-tests/install-servers` (run by `mount-tests/run`);
//! without them these tests say so and pass, unless `H5MOUNT_REQUIRE_SERVERS` is set.

mod harness;
mod servers;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use harness::{data_dir, stats, wait_for, walk, Mount};
use servers::{Nginx, Seaweed};

/// A mount of `url` that sends only the requests its test asks for (no background warm-up
/// of the root listing, see `a_remote_mount_lists_its_root_in_the_background`), so that
/// they can be counted, and faults injected into them.
fn counted(url: &str, extra: &[&str]) -> Mount {
    let mut args = vec!["--no-warm-up"];
    args.extend_from_slice(extra);
    Mount::background(Path::new(url), &args)
}

/// The requests nginx logged, as "METHOD STATUS".
fn requests(ng: &Nginx) -> Vec<String> {
    ng.access_log()
        .lines()
        .filter_map(|l| {
            let method = l.split('"').nth(1)?.split(' ').next()?;
            let status = l.split('"').nth(2)?.split_whitespace().next()?;
            Some(format!("{method} {status}"))
        })
        .collect()
}

#[test]
fn the_corpus_over_http_is_the_local_corpus() {
    let Some(ng) = Nginx::start(&data_dir(), 0) else {
        return;
    };
    let mut names: Vec<String> = fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".h5"))
        .collect();
    names.sort();
    assert!(names.len() > 50, "corpus");
    let mut differ = Vec::new();
    let mut followed = 0;
    for name in &names {
        let local = Mount::background(&data_dir().join(name), &[]);
        let remote = Mount::background(Path::new(&ng.url(name)), &[]);
        let (a, b) = (walk(local.path()), walk(remote.path()));
        // Other files a remote file names (external links, VDS sources, external storage)
        // are objects beside it on the same server, followed as the local mount follows
        // the files beside the local one: every entry is the same.
        for (k, v) in &a {
            match b.get(k) {
                Some(w) if w == v => {
                    if name.starts_with("external_") || name.starts_with("links_") {
                        followed += 1;
                    }
                }
                w => differ.push(format!("{name}: {k}: local {v}, remote {w:?}")),
            }
        }
        for k in b.keys().filter(|k| !a.contains_key(*k)) {
            differ.push(format!("{name}: {k}: only remote"));
        }
    }
    assert!(differ.is_empty(), "{differ:#?}");
    assert!(
        followed > 12,
        "entries of files that name other files: {followed}"
    );
}

#[test]
fn a_mount_is_ready_after_one_head_and_one_get() {
    let Some(ng) = Nginx::start(&data_dir(), 30) else {
        return;
    };
    let m = counted(&ng.url("chunked_huge_latest.h5"), &[]);
    let s = stats(&m);
    assert_eq!((s["remote_heads"], s["remote_gets"]), (1, 1), "{s:?}");
    assert_eq!(
        requests(&ng),
        ["HEAD 200", "GET 206"],
        "as the server saw them"
    );
    // Reading everything fetches each byte range once: a second walk sends nothing.
    let first = walk(m.path());
    let after_one = stats(&m);
    assert_eq!(walk(m.path()), first);
    let after_two = stats(&m);
    assert_eq!(after_one["remote_gets"], after_two["remote_gets"]);
    assert!(
        after_two["remote_bytes"]
            <= 2 * fs::metadata(data_dir().join("chunked_huge_latest.h5"))
                .unwrap()
                .len()
    );
}

/// `ls -l` of the root and of each directory below it: the names, and every entry's
/// metadata.
fn ls_two_levels(root: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for e in fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        let md = fs::symlink_metadata(e.path()).unwrap();
        out.push((e.file_name().to_string_lossy().into_owned(), md.len()));
        if md.is_dir() {
            for c in fs::read_dir(e.path()).unwrap() {
                let c = c.unwrap();
                let len = fs::symlink_metadata(c.path()).unwrap().len();
                out.push((
                    format!(
                        "{}/{}",
                        e.file_name().to_string_lossy(),
                        c.file_name().to_string_lossy()
                    ),
                    len,
                ));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_remote_mount_lists_its_root_in_the_background() {
    // Once ready, a mount lists its root and the groups in it (their links, their
    // children's headers): the first `ls -l` of them then costs no request. Without the
    // warm-up the same costs requests.
    let Some(ng) = Nginx::start(&remote_fixtures(), 0) else {
        return;
    };
    let m = Mount::background(Path::new(&ng.url("layout.h5")), &[]);
    assert!(
        wait_for(|| stats(&m)["remote_warm_up"] == 2),
        "{:?}",
        stats(&m)
    );
    let before = stats(&m);
    let warm = ls_two_levels(m.path());
    let after = stats(&m);
    assert_eq!(delta(&before, &after, "remote_gets"), 0, "{after:?}");
    assert!(warm.len() > 10, "{warm:?}");
    let cold = counted(&ng.url("layout.h5"), &[]);
    let before = stats(&cold);
    assert_eq!(before["remote_warm_up"], 0);
    assert_eq!(ls_two_levels(cold.path()), warm);
    assert!(delta(&before, &stats(&cold), "remote_gets") > 0);
}

#[test]
fn an_object_replaced_while_mounted_fails_its_reads_never_mixing() {
    let tmp = tempfile::tempdir().unwrap();
    let served = tmp.path().join("f.h5");
    let big = harness::fixture("big/soak.h5");
    fs::copy(&big, &served).unwrap();
    let Some(ng) = Nginx::start(tmp.path(), 0) else {
        return;
    };
    let local = Mount::background(&big, &[]);
    let m = Mount::background(Path::new(&ng.url("f.h5")), &[]);
    // Bytes past the first GET, read before and after the object is replaced.
    let names: Vec<String> = fs::read_dir(local.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| local.path().join(n).is_file())
        .collect();
    // One small dataset before (its bytes are in the first GET), the rest after.
    let (before, after): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|n| n == "compact_i2");
    assert_eq!(before.len(), 1);
    for n in &before {
        let want = fs::read(local.path().join(n)).unwrap();
        assert!(fs::read(m.path().join(n)).unwrap() == want, "{n}");
    }
    // Replace it with other bytes (another file, same name): a new ETag.
    let other = data_dir().join("chunked_huge_latest.h5");
    fs::copy(&other, tmp.path().join("new.h5")).unwrap();
    fs::rename(tmp.path().join("new.h5"), &served).unwrap();
    let mut failed = 0;
    for n in &after {
        let want = fs::read(local.path().join(n)).unwrap();
        match fs::read(m.path().join(n)) {
            Ok(got) => assert!(got == want, "{n}: a mix of old and new bytes"),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "{n}");
                failed += 1;
            }
        }
    }
    assert!(failed > 0, "no read needed the replaced object");
    assert!(stats(&m)["remote_changed"] > 0, "no GET answered 412");
    assert!(requests(&ng).iter().any(|r| r == "GET 412"));
    // The daemon is alive and still serves what it holds.
    assert!(fs::read_dir(m.path()).is_ok());
}

#[test]
fn missing_objects_and_non_hdf5_files_are_one_line_and_status_2() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("notes.txt"), b"not hdf5").unwrap();
    let Some(ng) = Nginx::start(tmp.path(), 0) else {
        return;
    };
    let mp = tmp.path().join("mnt");
    fs::create_dir(&mp).unwrap();
    for (url, says) in [
        (ng.url("nope.h5"), "no such object"),
        (ng.url("notes.txt"), "signature"),
    ] {
        let out = harness::run(&[std::ffi::OsStr::new(&url), mp.as_os_str()]);
        assert_eq!(out.status.code(), Some(2), "{url}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&url) && err.contains(says), "{err}");
        assert!(!harness::is_mounted(&mp));
    }
}

#[test]
fn s3_objects_signed_and_anonymous() {
    let Some(sw) = Seaweed::start() else {
        return;
    };
    sw.create_bucket("data");
    let name = "chunked_many_latest.h5";
    let bytes = fs::read(data_dir().join(name)).unwrap();
    sw.put_object("data", &format!("runs/{name}"), &bytes);
    let local = Mount::background(&data_dir().join(name), &[]);
    let want = walk(local.path());
    let url = format!("s3://data/runs/{name}");
    let endpoint = sw.endpoint();
    // Signed, with credentials from the environment (never the command line).
    let signed = Mount::by_command(|mp| {
        let mut c = std::process::Command::new(harness::BIN);
        c.arg(&url)
            .arg(mp)
            .args(["--endpoint", &endpoint])
            .env("AWS_ACCESS_KEY_ID", sw.access_key())
            .env("AWS_SECRET_ACCESS_KEY", sw.secret_key())
            .env("AWS_REGION", sw.region());
        c
    });
    assert_eq!(walk(signed.path()), want);
    let line = harness::mount_line(signed.path()).unwrap();
    assert!(!line.contains(sw.secret_key()), "{line}");
    // Anonymous: the store lets anyone read.
    let anon = Mount::by_command(|mp| harness::anonymous_s3(&url, mp, &endpoint));
    assert_eq!(walk(anon.path()), want);
    // Wrong credentials: a clear error and status 2.
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(harness::BIN)
        .arg(&url)
        .arg(tmp.path())
        .args(["--endpoint", &endpoint])
        .env("AWS_ACCESS_KEY_ID", "wrong")
        .env("AWS_SECRET_ACCESS_KEY", "wrong-secret")
        .env("AWS_REGION", sw.region())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&url) && !err.contains("wrong-secret"), "{err}");
    assert!(!harness::is_mounted(tmp.path()));
}

#[test]
fn a_server_gone_fails_reads_within_the_bound_and_the_mount_lives_on() {
    let Some(ng) = Nginx::start(&data_dir(), 0) else {
        return;
    };
    let big = harness::fixture("big");
    let Some(ng_big) = Nginx::start(&big, 0) else {
        return;
    };
    let m = counted(
        &ng_big.url("soak.h5"),
        &["--request-timeout", "1", "--retry-timeout", "2"],
    );
    let small = counted(&ng.url("chunked_many_latest.h5"), &[]);
    let cached = fs::read(m.path().join("compact_i2")).unwrap();
    drop(ng_big);
    let start = std::time::Instant::now();
    let e = fs::read(m.path().join("zstd")).unwrap_err();
    // Bounded by the retry timeout (2 s) plus one request: generous for a loaded machine.
    assert!(start.elapsed() < std::time::Duration::from_secs(60));
    assert_eq!(e.raw_os_error(), Some(libc::EIO));
    assert!(stats(&m)["remote_failures"] > 0);
    // The daemon lives on: what it holds still reads, and another mount is untouched.
    assert_eq!(fs::read(m.path().join("compact_i2")).unwrap(), cached);
    assert!(fs::read_dir(m.path()).is_ok());
    assert!(!walk(small.path()).is_empty());
}

#[test]
fn a_server_back_after_an_outage_serves_what_was_never_fetched() {
    let big = harness::fixture("big");
    let refs: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(big.join("soak.json")).unwrap()).unwrap();
    let sha = |name: &str| {
        refs[format!("/{name}")]["sha256"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let Some(mut ng) = Nginx::start(&big, 0) else {
        return;
    };
    let m = counted(
        &ng.url("soak.h5"),
        &["--request-timeout", "1", "--retry-timeout", "2"],
    );
    let pid = m.pid().expect("daemon pid");
    // In the first MiB (the first GET): served throughout. Reading it also reads the root
    // group's links, which lie past the first MiB.
    let cached = fs::read(m.path().join("compact_i2")).unwrap();
    assert_eq!(harness::sha256(&cached), sha("compact_i2"));

    ng.stop();
    // Datasets whose data lies past the first MiB and was never read (soak.h5 is 1.6 MB;
    // these were written last): each read fails, or is served whole from pages fetched
    // before (for the root group's links).
    let unseen = ["zstd", "blosc_lz4", "implicit", "single_gz", "fl32_edges"];
    let mut failed = Vec::new();
    for name in unseen {
        let start = std::time::Instant::now();
        match fs::read(m.path().join(name)) {
            // Bytes come only from pages fetched before the outage: all of them, right.
            Ok(got) => assert_eq!(harness::sha256(&got), sha(name), "{name}"),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "{name}: {e}");
                failed.push(name);
            }
        }
        // Bounded by the retry timeout (2 s) plus one request: generous for a loaded
        // machine.
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "{name}: {:?}",
            start.elapsed()
        );
    }
    // The last bytes of the file: nothing has fetched them.
    assert!(failed.contains(&"zstd"), "{failed:?}");
    let during = stats(&m);
    assert!(during["remote_failures"] > 0, "{during:?}");
    assert!(!harness::pid_gone(pid), "the daemon died during the outage");
    assert!(harness::is_mounted(m.path()));
    assert_eq!(fs::read(m.path().join("compact_i2")).unwrap(), cached);

    ng.restart();
    // What failed reads now, with h5py's bytes: fetched only now, once the failed pages'
    // hold (a few seconds, so that the kernel asking again fails at once) is over.
    for name in failed {
        let mut last = None;
        let ok = wait_for(|| match fs::read(m.path().join(name)) {
            Ok(b) => {
                last = Some(b);
                true
            }
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "{name}: {e}");
                false
            }
        });
        assert!(ok, "{name}: still failing after the server came back");
        let got = last.unwrap();
        assert_eq!(
            got.len() as u64,
            refs[format!("/{name}")]["nbytes"].as_u64().unwrap()
        );
        assert_eq!(harness::sha256(&got), sha(name), "{name}");
    }
    let after = stats(&m);
    assert!(
        after["remote_gets"] > during["remote_gets"],
        "nothing fetched after the restart: {after:?}"
    );
    let names: Vec<String> = fs::read_dir(m.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), refs.as_object().unwrap().len(), "{names:?}");
    // The server saw the reads after its restart, answered.
    assert!(ng
        .logged()
        .iter()
        .any(|r| r.method == "GET" && r.status == 206));
    assert!(!harness::pid_gone(pid));
}

/// The faults a [`FaultProxy`] can inject.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fault {
    /// 503 Service Unavailable.
    Unavailable,
    /// The upstream answer, cut after its first bytes.
    Cut,
    /// 416 Range Not Satisfiable (as some servers answer a GET of several ranges).
    Refused,
}

/// A fault-injecting TCP proxy in front of a real server: the first `fail` connections get
/// a 503 answer (with `truncate`: the first `fail` GETs get the upstream answer cut after its
/// first bytes), the rest are passed through both ways. Counts the faults it injected; stops
/// when dropped.
struct FaultProxy {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    faults: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl FaultProxy {
    fn start(upstream: u16, fail: usize, truncate: bool) -> FaultProxy {
        let fault = if truncate {
            Fault::Cut
        } else {
            Fault::Unavailable
        };
        Self::start_for(upstream, fail, fault, false)
    }

    /// Like [`FaultProxy::start`], with the fault `fault`, and only for GETs of several
    /// ranges when `multi_only`.
    fn start_for(upstream: u16, fail: usize, fault: Fault, multi_only: bool) -> FaultProxy {
        use std::io::{Read, Write};
        use std::net::{TcpListener, TcpStream};
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let faults = std::sync::Arc::new(AtomicUsize::new(0));
        let (s, f) = (stop.clone(), faults.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok((mut client, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let mut first = vec![0u8; 8192];
                let Ok(k) = client.read(&mut first) else {
                    continue;
                };
                first.truncate(k);
                let multi = String::from_utf8_lossy(&first)
                    .to_ascii_lowercase()
                    .lines()
                    .any(|l| l.starts_with("range:") && l.contains(','));
                let faulty = f.load(Ordering::Relaxed) < fail && (multi || !multi_only);
                let status: &[u8] = match fault {
                    Fault::Unavailable => b"503 Service Unavailable",
                    Fault::Refused => b"416 Range Not Satisfiable",
                    Fault::Cut => b"",
                };
                if faulty && !status.is_empty() {
                    f.fetch_add(1, Ordering::Relaxed);
                    let _ = client.write_all(
                        &[
                            b"HTTP/1.1 ",
                            status,
                            b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        ]
                        .concat(),
                    );
                    continue;
                }
                // One request per connection (the server closes after answering), so every
                // request is seen here first.
                if let Some(end) = first.windows(4).position(|w| w == b"\r\n\r\n") {
                    first.splice(end..end, b"\r\nConnection: close".iter().copied());
                }
                let cut = faulty && first.starts_with(b"GET ");
                if cut {
                    f.fetch_add(1, Ordering::Relaxed);
                }
                let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                if up.write_all(&first).is_err() {
                    continue;
                }
                let (mut c2, mut u2) = (client.try_clone().unwrap(), up.try_clone().unwrap());
                let (mut c1, mut u1) = (client, up);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c1, &mut u1);
                    let _ = u1.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    if cut {
                        // Headers and a few body bytes, then the connection drops.
                        let mut buf = vec![0u8; 600];
                        if let Ok(k) = u2.read(&mut buf) {
                            let _ = c2.write_all(&buf[..k]);
                        }
                        let _ = c2.shutdown(std::net::Shutdown::Both);
                    } else {
                        let _ = std::io::copy(&mut u2, &mut c2);
                        let _ = c2.shutdown(std::net::Shutdown::Write);
                    }
                });
            }
        });
        FaultProxy { port, stop, faults }
    }

    fn url(&self, rel: &str) -> String {
        format!("http://127.0.0.1:{}/{rel}", self.port)
    }

    fn faults(&self) -> usize {
        self.faults.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn answers_503_and_cut_short_are_retried_then_served() {
    let Some(ng) = Nginx::start(&data_dir(), 0) else {
        return;
    };
    let name = "chunked_many_latest.h5";
    let local = Mount::background(&data_dir().join(name), &[]);
    let want = walk(local.path());
    for truncate in [false, true] {
        let proxy = FaultProxy::start(ng.port(), 3, truncate);
        let m = counted(&proxy.url(name), &[]);
        assert_eq!(walk(m.path()), want, "truncate={truncate}");
        assert_eq!(proxy.faults(), 3, "faults injected, truncate={truncate}");
    }
    // The server saw only the requests that reached it whole.
    assert!(requests(&ng)
        .iter()
        .all(|r| r.ends_with(" 200") || r.ends_with(" 206")));
}

/// nginx serving the remote fixtures, and the walk of a local mount of `layout.h5`.
fn layout_served() -> Option<(Nginx, BTreeMap<String, String>)> {
    let ng = Nginx::start(&remote_fixtures(), 0)?;
    let local = Mount::background(&remote_fixtures().join("layout.h5"), &[]);
    Some((ng, walk(local.path())))
}

/// Mount `layout.h5` through `proxy`, check its walk is `want` with no failed request; the
/// mount's statistics.
fn walk_layout_through(
    proxy: &FaultProxy,
    want: &BTreeMap<String, String>,
) -> BTreeMap<String, u64> {
    let m = counted(&proxy.url("layout.h5"), &[]);
    assert_eq!(&walk(m.path()), want);
    let s = stats(&m);
    assert_eq!(s["remote_failures"], 0, "{s:?}");
    s
}

#[test]
fn gets_of_several_ranges_answered_503_or_cut_short_are_retried_then_served() {
    let Some((ng, want)) = layout_served() else {
        return;
    };
    for fault in [Fault::Unavailable, Fault::Cut] {
        let proxy = FaultProxy::start_for(ng.port(), 3, fault, true);
        let skip = ng.logged().len();
        let s = walk_layout_through(&proxy, &want);
        assert_eq!(proxy.faults(), 3, "faults injected, {fault:?}");
        // Retried, not given up on: GETs of several ranges reached the server and were
        // answered with their parts after the faults.
        let served = gets_after(&ng, skip)
            .into_iter()
            .filter(|g| g.ranges.len() > 1 && g.status == 206)
            .count();
        assert!(served > 0, "{fault:?}: {s:?}");
    }
}

#[test]
fn a_server_that_refuses_several_ranges_gets_one_get_per_run() {
    // 416 for a GET of several ranges (as some servers answer): the runs are fetched one
    // GET each, and no GET of several ranges is sent again.
    let Some((ng, want)) = layout_served() else {
        return;
    };
    let proxy = FaultProxy::start_for(ng.port(), usize::MAX, Fault::Refused, true);
    let skip = ng.logged().len();
    let s = walk_layout_through(&proxy, &want);
    assert_eq!(proxy.faults(), 1, "GETs of several ranges sent: {s:?}");
    assert!(gets_after(&ng, skip).iter().all(|g| g.ranges.len() == 1));
}

#[test]
fn a_server_slower_than_the_request_timeout_is_an_error_within_the_bound() {
    // Every request waits 3 s at the server; requests may take 1 s, retries 2 s in all.
    let Some(ng) = Nginx::start(&data_dir(), 3000) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = ng.url("chunked_many_latest.h5");
    let start = std::time::Instant::now();
    let out = harness::run(&[
        std::ffi::OsStr::new(&url),
        tmp.path().as_os_str(),
        std::ffi::OsStr::new("--request-timeout"),
        std::ffi::OsStr::new("1"),
        std::ffi::OsStr::new("--retry-timeout"),
        std::ffi::OsStr::new("2"),
    ]);
    // Generous: the bound is about 3 s; a loaded machine must not make this fail.
    assert!(start.elapsed() < std::time::Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&url), "{err}");
    assert!(!harness::is_mounted(tmp.path()));
}

// ---------------------------------------------------------------------------------------------
// Requests counted: the fixtures of mount-tests/fixtures/remote (see make_remote.py there).

fn remote_fixtures() -> PathBuf {
    harness::fixture("remote")
}

/// Blocks in which make_remote.py placed apart what the tests count: a metadata miss of the
/// remote read engine fetches one such aligned block (src/io/remote.rs, `META_UNIT`), a
/// data miss or a prefetch the engine's smaller pages within it.
const PAGE: u64 = 64 << 10;
/// The engine's page (src/io/pages.rs).
const ENGINE_PAGE: u64 = 16 << 10;

/// `layout.json`: where make_remote.py put the things the tests count.
struct Layout {
    json: serde_json::Value,
}

impl Layout {
    fn load() -> Layout {
        let text = fs::read_to_string(remote_fixtures().join("layout.json")).unwrap();
        Layout {
            json: serde_json::from_str(&text).unwrap(),
        }
    }

    fn num(v: &serde_json::Value) -> u64 {
        v.as_u64()
            .unwrap_or_else(|| panic!("not a number in layout.json: {v}"))
    }

    /// The header addresses of the group's datasets, by name.
    fn headers(&self) -> BTreeMap<String, u64> {
        self.json["headers"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), Self::num(v)))
            .collect()
    }

    /// `(address, stored size)` of each chunk of the chunked dataset, in logical order.
    fn chunks(&self) -> Vec<(u64, u64)> {
        self.json["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (Self::num(&c["addr"]), Self::num(&c["size"])))
            .collect()
    }

    /// Bytes of one decoded chunk.
    fn chunk_bytes(&self) -> u64 {
        Self::num(&self.json["chunk_bytes"])
    }

    fn sha256(&self, obj: &str) -> String {
        self.json["sha256"][obj].as_str().unwrap().to_string()
    }

    fn stream(&self, key: &str) -> &serde_json::Value {
        &self.json["stream"][key]
    }
}

/// The first and last page of a logged GET.
fn pages_of(r: &servers::Logged) -> (u64, u64) {
    let (a, b) = r
        .range()
        .unwrap_or_else(|| panic!("GET without a range: {r:?}"));
    (a / PAGE, b / PAGE)
}

/// The GETs nginx logged after the first `skip` requests.
fn gets_after(ng: &Nginx, skip: usize) -> Vec<servers::Logged> {
    ng.logged()
        .into_iter()
        .skip(skip)
        .filter(|r| r.method == "GET")
        .collect()
}

/// `counter` of `after` minus that of `before`.
fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, counter: &str) -> u64 {
    after[counter] - before[counter]
}

/// Ask the kernel to read only the pages asked for (no readahead) on `f`: each 4 KiB pread
/// is then one FUSE read of 4 KiB.
fn no_kernel_readahead(f: &fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor; posix_fadvise only sets a flag on the open file.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    assert_eq!(rc, 0, "posix_fadvise(RANDOM)");
}

/// `ls -l` of `/g` through `ng` (every request held 500 ms); the header addresses, the GETs
/// it took (nginx's log) and a description for messages.
fn list_g(ng: &Nginx) -> (Vec<u64>, Vec<servers::Logged>, String) {
    let fx = Layout::load();
    let heads = fx.headers();
    assert!(heads.len() >= 10);
    let m = counted(&ng.url("layout.h5"), &[]);
    let skip = ng.logged().len();
    let before = stats(&m);
    let out = std::process::Command::new("ls")
        .arg("-l")
        .arg(m.at("/g"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let listed: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with('-'))
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    assert_eq!(listed, heads.keys().collect::<Vec<_>>(), "{text}");
    // Ten int32 each.
    assert!(
        text.lines()
            .filter(|l| l.starts_with('-'))
            .all(|l| l.split_whitespace().nth(4) == Some("40")),
        "{text}"
    );
    let after = stats(&m);
    let gets = gets_after(ng, skip);
    let mut addrs: Vec<u64> = heads.values().copied().collect();
    addrs.sort_unstable();
    let shown = format!("headers at {addrs:?}, GETs {gets:#?}, stats {after:?}");
    assert_eq!(
        gets.len() as u64,
        delta(&before, &after, "remote_gets"),
        "{shown}"
    );
    assert!(delta(&before, &after, "remote_merged") > 0, "{shown}");
    // Every header was in a range fetched, and every range fetched held a header.
    let served: Vec<(u64, u64)> = gets
        .iter()
        .filter(|g| g.status == 206)
        .flat_map(|g| g.ranges.iter().copied())
        .collect();
    for a in &addrs {
        assert!(
            served.iter().any(|(s, e)| s <= a && a <= e),
            "header at {a} not fetched: {shown}"
        );
    }
    for (s, e) in &served {
        assert!(
            addrs.iter().any(|a| s <= a && a <= e),
            "range {s}-{e} holds no header: {shown}"
        );
    }
    // One round trip: every GET answered with bytes started before the first of them
    // ended.
    let answered: Vec<&servers::Logged> = gets.iter().filter(|g| g.status == 206).collect();
    let first_end = answered.iter().map(|g| g.end_ms).min().unwrap();
    assert!(
        answered.iter().all(|g| g.start_ms < first_end),
        "GETs waited for each other: {shown}"
    );
    (addrs, gets, shown)
}

#[test]
fn listing_a_group_fetches_its_childrens_headers_in_one_round_trip() {
    // Every request waits 500 ms at the server: requests sent one after the other would
    // start after the previous one ended, which the log shows.
    let Some(ng) = Nginx::start(&remote_fixtures(), 500) else {
        return;
    };
    let (addrs, gets, shown) = list_g(&ng);
    // The headers lie in two runs of blocks apart: one GET of several ranges, each range the
    // engine's pages around a header (no gap between two headers fetched).
    assert_eq!(gets.len(), 1, "{shown}");
    let g = &gets[0];
    assert_eq!(g.status, 206, "{shown}");
    assert!(g.ranges.len() >= 2, "{shown}");
    for (s, e) in &g.ranges {
        assert_eq!(s % ENGINE_PAGE, 0, "{shown}");
        let pages = (e + 1).div_ceil(ENGINE_PAGE) - s / ENGINE_PAGE;
        let held = addrs.iter().filter(|a| s <= *a && *a <= e).count() as u64;
        assert!(
            pages <= 2 * held,
            "range {s}-{e}: {pages} pages for {held} headers: {shown}"
        );
    }
}

#[test]
fn a_server_that_serves_one_range_per_get_gets_one_get_per_run() {
    let Some(ng) = Nginx::start_one_range(&remote_fixtures(), 500) else {
        return;
    };
    let (addrs, gets, shown) = list_g(&ng);
    // The first GET asks for several ranges; the server answers the whole file, which the
    // mount does not read but refuses; then one GET per run of pages, each of one range,
    // sent together (checked by list_g).
    assert!(gets[0].ranges.len() >= 2, "{shown}");
    assert_eq!(gets[0].status, 200, "{shown}");
    // The runs of pages the headers' hints (4 KiB each) touch, the gaps between them not
    // fetched (the hint was sent for GETs of several ranges).
    let mut pages: Vec<u64> = addrs
        .iter()
        .flat_map(|a| a / ENGINE_PAGE..=(a + 4095) / ENGINE_PAGE)
        .collect();
    pages.sort_unstable();
    pages.dedup();
    let runs = 1 + pages.windows(2).filter(|w| w[1] > w[0] + 1).count();
    let rest = &gets[1..];
    assert!(
        !rest.is_empty() && rest.len() <= runs,
        "{runs} runs: {shown}"
    );
    assert!(
        rest.iter().all(|g| g.ranges.len() == 1 && g.status == 206),
        "{shown}"
    );
}

/// The chunk of `/rand` that image offset `off` falls in.
fn chunk_of(fx: &Layout, off: u64) -> usize {
    (off / fx.chunk_bytes()) as usize
}

/// Bytes of `/rand` as h5py reads them, through a local mount (checked against
/// layout.json).
fn rand_bytes(fx: &Layout) -> Vec<u8> {
    let local = Mount::background(&remote_fixtures().join("layout.h5"), &[]);
    let want = fs::read(local.at("/rand")).unwrap();
    assert_eq!(harness::sha256(&want), fx.sha256("/rand"));
    want
}

#[test]
fn random_preads_cost_one_get_per_chunk_missed_and_none_on_a_hit() {
    let fx = Layout::load();
    let chunks = fx.chunks();
    assert!(chunks.len() >= 8);
    // Every chunk alone in its page, past the first MiB (make_remote.py checks it too).
    let chunk_page: Vec<u64> = chunks.iter().map(|(a, _)| a / PAGE).collect();
    for (a, n) in &chunks {
        assert_eq!(a / PAGE, (a + n - 1) / PAGE);
        assert!(*a >= 1 << 20);
    }
    let want = rand_bytes(&fx);
    let Some(ng) = Nginx::start(&remote_fixtures(), 0) else {
        return;
    };
    let m = counted(&ng.url("layout.h5"), &[]);
    let f = fs::File::open(m.at("/rand")).unwrap();
    no_kernel_readahead(&f);
    // Three 4 KiB blocks of every chunk, all different, in a random (seeded) order; then
    // the other blocks of the same chunks, once each: chunk-cache hits.
    let per_chunk = fx.chunk_bytes() / 4096;
    let mut rng = harness::Rng(0x9e37_79b9_7f4a_7c15);
    let mut first = Vec::new();
    let mut second = Vec::new();
    for c in 0..chunks.len() as u64 {
        let mut blocks: Vec<u64> = (0..per_chunk).collect();
        shuffle(&mut blocks, &mut rng);
        let at = |b: &u64| c * fx.chunk_bytes() + b * 4096;
        first.extend(blocks[..3].iter().map(at));
        second.extend(blocks[3..6].iter().map(at));
    }
    shuffle(&mut first, &mut rng);
    shuffle(&mut second, &mut rng);
    let read = |off: u64| {
        let mut b = vec![0u8; 4096];
        f.read_exact_at(&mut b, off).unwrap();
        assert!(
            b[..] == want[off as usize..off as usize + 4096],
            "bytes at {off}"
        );
    };
    let skip = ng.logged().len();
    let before = stats(&m);
    // The chunks in the order of their first touch, and the GETs after each pread.
    let mut touched: Vec<usize> = Vec::new();
    let mut steps = Vec::new();
    for &off in &first {
        let c = chunk_of(&fx, off);
        if !touched.contains(&c) {
            touched.push(c);
        }
        read(off);
        let s = stats(&m);
        steps.push(format!(
            "{off} (chunk {c}): {} GETs, {} readahead, {} prefetch jobs",
            delta(&before, &s, "remote_gets"),
            delta(&before, &s, "remote_readahead"),
            delta(&before, &s, "prefetch_jobs")
        ));
    }
    let after = stats(&m);
    let gets = gets_after(&ng, skip);
    let fetched: Vec<(u64, u64)> = gets.iter().map(pages_of).collect();
    let touched_pages: Vec<(u64, u64)> = touched
        .iter()
        .map(|&c| (chunk_page[c], chunk_page[c]))
        .collect();
    let shown = format!(
        "chunks in the order first touched {touched:?} (pages {touched_pages:?}); \
         after each pread (image offset), the counts so far: {steps:#?}; pages of the GETs \
         nginx answered {fetched:?}; readahead GETs {}, merged {}, h5mount prefetch jobs {}",
        delta(&before, &after, "remote_readahead"),
        delta(&before, &after, "remote_merged"),
        delta(&before, &after, "prefetch_jobs"),
    );
    assert_eq!(
        delta(&before, &after, "read_requests"),
        first.len() as u64,
        "each pread is one read request: {shown}"
    );
    assert_eq!(
        delta(&before, &after, "remote_gets"),
        touched.len() as u64,
        "one GET per chunk missed: {shown}"
    );
    assert_eq!(
        fetched, touched_pages,
        "each GET fetched its chunk's page: {shown}"
    );

    // Other blocks of the same chunks: no request.
    let before = stats(&m);
    for &off in &second {
        read(off);
    }
    let after = stats(&m);
    assert_eq!(delta(&before, &after, "read_requests"), second.len() as u64);
    assert_eq!(delta(&before, &after, "remote_gets"), 0, "{after:?}");
}

/// Fisher-Yates with the harness's seeded generator.
fn shuffle<T>(v: &mut [T], rng: &mut harness::Rng) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
}

#[test]
fn readers_missing_the_same_chunk_at_once_cause_one_get() {
    let fx = Layout::load();
    let want = rand_bytes(&fx);
    // A GET takes 300 ms at the server, so the readers are all waiting while it runs (the
    // count holds whatever the interleaving).
    let Some(ng) = Nginx::start(&remote_fixtures(), 300) else {
        return;
    };
    let m = counted(&ng.url("layout.h5"), &[]);
    let chunk = 6u64;
    let readers = 16u64;
    assert!(readers * 4096 <= fx.chunk_bytes());
    let files: Vec<fs::File> = (0..readers)
        .map(|_| {
            let f = fs::File::open(m.at("/rand")).unwrap();
            no_kernel_readahead(&f);
            f
        })
        .collect();
    let skip = ng.logged().len();
    let before = stats(&m);
    let gate = std::sync::Barrier::new(readers as usize);
    let chunk_bytes = fx.chunk_bytes();
    std::thread::scope(|s| {
        for (i, f) in files.iter().enumerate() {
            let (gate, want) = (&gate, &want);
            s.spawn(move || {
                // Each its own 4 KiB of the chunk: reads the kernel cannot join.
                let off = chunk * chunk_bytes + i as u64 * 4096;
                let mut b = vec![0u8; 4096];
                gate.wait();
                f.read_exact_at(&mut b, off).unwrap();
                assert!(
                    b[..] == want[off as usize..off as usize + 4096],
                    "reader {i}"
                );
            });
        }
    });
    let after = stats(&m);
    assert_eq!(
        delta(&before, &after, "read_requests"),
        readers,
        "every reader reached the daemon: {after:?}"
    );
    let gets = gets_after(&ng, skip);
    assert_eq!(
        delta(&before, &after, "remote_gets"),
        1,
        "{gets:#?} {after:?}"
    );
    let page = fx.chunks()[chunk as usize].0 / PAGE;
    assert_eq!(
        gets.iter().map(pages_of).collect::<Vec<_>>(),
        [(page, page)]
    );
}

/// The stream fixture served by nginx: the committed head followed by the elements of
/// /stream; the elements' bytes.
fn stream_file(dir: &Path) -> Vec<u8> {
    let fx = Layout::load();
    let offset = Layout::num(fx.stream("data_offset"));
    let elements = Layout::num(fx.stream("elements"));
    let mult = Layout::num(fx.stream("multiplier")) as u32;
    let data: Vec<u8> = (0..elements as u32)
        .flat_map(|i| i.wrapping_mul(mult).to_le_bytes())
        .collect();
    assert!(data.len() >= 16 << 20);
    assert_eq!(
        harness::sha256(&data),
        fx.stream("sha256").as_str().unwrap()
    );
    let head = fs::read(remote_fixtures().join(fx.stream("head").as_str().unwrap())).unwrap();
    assert_eq!(head.len() as u64, offset);
    let mut file = head;
    file.extend_from_slice(&data);
    fs::write(dir.join("stream.h5"), &file).unwrap();
    data
}

/// A counted mount of the stream fixture over nginx after one 1 MiB read of /stream at
/// `at`, the kernel reading nothing ahead, and a wait until the rest of the dataset past
/// that read was fetched in the background (asserted). Fields drop in order: the mount
/// before its server.
struct AfterOneRead {
    m: Mount,
    before: BTreeMap<String, u64>,
    ahead: BTreeMap<String, u64>,
    data: Vec<u8>,
    _ng: Nginx,
    _tmp: tempfile::TempDir,
}

fn after_one_read(at: u64) -> Option<AfterOneRead> {
    let tmp = tempfile::tempdir().unwrap();
    let data = stream_file(tmp.path());
    let ng = Nginx::start(tmp.path(), 0)?;
    let m = counted(&ng.url("stream.h5"), &[]);
    let before = stats(&m);
    let f = fs::File::open(m.at("/stream")).unwrap();
    no_kernel_readahead(&f);
    let mut buf = vec![0u8; 1 << 20];
    f.read_exact_at(&mut buf, at).unwrap();
    assert!(buf[..] == data[at as usize..at as usize + buf.len()]);
    let fetched = |s: &BTreeMap<String, u64>| delta(&before, s, "remote_bytes");
    let rest = data.len() as u64 - at - (1 << 20);
    let all = wait_for(|| fetched(&stats(&m)) >= rest);
    let ahead = stats(&m);
    assert!(
        all,
        "after one read at {at}, only {} of the dataset's {} bytes fetched: {ahead:?}",
        fetched(&ahead),
        data.len()
    );
    assert!(delta(&before, &ahead, "remote_readahead") > 0, "{ahead:?}");
    Some(AfterOneRead {
        m,
        before,
        ahead,
        data,
        _ng: ng,
        _tmp: tmp,
    })
}

#[test]
fn a_sequential_read_is_fetched_ahead_in_few_large_gets() {
    // One read at the start of the contiguous dataset, the kernel reading nothing ahead:
    // the rest of the dataset is fetched at once, in the background.
    let Some(r) = after_one_read(0) else {
        return;
    };
    let out = std::process::Command::new("cat")
        .arg(r.m.at("/stream"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout == r.data, "the bytes of cat differ");
    let after = stats(&r.m);
    let reads = delta(&r.before, &after, "read_requests");
    let gets = delta(&r.before, &after, "remote_gets");
    let shown = format!("{reads} reads, {gets} GETs: {after:?}");
    assert!(gets < reads, "{shown}");
    assert_eq!(
        delta(&r.ahead, &after, "remote_gets"),
        0,
        "GETs after the readahead: {shown}"
    );
}

#[test]
fn a_first_read_just_past_the_start_is_fetched_ahead_too() {
    // The kernel sends a reader's first reads together, and they reach the FUSE threads in
    // either order: the read of the second MiB may come first. It still starts the stream
    // that fetches the dataset ahead, not a round trip per read.
    after_one_read(1 << 20);
}

/// Whether the inclusive byte range `r` holds one of `addrs`.
fn holds(r: (u64, u64), addrs: &[u64]) -> bool {
    addrs.iter().any(|&a| r.0 <= a && a <= r.1)
}

/// btree.h5 (make_remote.py, committed gzip-compressed): /tiny, 8 MiB in 4,096 chunks of
/// 2 KiB whose v1 B-tree has 72 leaves spread between them over the file, served by nginx
/// and mounted. Fields drop in order: the mount before its server, the directory it
/// serves last.
struct Btree {
    m: Mount,
    ng: Nginx,
    /// Its layout.json entry.
    b: serde_json::Value,
    /// /tiny's bytes.
    data: Vec<u8>,
    _tmp: tempfile::TempDir,
}

impl Btree {
    /// Served with `delay_ms` per request, mounted with the warm-up if `warm` (else
    /// [`counted`]); `None` without nginx.
    fn served(delay_ms: u32, warm: bool) -> Option<Btree> {
        use std::io::Read;
        let tmp = tempfile::tempdir().unwrap();
        // The server first: without it, nothing else is worth doing.
        let ng = Nginx::start(tmp.path(), delay_ms)?;
        let b = Layout::load().json["btree"].clone();
        let gz = fs::File::open(remote_fixtures().join(b["file"].as_str().unwrap())).unwrap();
        let mut file = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut file)
            .unwrap();
        assert_eq!(file.len() as u64, Layout::num(&b["filesize"]));
        fs::write(tmp.path().join("btree.h5"), &file).unwrap();
        let chunk = Layout::num(&b["chunk_bytes"]) as usize;
        let n = Layout::num(&b["nbytes"]) as usize;
        // Chunk k holds one value, as make_remote.py's btree_value.
        let data: Vec<u8> = (0..n).map(|i| ((i / chunk) * 7 % 251 + 1) as u8).collect();
        assert_eq!(harness::sha256(&data), b["sha256"].as_str().unwrap());
        let url = ng.url("btree.h5");
        let m = if warm {
            Mount::background(Path::new(&url), &[])
        } else {
            counted(&url, &[])
        };
        Some(Btree {
            m,
            ng,
            b,
            data,
            _tmp: tmp,
        })
    }

    /// The addresses layout.json lists under `key` ("leaves", "upper").
    fn addrs(&self, key: &str) -> Vec<u64> {
        self.b[key]
            .as_array()
            .unwrap()
            .iter()
            .map(Layout::num)
            .collect()
    }

    /// The address of the chunk at MiB `mib` of /tiny.
    fn chunk_at(&self, mib: u64) -> u64 {
        Layout::num(&self.b["chunk_at_mib"][mib.to_string().as_str()])
    }

    /// Every range of every GET nginx logged.
    fn ranges(&self) -> Vec<(u64, u64)> {
        self.ng
            .logged()
            .iter()
            .filter(|r| r.method == "GET")
            .flat_map(|r| r.ranges.clone())
            .collect()
    }
}

#[test]
fn a_sequential_reader_has_the_chunk_index_named_ahead_of_its_data() {
    // Two 1 MiB reads at the start of a dataset of 4,096 small chunks, the kernel reading
    // nothing ahead: the read-ahead fetches the data up to 4 MiB, and the chunk index
    // further on, here the whole of it: every leaf of the B-tree is fetched, though the
    // data after the read-ahead is not. A reader going on then finds each window's index
    // nodes here, and the requests for its data go out at once instead of a round trip
    // later. Without it, the leaves come a window at a time, each a round trip before that
    // window's data.
    let Some(t) = Btree::served(0, false) else {
        return;
    };
    let (m, ng, data) = (&t.m, &t.ng, &t.data);
    let leaves = t.addrs("leaves");
    let holds_leaf = |r: &(u64, u64)| holds(*r, &leaves);
    let missing = || {
        let parts = t.ranges();
        leaves
            .iter()
            .copied()
            .filter(|&a| !parts.iter().any(|&r| holds(r, &[a])))
            .collect::<Vec<u64>>()
    };
    let f = fs::File::open(m.at("/tiny")).unwrap();
    no_kernel_readahead(&f);
    let mut buf = vec![0u8; 1 << 20];
    for at in [0, 1 << 20] {
        f.read_exact_at(&mut buf, at).unwrap();
        assert!(
            buf[..] == data[at as usize..][..buf.len()],
            "the MiB at {at} differs"
        );
    }
    assert!(
        wait_for(|| missing().is_empty()),
        "after two reads, leaves not fetched: {:?}; requests: {:?}",
        missing(),
        ng.logged()
    );
    // Index pages, not the data between them: every range fetched lies before the chunk at
    // 4 MiB (where the read-ahead stops) or holds a leaf.
    let window_end = t.chunk_at(4);
    let beyond: Vec<(u64, u64)> = t
        .ranges()
        .into_iter()
        .filter(|r| r.0 >= window_end && !holds_leaf(r))
        .collect();
    assert!(
        beyond.is_empty(),
        "data past the read-ahead fetched: {beyond:?}"
    );
    // The rest of the dataset, read on: the same bytes, no leaf fetched again.
    let seen = ng.logged().len();
    let out = std::process::Command::new("cat")
        .arg(m.at("/tiny"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stdout == *data, "the bytes of cat differ");
    let again: Vec<servers::Logged> = gets_after(ng, seen)
        .into_iter()
        .filter(|r| r.ranges.iter().any(holds_leaf))
        .collect();
    assert!(again.is_empty(), "leaves fetched again: {again:?}");
}

#[test]
fn a_mount_learns_in_the_background_whether_its_server_answers_several_ranges() {
    // Until an HTTP server has answered a GET of several ranges with parts, such GETs go
    // one at a time. A file whose root listing needs none (one dataset) has the warm-up
    // send one, of single bytes; readers' first GETs of several ranges (here leaves of a
    // B-tree) then go out together, not after the first one's answer. Every request waits
    // 500 ms at the server: one sent after another's answer starts after that one ended,
    // which the log shows.
    let Some(t) = Btree::served(500, true) else {
        return;
    };
    let (m, ng) = (&t.m, &t.ng);
    assert!(
        wait_for(|| stats(m)["remote_warm_up"] == 2),
        "{:?}",
        stats(m)
    );
    let len = Layout::num(&t.b["filesize"]);
    let logged = ng.logged();
    let probes: Vec<&servers::Logged> = logged.iter().filter(|r| r.ranges.len() > 1).collect();
    assert_eq!(probes.len(), 1, "{logged:?}");
    // As many ranges as a reader's GET may hold (32), single bytes spread over the file.
    let want: Vec<(u64, u64)> = (0..32).map(|i| i * (len / 32)).map(|a| (a, a)).collect();
    assert_eq!(probes[0].ranges, want, "{logged:?}");
    assert_eq!(probes[0].status, 206, "{logged:?}");
    // Two readers at once, 1 MiB each at 3 and 6 MiB, each needing leaves of its own:
    // both wait for the tree's root, then name their leaves within moments of each other.
    let seen = logged.len();
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        for at in [3u64 << 20, 6 << 20] {
            let (data, barrier) = (&t.data, &barrier);
            s.spawn(move || {
                let f = fs::File::open(m.at("/tiny")).unwrap();
                no_kernel_readahead(&f);
                let mut buf = vec![0u8; 1 << 20];
                barrier.wait();
                f.read_exact_at(&mut buf, at).unwrap();
                assert!(
                    buf[..] == data[at as usize..][..buf.len()],
                    "the MiB at {at}"
                );
            });
        }
    });
    // Each reader's first GET of leaves, of those in the file between the chunks it reads
    // (h5py writes a leaf near the chunks it indexes): the two overlap in time.
    let gets = gets_after(ng, seen);
    let first_for = |from: u64, to: u64| {
        let (lo, hi) = (t.chunk_at(from), t.chunk_at(to));
        let leaves: Vec<u64> = t
            .addrs("leaves")
            .into_iter()
            .filter(|&a| lo <= a && a < hi)
            .collect();
        assert!(!leaves.is_empty(), "no leaf between MiB {from} and {to}");
        gets.iter()
            .filter(|r| r.ranges.len() > 1 && r.ranges.iter().any(|&range| holds(range, &leaves)))
            .min_by_key(|r| r.start_ms)
            .unwrap_or_else(|| panic!("no GET of leaves for MiB {from}: {gets:?}"))
            .clone()
    };
    let (a, c) = (first_for(3, 4), first_for(6, 7));
    assert!(
        a.start_ms < c.end_ms && c.start_ms < a.end_ms,
        "the readers' GETs of leaves one after another: {a:?} {c:?}"
    );
}

#[test]
fn a_first_read_alone_has_only_its_own_read_ahead_indexed() {
    // One 4 KiB read at the start of the same dataset (a program sniffing its first
    // bytes): the index of its read-ahead (1 MiB) only, not the leaves further on.
    let Some(t) = Btree::served(0, false) else {
        return;
    };
    let (m, ng) = (&t.m, &t.ng);
    let before = stats(m);
    let f = fs::File::open(m.at("/tiny")).unwrap();
    no_kernel_readahead(&f);
    let mut buf = vec![0u8; 4096];
    f.read_exact_at(&mut buf, 0).unwrap();
    assert!(buf[..] == t.data[..4096]);
    // Its read-ahead done: the mount's requests all answered, and the prefetch job of the
    // MiB after the read through.
    let done = wait_for(|| {
        let s = stats(m);
        delta(&before, &s, "prefetch_bytes") >= 1 << 20
            && s["remote_sent"] == ng.logged().len() as u64
    });
    assert!(done, "{:?}", stats(m));
    // Past the chunk at 2 MiB, only the tree's upper nodes (its root, which split last, lies
    // near the end of the file).
    let window_end = t.chunk_at(2);
    let upper = t.addrs("upper");
    let far: Vec<(u64, u64)> = t
        .ranges()
        .into_iter()
        .filter(|&r| r.0 >= window_end && !holds(r, &upper))
        .collect();
    assert!(far.is_empty(), "fetched past 2 MiB of the dataset: {far:?}");
}

#[test]
fn readahead_stays_in_the_dataset_read_until_the_reader_goes_on_to_the_next() {
    let fx = Layout::load();
    let chunked = &fx.stream("chunked");
    let tmp = tempfile::tempdir().unwrap();
    stream_file(tmp.path());
    let Some(ng) = Nginx::start(tmp.path(), 0) else {
        return;
    };
    // /a and /b lie in the first MiB, which the mount fetched: reading them costs nothing,
    // and whatever is fetched is fetched ahead.
    let m = counted(&ng.url("stream.h5"), &[]);
    let cat = |names: &[&str]| {
        let out = std::process::Command::new("cat")
            .args(names.iter().map(|n| m.at(n)))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        out.stdout
    };
    let before = stats(&m);
    let a = cat(&["/a"]);
    assert_eq!(
        harness::sha256(&a),
        chunked["/a"]["sha256"].as_str().unwrap()
    );
    let after_a = stats(&m);
    for k in ["remote_readahead", "remote_gets"] {
        assert_eq!(
            delta(&before, &after_a, k),
            0,
            "{k} after reading /a alone: {after_a:?}"
        );
    }
    // Then /b, whose chunks follow /a's (/a's decoded chunks are cached now): a reader
    // going through the file's datasets in order (in file order, and the next in the
    // listing), read ahead past /b into /stream, which is not read here at all: a GET of
    // its first bytes (its data starts where stream.head ends) reaches the server.
    let ab = cat(&["/a", "/b"]);
    assert_eq!(&ab[..a.len()], &a[..]);
    assert_eq!(
        harness::sha256(&ab[a.len()..]),
        chunked["/b"]["sha256"].as_str().unwrap()
    );
    let start = Layout::num(fx.stream("data_offset"));
    assert!(
        wait_for(|| ng
            .logged()
            .iter()
            .any(|g| g.ranges.iter().any(|&(a, b)| a <= start && start <= b))),
        "nothing read ahead into /stream: {:?}",
        stats(&m)
    );
}

#[test]
fn a_walk_through_a_listing_has_the_next_datasets_decoded_ahead() {
    // filters_gzip: a root of 14 small deflated datasets, read in listing order, each opened
    // after the one before was closed (as one `cat` of them does): a walk, from the second
    // on. The reader waits after the second until the datasets after it are decoded ahead
    // (it could otherwise outrun the walk's thread on a busy machine, and find nothing to
    // wait for), then reads on: none of them is decoded again.
    let name = "filters_gzip_earliest.h5";
    let Some(ng) = Nginx::start(&data_dir(), 0) else {
        return;
    };
    let local = Mount::background(&data_dir().join(name), &[]);
    let m = counted(&ng.url(name), &[]);
    let mut names: Vec<String> = fs::read_dir(m.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 14, "{names:?}");
    let sizes: u64 = names[2..]
        .iter()
        .map(|n| fs::metadata(m.path().join(n)).unwrap().len())
        .sum();
    let before = stats(&m);
    let read = |n: &String| {
        let (got, want) = (
            fs::read(m.path().join(n)).unwrap(),
            fs::read(local.path().join(n)).unwrap(),
        );
        assert!(got == want, "{n}: not the bytes of a local mount");
    };
    read(&names[0]);
    read(&names[1]);
    // The first step (the second dataset's open) has the 12 datasets after it decoded
    // ahead, one job each (each is smaller than a piece).
    assert!(
        wait_for(|| {
            let s = stats(&m);
            delta(&before, &s, "prefetch_jobs") == 12
                && delta(&before, &s, "prefetch_bytes") == sizes
        }),
        "{:?}",
        stats(&m)
    );
    // What the walk decoded is read without a decode.
    let misses = stats(&m)["cache_misses"];
    for n in &names[2..] {
        read(n);
    }
    assert!(
        wait_for(|| {
            let s = stats(&m);
            s["prefetch_walk_done"] == s["prefetch_walk_steps"]
        }),
        "{:?}",
        stats(&m)
    );
    // From the second dataset on, a step each; the later ones find the datasets decoded.
    let after = stats(&m);
    assert_eq!(
        delta(&before, &after, "prefetch_walk_steps"),
        13,
        "{after:?}"
    );
    assert_eq!(delta(&before, &after, "prefetch_jobs"), 12, "{after:?}");
    assert_eq!(delta(&before, &after, "prefetch_bytes"), sizes, "{after:?}");
    assert_eq!(after["cache_misses"], misses, "{after:?}");
}

#[test]
fn statistics_show_every_remote_counter() {
    let Some(ng) = Nginx::start(&remote_fixtures(), 0) else {
        return;
    };
    let m = counted(&ng.url("layout.h5"), &[]);
    let fx = Layout::load();
    assert_eq!(
        harness::sha256(&fs::read(m.at("/rand")).unwrap()),
        fx.sha256("/rand")
    );
    assert_eq!(
        fs::read_dir(m.at("/g")).unwrap().count(),
        fx.headers().len()
    );
    let keys = [
        "remote_heads",
        "remote_gets",
        "remote_bytes",
        "remote_failures",
        "remote_changed",
        "remote_lists",
        "remote_merged",
        "remote_readahead",
        "remote_sent",
        "remote_retries",
        "remote_p50_us",
        "remote_p99_us",
    ];
    let text =
        String::from_utf8(harness::getxattr(m.path(), harness::STATS_XATTR).unwrap()).unwrap();
    for k in keys {
        assert_eq!(
            text.lines()
                .filter(|l| l.split(' ').next() == Some(k))
                .count(),
            1,
            "{k} in {text}"
        );
    }
    // What was asked for was sent, and every request the server answered was counted
    // (fetches in the background may still be on their way: wait for them).
    let mut s = stats(&m);
    let mut logged = Vec::new();
    let settled = harness::wait_for(|| {
        s = stats(&m);
        logged = ng.logged();
        s["remote_sent"] >= s["remote_gets"] + s["remote_heads"]
            && logged.len() as u64 == s["remote_sent"]
    });
    assert!(settled, "{s:?} {logged:#?}");
    assert_eq!(s["remote_heads"], 1, "{s:?}");
    assert!(s["remote_gets"] > 1, "{s:?}");
    assert!(s["remote_bytes"] >= 1 << 20, "{s:?}");
    assert!(
        s["remote_p50_us"] > 0 && s["remote_p99_us"] >= s["remote_p50_us"],
        "{s:?}"
    );
    // A healthy server over HTTP: no failure, no retry, no listing.
    for k in [
        "remote_failures",
        "remote_changed",
        "remote_retries",
        "remote_lists",
    ] {
        assert_eq!(s[k], 0, "{k}: {s:?}");
    }
}
