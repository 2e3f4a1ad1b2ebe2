//! Prefix mounts (`h5mount s3://bucket/prefix/ MNT`) against a real SeaweedFS on 127.0.0.1:
//! the whole fixture corpus uploaded below a prefix shows the same tree, sizes and bytes as
//! the directory mount of the corpus on disk (external links, VDS sources and external raw
//! files between the objects included); sub-prefixes are directories; objects outside the
//! prefix never appear; an object named like HDF5 that is not fails its own directory only;
//! listing costs one LIST per directory and opening a dataset of a listed file a few GETs
//! and no HEAD.
//!
//! SeaweedFS is installed by `mount-tests/install-servers` (run by `mount-tests/run`);
//! without it these tests say so and pass, unless `H5MOUNT_REQUIRE_SERVERS` is set.

mod harness;
mod servers;

use std::fs;
use std::path::Path;

use harness::{data_dir, stats, walk, Mount};
use servers::Seaweed;

fn mount_prefix(sw: &Seaweed, url: &str) -> Mount {
    let endpoint = sw.endpoint();
    let url = url.to_string();
    Mount::by_command(move |mp| harness::anonymous_s3(&url, mp, &endpoint))
}

#[test]
fn a_prefix_is_the_directory_mount_of_its_objects() {
    let Some(sw) = Seaweed::start() else {
        return;
    };
    sw.create_bucket("data");
    let mut names: Vec<String> = fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() > 50, "corpus");
    for n in &names {
        let bytes = fs::read(data_dir().join(n)).unwrap();
        sw.put_object("data", &format!("runs/corpus/{n}"), &bytes);
    }
    // Beside the corpus: a sub-prefix, a plain object, one named like HDF5 that is not,
    // and an object outside the mounted prefix.
    let sample = fs::read(data_dir().join(&names[0])).unwrap();
    sw.put_object("data", "runs/deeper/more/again.h5", &sample);
    sw.put_object("data", "runs/notes.txt", b"beamtime notes\n");
    sw.put_object("data", "runs/fake.h5", b"just text");
    sw.put_object("data", "elsewhere/secret.h5", &sample);

    let m = mount_prefix(&sw, "s3://data/runs/");
    let mut top: Vec<String> = fs::read_dir(m.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["corpus", "deeper", "fake.h5", "notes.txt"]);
    let s = stats(&m);
    assert_eq!(
        s["remote_lists"], 1,
        "the mount's LIST serves the first ls: {s:?}"
    );
    assert_eq!(
        fs::read(m.path().join("notes.txt")).unwrap(),
        b"beamtime notes\n"
    );
    // At the directory's open, or at its first read where the kernel opens directories
    // without asking.
    let e = fs::read_dir(m.path().join("fake.h5"))
        .and_then(|d| d.collect::<Result<Vec<_>, _>>())
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert!(m.path().join("deeper/more/again.h5").is_dir());
    assert!(!m.path().join("secret.h5").exists());

    let s = stats(&m);
    assert_eq!(
        s["remote_heads"], 0,
        "listed objects open without a HEAD: {s:?}"
    );
    drop(m);

    // The corpus as a prefix is the corpus on disk mounted as a directory: external links,
    // VDS sources and external raw files reach the objects beside them (symlink texts
    // included, relative to the mount's root).
    let m = mount_prefix(&sw, "s3://data/runs/corpus/");
    let local = Mount::background(&data_dir(), &[]);
    let (want, got) = (walk(local.path()), walk(m.path()));
    let differ: Vec<String> = want
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k}: local {v}, prefix {:?}", got.get(k)))
        .chain(
            got.keys()
                .filter(|k| !want.contains_key(*k))
                .map(|k| format!("{k}: only in the prefix")),
        )
        .collect();
    assert!(differ.is_empty(), "{differ:#?}");
}

