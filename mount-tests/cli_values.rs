//! Option values through the real binary: every remote option's malformed values, as a flag
//! and as `-o name=value`, and for `inspect`, are refused before anything is sent, with
//! exit status 2, one line on stderr and no panic; and `inspect` reaches S3-compatible and
//! public objects with the mount's remote options.
//!
//! - `malformed_remote_values_are_one_line_and_status_2`: each option of [`CASES`] in each
//!   form, with a loopback listener as the endpoint (or in the malformed endpoint) that must
//!   see no connection.
//! - `malformed_sources_are_one_line_and_status_2`: bucket names, HTTP URLs without a host
//!   or path, with a query; for mounting and `inspect`.
//! - `credentials_in_urls_are_refused_and_never_shown`: `user:password@` in a SOURCE or an
//!   endpoint: refused, the URL shown with `***`, the password nowhere in the output.
//! - `the_environment_and_profiles_are_held_to_the_same_rules`: an endpoint or region from
//!   `AWS_*` variables or from a profile of `~/.aws/config`.
//! - `inspect_reaches_s3_compatible_and_public_objects`: on SeaweedFS, `inspect` with
//!   `--endpoint` (signed, and through `--profile`) and with `--no-sign-request` prints what
//!   `inspect` of the local copy prints.
//!
//! Every child runs with the caller's `AWS_*` variables removed, a temporary HOME, and the
//! instance-metadata endpoint pointed at a closed loopback port, so no lookup leaves
//! 127.0.0.0/8.

mod harness;
mod servers;

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use harness::data_dir;
use servers::Seaweed;

/// Longest a refused command may take: it sends nothing and waits for nothing.
const REFUSAL_BOUND: Duration = Duration::from_secs(60);

/// Malformed values of each remote option: (flag, `-o` name, values). `{port}` stands for
/// the port of a loopback listener that must see no connection.
const CASES: &[(&str, &str, &[&str])] = &[
    (
        "--endpoint",
        "endpoint",
        &[
            "127.0.0.1:{port}",
            "localhost",
            "",
            "ftp://127.0.0.1:{port}",
            "http://",
            "http://127.0.0.1:99999",
            "http://127.0.0.1:{port}/?x=1",
            "http://127.0.0.1:{port}/#f",
            "http://127.0.0.1:{port}\n",
            " http://127.0.0.1:{port}",
            "http://127.0.0.1:{port}/a b",
        ],
    ),
    (
        "--region",
        "region",
        &[
            "",
            "US-EAST-1",
            "us east 1",
            "a/b",
            "-x",
            "us-east-1\n",
            LONG_REGION,
        ],
    ),
    (
        "--profile",
        "profile",
        &["", "a/b", "lab\n", " lab", "lab\u{7f}", LONG_PROFILE],
    ),
    (
        "--request-timeout",
        "request_timeout",
        &["0", "-1", "NaN", "inf", "3601", "1e400", "0.01", "x", ""],
    ),
    (
        "--retry-timeout",
        "retry_timeout",
        &["0", "-1", "NaN", "inf", "3601", "1e400", "0.01", "x", ""],
    ),
    (
        "--list-max-keys",
        "list_max_keys",
        &[
            "0",
            "-1",
            "1.5",
            "10000001",
            "99999999999999999999999",
            "x",
            "",
        ],
    ),
    (
        "--merge-gap",
        "merge_gap",
        &[
            "-1",
            "1.5M",
            "65M",
            "1T",
            "99999999999999999999999",
            "x",
            "8Q",
            "",
        ],
    ),
];

const LONG_REGION: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const LONG_PROFILE: &str = "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp\
    ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp";

