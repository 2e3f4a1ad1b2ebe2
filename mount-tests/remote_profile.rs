//! `--profile` with a `credential_process` profile and with a role profile, through real
//! mounts of a private bucket on a real SeaweedFS on 127.0.0.1:
//! - `a_credential_process_profile_reads_a_private_bucket`: the helper's keys (with an
//!   expiration an hour ahead; no session token, which SeaweedFS's static identities refuse:
//!   the unit tests of `src/io/aws_credentials.rs` follow the token) sign every request:
//!   the mount shows the same tree and bytes as the file mounted from disk, and the helper
//!   ran once for all of them.
//! - `a_credential_process_that_fails_or_lies_is_one_line_and_status_2`: a helper that
//!   exits 1, one that prints no JSON, and one that gives wrong keys: status 2, one line
//!   naming the profile (or the object), no secret.
//! - `a_role_profile_reads_a_private_bucket_through_sts`: a profile with `role_arn` and a
//!   `source_profile` of static keys, its STS endpoint a fake STS on 127.0.0.1 that answers
//!   AssumeRole with the bucket's keys: the mount reads the same bytes, after one AssumeRole
//!   signed with the source profile's key for `sts`; a refused AssumeRole (403) is one
//!   line and status 2.
//!
//! Each mount runs with a temporary HOME holding the two AWS files, every AWS_* variable of
//! the caller removed, and the instance metadata service turned off and pointed at a closed
//! loopback port, so that no credential lookup leaves 127.0.0.0/8.
//!
//! SeaweedFS is installed by `mount-tests/install-servers` (run by `mount-tests/run`);
//! without it these tests say so and pass, unless `H5MOUNT_REQUIRE_SERVERS` is set.

#[path = "../src/io/aws_sts_fake.rs"]
#[allow(dead_code)]
mod aws_sts_fake;
mod harness;
mod servers;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use aws_sts_fake::FakeSts;
use harness::{data_dir, walk, Mount};
use servers::Seaweed;

const NAME: &str = "chunked_many_latest.h5";
/// Text that stands for a secret a helper prints: never in a message.
const SECRET: &str = "FwoGZXIvYXdzEXAMPLE-secret";

/// SeaweedFS with a private bucket holding the fixture, and its object's URL.
fn private_object() -> Option<(Seaweed, String)> {
    let sw = Seaweed::start_public_only(&["open"])?;
    sw.create_bucket("private");
    let bytes = fs::read(data_dir().join(NAME)).unwrap();
    sw.put_object("private", &format!("p/{NAME}"), &bytes);
    Some((sw, format!("s3://private/p/{NAME}")))
}

/// A temporary HOME with the two AWS files in `~/.aws`.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn with_files(config: &str, credentials: &str) -> Home {
        let dir = tempfile::tempdir().unwrap();
        let aws = dir.path().join(".aws");
        fs::create_dir(&aws).unwrap();
        fs::write(aws.join("config"), config).unwrap();
        fs::write(aws.join("credentials"), credentials).unwrap();
        Home { dir }
    }

    /// Profile `p` runs the shell script `body` as its `credential_process` (counting its
    /// runs in `runs`).
    fn new(body: &str) -> Home {
        let dir = tempfile::tempdir().unwrap();
        let aws = dir.path().join(".aws");
        fs::create_dir(&aws).unwrap();
        let helper = dir.path().join("get creds");
        fs::write(
            &helper,
            format!(
                "#!/bin/sh\nn=$(($(cat \"$HOME/runs\" 2>/dev/null || echo 0) + 1))\n\
                 echo $n > \"$HOME/runs\"\n{body}\n"
            ),
        )
        .unwrap();
        fs::set_permissions(&helper, fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(
            aws.join("config"),
            format!(
                "[default]\nregion = eu-west-1\n\n[profile p]\nregion = {}\n\
                 credential_process = \"{}\" --json\n",
                servers::S3_REGION,
                helper.display()
            ),
        )
        .unwrap();
        // A default profile with keys of its own, which must not be used.
        fs::write(
            aws.join("credentials"),
            "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n",
        )
        .unwrap();
        Home { dir }
    }

    fn runs(&self) -> u32 {
        fs::read_to_string(self.dir.path().join("runs")).map_or(0, |s| s.trim().parse().unwrap())
    }

    /// `h5mount URL MOUNTPOINT --endpoint E --profile p`, in this HOME only.
    fn command(&self, url: &str, mountpoint: &Path, endpoint: &str) -> Command {
        let mut c = harness::isolated(self.dir.path());
        c.arg(url)
            .arg(mountpoint)
            .args(["--endpoint", endpoint, "--profile", "p"]);
        let aws = self.dir.path().join(".aws");
        c.env("AWS_CONFIG_FILE", aws.join("config"))
            .env("AWS_SHARED_CREDENTIALS_FILE", aws.join("credentials"));
        c
    }
}