#[test]
fn listing_is_one_list_and_a_dataset_a_few_gets() {
    let Some(sw) = Seaweed::start() else {
        return;
    };
    sw.create_bucket("many");
    let sample = fs::read(data_dir().join("chunked_many_latest.h5")).unwrap();
    // More objects than one LIST page holds (1,000 keys).
    let n = 1100;
    for i in 0..n {
        sw.put_object("many", &format!("p/f{i:04}.h5"), &sample);
    }
    let m = mount_prefix(&sw, "s3://many/p/");
    let before = stats(&m);
    let count = fs::read_dir(m.path()).unwrap().count();
    assert_eq!(count, n);
    for e in fs::read_dir(m.path()).unwrap() {
        e.unwrap().metadata().unwrap();
    }
    let after = stats(&m);
    assert_eq!(
        after["remote_lists"], 2,
        "two pages of keys, listed once at mount: {after:?}"
    );
    assert_eq!(
        after["remote_gets"], before["remote_gets"],
        "ls -l reads no object"
    );
    // One file's dataset: its first GET (1 MiB holds this small file), no HEAD.
    let file = m.path().join("f0042.h5");
    let local = Mount::background(&data_dir().join("chunked_many_latest.h5"), &[]);
    let want = walk(local.path());
    let got = walk(&file);
    assert_eq!(got, want);
    let s = stats(&m);
    assert!(
        s["remote_gets"] - after["remote_gets"] <= 3 && s["remote_heads"] == 0,
        "{s:?}"
    );
}