/// What a finished child printed.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// The binary with a clean environment: no `AWS_*` of the caller, HOME at `home`, the
/// metadata endpoint closed, backtraces on (so a panic cannot hide).
fn h5mount(home: &Path) -> Command {
    let mut c = harness::isolated(home);
    c.env("RUST_BACKTRACE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// [`h5mount`] with static credentials in the environment (fake ones: the endpoint is a
/// loopback listener), so that a request would be signed at once, with no credential
/// lookup first: where an endpoint without a scheme made the S3 client panic.
fn signed(home: &Path) -> Command {
    let mut c = h5mount(home);
    c.env("AWS_ACCESS_KEY_ID", "AKIDFAKE")
        .env("AWS_SECRET_ACCESS_KEY", "fake-secret");
    c
}

/// Run `c` to completion within `bound` (killed past it: a failure).
fn finish(mut c: Command, bound: Duration) -> Outcome {
    let mut child = c.spawn().expect("run h5mount");
    let pipe = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = pipe(Box::new(child.stdout.take().unwrap()));
    let err = pipe(Box::new(child.stderr.take().unwrap()));
    let Some(status) = harness::wait_child(&mut child, bound) else {
        panic!("{c:?} still running after {bound:?}");
    };
    Outcome {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Assert `o` is a refusal: status 2, one line on stderr beginning `h5mount: `, holding
/// every one of `words`, nothing on stdout, no panic.
fn assert_refused(o: &Outcome, what: &str, words: &[&str]) {
    let ctx = format!("{what}: status {:?}, stderr {:?}", o.code, o.stderr);
    assert!(!o.stderr.contains("panicked"), "{ctx}");
    assert_eq!(o.code, Some(2), "{ctx}");
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{ctx}");
    assert!(lines[0].starts_with("h5mount: "), "{ctx}");
    for w in words {
        assert!(lines[0].contains(w), "{ctx}: no {w:?}");
    }
    assert!(o.stdout.is_empty(), "{ctx}: stdout {:?}", o.stdout);
}

/// A listener on loopback that must not be connected to.
struct Untouched(TcpListener);

impl Untouched {
    fn new() -> Untouched {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        Untouched(l)
    }

    fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }

    /// Panic if anything connected (the kernel queues connections until accepted).
    fn assert_untouched(&self, what: &str) {
        match self.0.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("{what}: a connection reached the endpoint: {other:?}"),
        }
    }
}

/// Every malformed value of every remote option, as a flag and as `-o name=value` of a
/// mount, and as a flag of `inspect`.
#[test]
fn malformed_remote_values_are_one_line_and_status_2() {
    let home = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let ear = Untouched::new();
    let url = "s3://data/k.h5";
    let mut runs = 0;
    for (flag, name, values) in CASES {
        for raw in *values {
            let v = raw.replace("{port}", &ear.port().to_string());
            // The endpoint, unless it is what is tested: the listener.
            let endpoint: Vec<String> = match *name {
                "endpoint" => vec![],
                _ => vec!["--endpoint".into(), ear.endpoint()],
            };
            let mut forms: Vec<(String, Command)> = Vec::new();
            // `--flag value`, or `--flag=value` for a value clap would take for a flag.
            let flagged: Vec<String> = match v.starts_with('-') {
                true => vec![format!("{flag}={v}")],
                false => vec![flag.to_string(), v.clone()],
            };
            let mut c = signed(home.path());
            c.arg(url).arg(mnt.path()).args(&endpoint).args(&flagged);
            forms.push((format!("mount {flag} {v:?}"), c));
            // A value holding a comma cannot be an -o value; none of CASES does.
            let mut c = signed(home.path());
            c.arg(url)
                .arg(mnt.path())
                .args(&endpoint)
                .arg("-o")
                .arg(format!("ro,{name}={v}"));
            forms.push((format!("mount -o {name}={v:?}"), c));
            let mut c = signed(home.path());
            c.arg("inspect").args(&endpoint).args(&flagged).arg(url);
            forms.push((format!("inspect {flag} {v:?}"), c));
            for (what, c) in forms {
                let o = finish(c, REFUSAL_BOUND);
                let named = if what.contains(" -o ") {
                    format!("-o {name}=")
                } else {
                    format!("{flag} ")
                };
                assert_refused(&o, &what, &[&named]);
                runs += 1;
            }
            ear.assert_untouched(&format!("{flag} {v:?}"));
        }
    }
    // Flags of h5mount's own take no value in -o form.
    for name in [
        "no_sign_request",
        "virtual_hosted",
        "allow_redirects",
        "no_warm_up",
    ] {
        let mut c = signed(home.path());
        c.arg(url)
            .arg(mnt.path())
            .args(["--endpoint", &ear.endpoint(), "-o"])
            .arg(format!("{name}=yes"));
        assert_refused(&finish(c, REFUSAL_BOUND), name, &[name, "no value"]);
    }
    // The bounded non-remote sizes and counts, likewise.
    for (flag, name, v) in [
        ("--cache-size", "cache_size", "17T"),
        ("--cache-size", "cache_size", "99999999999T"),
        ("--threads", "threads", "0"),
        ("--threads", "threads", "65"),
        ("--max-open-files", "max_open_files", "1"),
        ("--readahead", "readahead", "65537"),
    ] {
        let mut c = signed(home.path());
        c.arg(url)
            .arg(mnt.path())
            .args(["--endpoint", &ear.endpoint(), flag, v]);
        assert_refused(&finish(c, REFUSAL_BOUND), flag, &[flag]);
        let mut c = signed(home.path());
        c.arg(url)
            .arg(mnt.path())
            .args(["--endpoint", &ear.endpoint(), "-o"])
            .arg(format!("{name}={v}"));
        assert_refused(&finish(c, REFUSAL_BOUND), name, &[name]);
    }
    ear.assert_untouched("sizes and counts");
    assert!(!harness::is_mounted(mnt.path()));
    eprintln!("{runs} refusals checked");
}

/// SOURCE URLs that cannot name an object: for mounting and for `inspect`.
#[test]
fn malformed_sources_are_one_line_and_status_2() {
    let home = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let ear = Untouched::new();
    let port = ear.port();
    let sources = [
        "s3://ab/k.h5".to_string(),
        "s3://Data/k.h5".into(),
        "s3://-data/k.h5".into(),
        "s3://data-/k.h5".into(),
        "s3://a..b/k.h5".into(),
        "s3://da ta/k.h5".into(),
        format!("s3://{}/k.h5", "b".repeat(64)),
        "s3:///k.h5".into(),
        "http://".into(),
        "https:///f.h5".into(),
        "http://127.0.0.1:99999/f.h5".into(),
        format!("http://127.0.0.1:{port}"),
        format!("http://127.0.0.1:{port}/"),
        format!("http://127.0.0.1:{port}/f.h5?x=1"),
        format!("http://127.0.0.1:{port}/f.h5#g"),
        format!("http://127.0.0.1:{port}/f\n.h5"),
        format!("http://127.0.0.1:{port}\\x/f.h5"),
    ];
    for src in &sources {
        let mut c = h5mount(home.path());
        c.arg(src)
            .arg(mnt.path())
            .args(["--endpoint", &ear.endpoint()]);
        // The refusal quotes the source: the check of values, not a failure to open it.
        assert_refused(
            &finish(c, REFUSAL_BOUND),
            &format!("mount {src:?}"),
            &["h5mount: \""],
        );
        let mut c = h5mount(home.path());
        c.args(["inspect", "--endpoint", &ear.endpoint()]).arg(src);
        assert_refused(
            &finish(c, REFUSAL_BOUND),
            &format!("inspect {src:?}"),
            &["h5mount: \""],
        );
    }
    // A bucket name with '_' is a path-style name only.
    let mut c = h5mount(home.path());
    c.args(["inspect", "--endpoint", &ear.endpoint(), "--virtual-hosted"])
        .arg("s3://old_bucket/k.h5");
    assert_refused(&finish(c, REFUSAL_BOUND), "virtual-hosted '_'", &["'_'"]);
    ear.assert_untouched("sources");
}

/// `user:password@` in a SOURCE or an endpoint: refused, with `***` in its place.
#[test]
fn credentials_in_urls_are_refused_and_never_shown() {
    let home = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let ear = Untouched::new();
    let port = ear.port();
    let secret = "pw-s3cret";
    let sources = [
        format!("http://user:{secret}@127.0.0.1:{port}/f.h5"),
        format!("https://user:{secret}@127.0.0.1:{port}/d/f.h5"),
        format!("http://{secret}@127.0.0.1:{port}/f.h5"),
        format!("http://user:{secret}/x@127.0.0.1:{port}/f.h5"),
    ];
    let check = |o: &Outcome, what: &str| {
        assert_refused(o, what, &["credentials", "***@"]);
        assert!(!o.stderr.contains(secret), "{what}: {}", o.stderr);
    };
    for src in &sources {
        let mut c = h5mount(home.path());
        c.arg(src).arg(mnt.path());
        check(&finish(c, REFUSAL_BOUND), &format!("mount {src}"));
        // In the foreground too (no background parent in between).
        let mut c = h5mount(home.path());
        c.arg("-f").arg(src).arg(mnt.path());
        check(&finish(c, REFUSAL_BOUND), &format!("mount -f {src}"));
        let mut c = h5mount(home.path());
        c.arg("inspect").arg(src);
        check(&finish(c, REFUSAL_BOUND), &format!("inspect {src}"));
    }
    let endpoint = format!("http://key:{secret}@127.0.0.1:{port}");
    let mut c = h5mount(home.path());
    c.args([
        "s3://data/k.h5",
        mnt.path().to_str().unwrap(),
        "--endpoint",
        &endpoint,
    ]);
    check(&finish(c, REFUSAL_BOUND), "--endpoint with credentials");
    let mut c = h5mount(home.path());
    c.args(["s3://data/k.h5", mnt.path().to_str().unwrap(), "-o"])
        .arg(format!("endpoint={endpoint}"));
    check(&finish(c, REFUSAL_BOUND), "-o endpoint= with credentials");
    ear.assert_untouched("credentials");
}

/// The endpoint and region the S3 client would take from the environment or a profile.
#[test]
fn the_environment_and_profiles_are_held_to_the_same_rules() {
    let home = tempfile::tempdir().unwrap();
    let mnt = tempfile::tempdir().unwrap();
    let ear = Untouched::new();
    let port = ear.port();
    let url = "s3://data/k.h5";
    for (var, v) in [
        ("AWS_ENDPOINT", format!("127.0.0.1:{port}")),
        ("AWS_ENDPOINT_URL", format!("127.0.0.1:{port}")),
        ("AWS_ENDPOINT_URL_S3", format!("127.0.0.1:{port}")),
        ("AWS_REGION", "Mars 1".to_string()),
        ("AWS_DEFAULT_REGION", "a/b".to_string()),
    ] {
        let mut c = h5mount(home.path());
        c.arg(url).arg(mnt.path()).env(var, &v);
        assert_refused(&finish(c, REFUSAL_BOUND), var, &[var]);
        let mut c = h5mount(home.path());
        c.args(["inspect", url]).env(var, &v);
        assert_refused(&finish(c, REFUSAL_BOUND), var, &[var]);
    }
    let aws = home.path().join(".aws");
    std::fs::create_dir(&aws).unwrap();
    std::fs::write(
        aws.join("config"),
        format!(
            "[profile badend]\nendpoint_url = 127.0.0.1:{port}\n\
             [profile badregion]\nregion = Mars 1\nendpoint_url = http://127.0.0.1:{port}\n"
        ),
    )
    .unwrap();
    for (profile, key) in [("badend", "endpoint_url"), ("badregion", "region")] {
        for fg in [true, false] {
            let mut c = h5mount(home.path());
            if fg {
                c.arg("-f");
            }
            c.args([url, mnt.path().to_str().unwrap(), "--profile", profile]);
            assert_refused(&finish(c, REFUSAL_BOUND), profile, &[profile, key]);
        }
        let mut c = h5mount(home.path());
        c.args(["inspect", "--profile", profile, url]);
        assert_refused(&finish(c, REFUSAL_BOUND), profile, &[profile, key]);
    }
    ear.assert_untouched("environment and profiles");
    assert!(!harness::is_mounted(mnt.path()));
}

/// `inspect` of an object on SeaweedFS, signed (credentials from the environment, then from
/// a profile) and anonymous, prints what `inspect` of the local copy prints.
#[test]
fn inspect_reaches_s3_compatible_and_public_objects() {
    let Some(sw) = Seaweed::start_public_only(&["open"]) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let name = "layouts_latest.h5";
    let local = data_dir().join(name);
    let bytes = std::fs::read(&local).unwrap();
    for bucket in ["open", "private"] {
        sw.create_bucket(bucket);
        sw.put_object(bucket, &format!("runs/{name}"), &bytes);
    }
    let bound = Duration::from_secs(120);
    let mut c = h5mount(home.path());
    c.arg("inspect").arg(&local);
    let want = finish(c, bound);
    assert_eq!(want.code, Some(0), "{}", want.stderr);
    assert!(want.stdout.lines().count() > 5, "{}", want.stdout);
    let endpoint = sw.endpoint();
    let same = |o: Outcome, what: &str| {
        assert_eq!(o.code, Some(0), "{what}: {}", o.stderr);
        assert_eq!(o.stdout, want.stdout, "{what}");
    };
    // Signed, with credentials from the environment.
    let private = format!("s3://private/runs/{name}");
    let mut c = h5mount(home.path());
    c.args([
        "inspect",
        "--endpoint",
        &endpoint,
        "--region",
        sw.region(),
        &private,
    ])
    .env("AWS_ACCESS_KEY_ID", sw.access_key())
    .env("AWS_SECRET_ACCESS_KEY", sw.secret_key());
    same(finish(c, bound), "signed");
    // Signed, with credentials, region and endpoint from a profile.
    let aws = home.path().join(".aws");
    std::fs::create_dir(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        format!(
            "[lab]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
            sw.access_key(),
            sw.secret_key()
        ),
    )
    .unwrap();
    std::fs::write(
        aws.join("config"),
        format!(
            "[profile lab]\nregion = {}\nendpoint_url = {endpoint}\n",
            sw.region()
        ),
    )
    .unwrap();
    let mut c = h5mount(home.path());
    c.args(["inspect", "--profile", "lab", &private]);
    same(finish(c, bound), "--profile");
    // Anonymous: the public bucket reads; without --no-sign-request there are no
    // credentials to sign with, and the private bucket refuses unsigned requests.
    let open = format!("s3://open/runs/{name}");
    let anonymous = |extra: &[&str], url: &str| {
        let mut c = h5mount(home.path());
        c.args(["inspect", "--endpoint", &endpoint, "--region", sw.region()])
            .args(["--request-timeout", "2", "--retry-timeout", "2"])
            .args(extra)
            .arg(url);
        finish(c, bound)
    };
    same(
        anonymous(&["--no-sign-request"], &open),
        "--no-sign-request",
    );
    for (extra, url) in [(&[][..], &open), (&["--no-sign-request"][..], &private)] {
        let o = anonymous(extra, url);
        assert_eq!(o.code, Some(2), "{extra:?} {url}: {}", o.stderr);
        assert!(
            o.stdout.is_empty() && !o.stderr.contains("panicked"),
            "{}",
            o.stderr
        );
    }
}