/// A helper body printing these keys, expiring in an hour.
fn prints_keys(key_id: &str, secret: &str) -> String {
    format!(
        "printf '{{\"Version\": 1, \"AccessKeyId\": \"%s\", \"SecretAccessKey\": \"%s\", \
         \"Expiration\": \"%s\"}}' '{key_id}' '{secret}' \
         \"$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)\""
    )
}

#[test]
fn a_credential_process_profile_reads_a_private_bucket() {
    let Some((sw, url)) = private_object() else {
        return;
    };
    let home = Home::new(&prints_keys(sw.access_key(), sw.secret_key()));
    let endpoint = sw.endpoint();
    let m = Mount::by_command(|mp| home.command(&url, mp, &endpoint));
    let local = Mount::background(&data_dir().join(NAME), &[]);
    let want = walk(local.path());
    assert!(want.len() > 3, "{want:?}");
    assert_eq!(walk(m.path()), want);
    // Every request (the mount's HEAD and GETs, the walk's) signed with one run's keys.
    assert_eq!(home.runs(), 1);
    let line = harness::mount_line(m.path()).unwrap();
    assert!(!line.contains(sw.secret_key()), "{line}");
}

#[test]
fn a_credential_process_that_fails_or_lies_is_one_line_and_status_2() {
    let Some((sw, url)) = private_object() else {
        return;
    };
    let endpoint = sw.endpoint();
    let cases = [
        (
            format!("echo 'cannot reach the vault {SECRET}' >&2; exit 1"),
            "profile p: credential_process failed: exited with status 1",
        ),
        (
            format!("echo 'AccessKeyId={SECRET}'"),
            "profile p: credential_process failed: its output is not a JSON object",
        ),
        (prints_keys("wrong", SECRET), "access denied"),
    ];
    for (body, want) in cases {
        let home = Home::new(&body);
        let tmp = tempfile::tempdir().unwrap();
        let out = home.command(&url, tmp.path(), &endpoint).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want) && err.contains(&url), "{err}");
        assert!(!err.contains(SECRET), "{err}");
        assert!(home.runs() >= 1);
        assert!(!harness::is_mounted(tmp.path()));
    }
}

/// A home whose profile `p` assumes a role through `sts` with the keys of profile `base`.
fn role_home(sts: &FakeSts) -> Home {
    Home::with_files(
        &format!(
            "[profile p]\nregion = {}\nrole_arn = arn:aws:iam::123456789012:role/reader\n\
             source_profile = base\nsts =\n  endpoint_url = {}\n",
            servers::S3_REGION,
            sts.url
        ),
        &format!("[base]\naws_access_key_id = AKIDSOURCE\naws_secret_access_key = {SECRET}\n"),
    )
}

#[test]
fn a_role_profile_reads_a_private_bucket_through_sts() {
    let Some((sw, url)) = private_object() else {
        return;
    };
    // SeaweedFS's static identities refuse session tokens: the assumed role's credentials
    // come without one.
    let answer = format!(
        "<AssumeRoleResponse><AssumeRoleResult><Credentials>\
             <AccessKeyId>{}</AccessKeyId><SecretAccessKey>{}</SecretAccessKey>\
             <Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>\
             </AssumeRoleResult></AssumeRoleResponse>",
        sw.access_key(),
        sw.secret_key()
    );
    let sts = FakeSts::start(move |_| (200, vec![], answer.clone()));
    let home = role_home(&sts);
    let endpoint = sw.endpoint();
    let m = Mount::by_command(|mp| home.command(&url, mp, &endpoint));
    let local = Mount::background(&data_dir().join(NAME), &[]);
    assert_eq!(walk(m.path()), walk(local.path()));
    let requests = sts.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let r = &requests[0];
    // Signed with the source profile's keys (the signature checked, not only its text).
    assert_eq!(r.signed_by(SECRET).as_deref(), Some("AKIDSOURCE"), "{r:?}");
    let auth = r.header("authorization").unwrap_or_default();
    assert!(
        auth.contains(&format!("/{}/sts/aws4_request", servers::S3_REGION)),
        "{auth}"
    );
    assert!(!auth.contains(SECRET), "{auth}");
    assert_eq!(r.form("Action").as_deref(), Some("AssumeRole"));
    assert_eq!(
        r.form("RoleArn").as_deref(),
        Some("arn:aws:iam::123456789012:role/reader")
    );
}

#[test]
fn a_refused_role_is_one_line_and_status_2() {
    let Some((sw, url)) = private_object() else {
        return;
    };
    let sts = FakeSts::start(|_| {
        (
            403,
            vec![],
            "<ErrorResponse><Error><Code>AccessDenied</Code><Message>not allowed</Message>\
             </Error></ErrorResponse>"
                .into(),
        )
    });
    let home = role_home(&sts);
    let tmp = tempfile::tempdir().unwrap();
    let out = home
        .command(&url, tmp.path(), &sw.endpoint())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "profile p: AssumeRole failed: STS answered status 403: AccessDenied: not allowed"
        ),
        "{err}"
    );
    assert!(!err.contains(SECRET), "{err}");
    assert!(!harness::is_mounted(tmp.path()));
}