#[test]
fn a_missing_bucket_is_one_line_and_status_2() {
    let Some(sw) = Seaweed::start() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(harness::BIN)
        .arg("s3://no-such-bucket/p/")
        .arg(tmp.path())
        .args([
            "-o",
            &format!(
                "endpoint={},no_sign_request,region=us-east-1",
                sw.endpoint()
            ),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("s3://no-such-bucket/p/"), "{err}");
    assert!(harness::mount_line(tmp.path()).is_none());
}

#[test]
fn inspect_of_a_url_lists_what_inspect_of_the_file_lists() {
    let Some(ng) = servers::Nginx::start(&data_dir(), 0) else {
        return;
    };
    for name in ["chunked_many_latest.h5", "links_earliest.h5"] {
        let run = |what: &str| {
            let out = std::process::Command::new(harness::BIN)
                .args(["inspect", what])
                .output()
                .unwrap();
            assert!(out.status.success(), "{what}: {out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        // The same lines, but for why a missing file is not followed (a path, or a URL).
        let missing = |out: &str| -> String {
            out.lines()
                .filter(|l| !l.contains("no_such_file.h5::"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let local = run(data_dir().join(name).to_str().unwrap());
        let remote = run(&ng.url(name));
        assert!(local.lines().count() > 3, "{local}");
        assert_eq!(missing(&remote), missing(&local), "{name}");
        for line in remote.lines().filter(|l| l.contains("no_such_file.h5::")) {
            assert!(line.contains("not found"), "{line}");
        }
    }
}

#[test]
fn with_refresh_a_replaced_object_is_served_afresh() {
    let tmp = tempfile::tempdir().unwrap();
    let served = tmp.path().join("f.h5");
    let old = data_dir().join("links_latest.h5");
    fs::copy(&old, &served).unwrap();
    // The next version of the file: the same structure, other values in /typed.
    let typed = {
        let a = Mount::background(&old, &[]);
        fs::read(a.path().join("typed")).unwrap()
    };
    let mut bytes = fs::read(&old).unwrap();
    let at = bytes
        .windows(typed.len())
        .position(|w| w == typed.as_slice())
        .expect("the data of /typed in the file");
    for b in &mut bytes[at..at + typed.len()] {
        *b ^= 0x5a;
    }
    let next = tmp.path().join("next.h5");
    fs::write(&next, &bytes).unwrap();
    // nginx's ETag is the file's mtime (in seconds) and size: make the new one differ.
    let later =
        fs::metadata(&served).unwrap().modified().unwrap() + std::time::Duration::from_secs(10);
    fs::File::options()
        .write(true)
        .open(&next)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let want_new = {
        let b = Mount::background(&next, &[]);
        fs::read(b.path().join("typed")).unwrap()
    };
    assert_ne!(want_new, typed);
    let Some(ng) = servers::Nginx::start(tmp.path(), 0) else {
        return;
    };
    let m = Mount::background(Path::new(&ng.url("f.h5")), &["--refresh", "1"]);
    assert_eq!(fs::read(m.path().join("typed")).unwrap(), typed);
    // Replace the object (a new ETag): within a generous bound, the mount serves the new one.
    fs::rename(&next, &served).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        // A read may fail once with the old view's ETag (412) while the refresh is pending.
        if fs::read(m.path().join("typed")).ok().as_ref() == Some(&want_new) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the replaced object was not served within 60 s: {:?}",
            stats(&m)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(stats(&m)["refreshes"] >= 1);
}

#[test]
fn a_file_with_its_own_pages_is_fetched_in_whole_pages() {
    let dir = harness::fixture("paged");
    let Some(ng) = servers::Nginx::start(&dir, 0) else {
        return;
    };
    let m = Mount::background(Path::new(&ng.url("paged.h5")), &[]);
    // Metadata only: every entry's attributes and extended attributes.
    let mut entries = 0;
    let mut todo = vec![m.path().to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let md = fs::symlink_metadata(&p).unwrap();
            for name in harness::listxattr(&p).unwrap() {
                harness::getxattr(&p, &name).unwrap();
            }
            entries += 1;
            if md.is_dir() {
                todo.push(p);
            }
        }
    }
    assert_eq!(entries, 6 + 6 * 8);
    // The file keeps its metadata in 256 KiB pages: each GET takes whole pages of it.
    const FILE_PAGE: u64 = 256 << 10;
    let len = fs::metadata(dir.join("paged.h5")).unwrap().len();
    // Every range of every GET, but the warm-up's of single bytes (which asks whether the
    // server answers GETs of several ranges).
    let gets: Vec<(u64, u64)> = ng
        .logged()
        .iter()
        .filter(|l| l.method == "GET")
        .filter(|l| !(l.ranges.len() > 1 && l.ranges.iter().all(|(a, b)| a == b)))
        .flat_map(|l| l.ranges.clone())
        .collect();
    assert!(gets.len() > 1, "{gets:?}");
    for &(a, b) in &gets {
        assert!(
            a % FILE_PAGE == 0 && ((b + 1) % FILE_PAGE == 0 || b + 1 == len),
            "GET bytes {a}-{b} is not whole pages of the file: {gets:?}"
        );
    }
    // And the bytes are right.
    let local = Mount::background(&dir.join("paged.h5"), &[]);
    assert_eq!(walk(m.path()), walk(local.path()));
}

#[test]
fn a_private_bucket_needs_credentials_which_a_profile_gives() {
    let Some(sw) = Seaweed::start_public_only(&["open"]) else {
        return;
    };
    sw.create_bucket("private");
    let name = "chunked_many_latest.h5";
    let bytes = fs::read(data_dir().join(name)).unwrap();
    sw.put_object("private", &format!("p/{name}"), &bytes);
    let endpoint = sw.endpoint();
    // Anonymous: a clear one-line error and status 2, for an object and for a prefix.
    for url in [
        format!("s3://private/p/{name}"),
        "s3://private/p/".to_string(),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let out = harness::anonymous_s3(&url, tmp.path(), &endpoint)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("access denied") && err.contains("s3://private/p/"),
            "{err}"
        );
        assert!(harness::mount_line(tmp.path()).is_none());
    }
    // A named profile in a credentials file gives the keys (never the command line).
    let home = tempfile::tempdir().unwrap();
    let creds = home.path().join("credentials");
    fs::write(
        &creds,
        format!(
            "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n\
             [lab]\naws_access_key_id = {}\naws_secret_access_key = {}\nregion = {}\n",
            sw.access_key(),
            sw.secret_key(),
            sw.region()
        ),
    )
    .unwrap();
    let config = home.path().join("config");
    fs::write(&config, "").unwrap();
    let url = format!("s3://private/p/{name}");
    let m = Mount::by_command(|mp| {
        let mut c = std::process::Command::new(harness::BIN);
        c.arg(&url)
            .arg(mp)
            .args(["--endpoint", &endpoint, "--profile", "lab"])
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env("AWS_SHARED_CREDENTIALS_FILE", &creds)
            .env("AWS_CONFIG_FILE", &config);
        c
    });
    let local = Mount::background(&data_dir().join(name), &[]);
    assert_eq!(walk(m.path()), walk(local.path()));
    let line = harness::mount_line(m.path()).unwrap();
    assert!(!line.contains(sw.secret_key()), "{line}");
}
