//! Running a profile's `credential_process` and reading what it prints.
//!
//! The command line is run as the AWS CLI runs it on Unix: `sh -c COMMAND`, with the
//! daemon's environment and working directory, standard input closed and standard error
//! passed through (helpers print their prompts and complaints there). Standard output must
//! be one JSON object:
//!
//! ```json
//! {"Version": 1, "AccessKeyId": "...", "SecretAccessKey": "...",
//!  "SessionToken": "...", "Expiration": "2030-01-01T00:00:00Z"}
//! ```
//!
//! `SessionToken` and `Expiration` (an RFC 3339 time) are optional; without `Expiration`
//! the credentials never expire. Keys other than these are ignored.
//!
//! Bounds: the command runs in a process group of its own; if it has not exited and closed
//! its output within `Limits::timeout`, or prints more than `Limits::max_output` bytes,
//! the whole group is killed and the run is an error. Errors say what went wrong (exit
//! status, time, size, which field is missing or malformed) and never contain the output:
//! it holds secrets.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use object_store::aws::AwsCredential;

/// How long a run may take and how much it may print.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub timeout: Duration,
    pub max_output: usize,
}

impl Default for Limits {
    /// One minute (a helper may wait for a hardware key or a browser), 64 KiB (a few KiB of
    /// JSON is all a helper prints).
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(60),
            max_output: 64 << 10,
        }
    }
}

/// Credentials a helper (or STS) issued, and when they expire (`None`: never).
#[derive(Debug)]
pub(crate) struct Issued {
    pub credential: AwsCredential,
    pub expires: Option<SystemTime>,
}

/// What the two watcher threads of a run report.
enum Event {
    Output(std::io::Result<Vec<u8>>),
    Exit(std::io::Result<ExitStatus>),
}

/// Run `command` within `limits` and parse its output.
pub(crate) fn fetch(command: &str, limits: Limits) -> Result<Issued, String> {
    parse(&run(command, limits)?)
}

/// Run `command` under `sh -c` within `limits`; its standard output.
pub(crate) fn run(command: &str, limits: Limits) -> Result<Vec<u8>, String> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start sh: {e}"))?;
    let group = i32::try_from(child.id()).ok();
    let Some(stdout) = child.stdout.take() else {
        kill_group(group);
        return Err("no output pipe".into());
    };
    let (tx, rx) = mpsc::channel();
    let to_reader = tx.clone();
    // One byte past the bound tells an output that is too long from one that fits exactly.
    let cap = u64::try_from(limits.max_output)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let r = stdout.take(cap).read_to_end(&mut buf).map(|_| buf);
        let _ = to_reader.send(Event::Output(r));
    });
    // The waiter owns the child and reaps it, also after the group was killed.
    std::thread::spawn(move || {
        let _ = tx.send(Event::Exit(child.wait()));
    });

    let deadline = Instant::now() + limits.timeout;
    let (mut output, mut status) = (None, None);
    while output.is_none() || status.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Event::Output(Ok(buf))) if buf.len() > limits.max_output => {
                kill_group(group);
                return Err(format!(
                    "printed more than {} KiB; killed",
                    limits.max_output / 1024
                ));
            }
            Ok(Event::Output(r)) => {
                output = Some(r.map_err(|e| format!("cannot read its output: {e}"))?)
            }
            Ok(Event::Exit(r)) => status = Some(r.map_err(|e| format!("cannot wait for it: {e}"))?),
            Err(_) => {
                kill_group(group);
                return Err(format!(
                    "did not finish within {} s; killed",
                    limits.timeout.as_secs_f32()
                ));
            }
        }
    }
    match (output, status) {
        (Some(out), Some(status)) if status.success() => Ok(out),
        (_, Some(status)) => Err(match status.code() {
            Some(code) => format!("exited with status {code}"),
            None => format!("ended by a signal ({status})"),
        }),
        _ => Err("ended without a status".into()),
    }
}

/// Kill the process group the command runs in (its shell and everything it started there).
fn kill_group(group: Option<i32>) {
    use nix::sys::signal::{killpg, Signal};
    if let Some(pid) = group.filter(|&p| p > 0) {
        let _ = killpg(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// Read a helper's JSON output (see the module docs).
pub(crate) fn parse(output: &[u8]) -> Result<Issued, String> {
    let value: serde_json::Value = serde_json::from_slice(output).map_err(|e| {
        // serde_json's message quotes no input, but only the position is needed.
        format!(
            "its output is not a JSON object (line {}, column {})",
            e.line(),
            e.column()
        )
    })?;
    let Some(object) = value.as_object() else {
        return Err("its output is not a JSON object".into());
    };
    match object.get("Version").and_then(serde_json::Value::as_u64) {
        Some(1) => {}
        Some(_) => return Err("its output has a Version other than 1".into()),
        None => return Err("its output has no Version (a number, 1)".into()),
    }
    let text = |key: &str| -> Result<Option<String>, String> {
        match object.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) if s.is_empty() => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("its output's {key} is not a string")),
        }
    };
    let required = |key: &str| text(key)?.ok_or_else(|| format!("its output has no {key}"));
    let key_id = required("AccessKeyId")?;
    let secret_key = required("SecretAccessKey")?;
    let token = text("SessionToken")?;
    // These two travel in request headers (the secret only signs).
    for (key, value) in [
        ("AccessKeyId", Some(&key_id)),
        ("SessionToken", token.as_ref()),
    ] {
        if value.is_some_and(|v| !super::aws_profile::header_safe(v)) {
            return Err(format!(
                "its output's {key} holds characters other than printable ASCII"
            ));
        }
    }
    let expires = match text("Expiration")? {
        None => None,
        Some(s) => Some(
            chrono::DateTime::parse_from_rfc3339(&s)
                .map(SystemTime::from)
                .map_err(|_| "its output's Expiration is not an RFC 3339 time".to_string())?,
        ),
    };
    Ok(Issued {
        credential: AwsCredential {
            key_id,
            secret_key,
            token,
        },
        expires,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

    fn limits(timeout_ms: u64, max_output: usize) -> Limits {
        Limits {
            timeout: Duration::from_millis(timeout_ms),
            max_output,
        }
    }

    #[test]
    fn a_helpers_json_is_read() {
        let out = format!(
            r#"{{"Version": 1, "AccessKeyId": "AKIDPROC", "SecretAccessKey": "{SECRET}",
                "SessionToken": "tok", "Expiration": "2030-01-02T03:04:05+01:00", "x": [1]}}"#
        );
        let got = parse(out.as_bytes()).unwrap();
        assert_eq!(got.credential.key_id, "AKIDPROC");
        assert_eq!(got.credential.secret_key, SECRET);
        assert_eq!(got.credential.token.as_deref(), Some("tok"));
        let want = SystemTime::UNIX_EPOCH + Duration::from_secs(1_893_549_845);
        assert_eq!(got.expires, Some(want));
        // Without a token or an expiration: long-term keys.
        let out = format!(r#"{{"Version":1,"AccessKeyId":"A","SecretAccessKey":"{SECRET}"}}"#);
        let got = parse(out.as_bytes()).unwrap();
        assert_eq!((got.credential.token, got.expires), (None, None));
    }

    #[test]
    fn bad_output_is_an_error_naming_the_field_never_the_secret() {
        let cases = [
            ("".to_string(), "not a JSON object"),
            (
                format!("{{\"SecretAccessKey\": \"{SECRET}\""),
                "not a JSON object",
            ),
            ("[1]".to_string(), "not a JSON object"),
            (
                format!("{{\"SecretAccessKey\": \"{SECRET}\"}}"),
                "no Version",
            ),
            (
                format!("{{\"Version\": 2, \"SecretAccessKey\": \"{SECRET}\"}}"),
                "Version other than 1",
            ),
            (
                format!("{{\"Version\": 1, \"SecretAccessKey\": \"{SECRET}\"}}"),
                "no AccessKeyId",
            ),
            (
                r#"{"Version": 1, "AccessKeyId": "A", "SecretAccessKey": ""}"#.to_string(),
                "no SecretAccessKey",
            ),
            (
                format!(
                    r#"{{"Version":1,"AccessKeyId":"A","SecretAccessKey":{{"k":"{SECRET}"}}}}"#
                ),
                "SecretAccessKey is not a string",
            ),
            (
                format!(
                    r#"{{"Version":1,"AccessKeyId":"A","SecretAccessKey":"{SECRET}",
                    "Expiration":"tomorrow {SECRET}"}}"#
                ),
                "Expiration is not an RFC 3339 time",
            ),
        ];
        for (out, want) in cases {
            let e = parse(out.as_bytes()).unwrap_err();
            assert!(e.contains(want), "{out}: {e}");
            assert!(!e.contains(SECRET), "{e}");
        }
        for (field, value) in [("AccessKeyId", "AK ID"), ("SessionToken", "tok\\nen")] {
            let out = format!(
                r#"{{"Version":1,"AccessKeyId":"A","SecretAccessKey":"s","{field}":"{value}"}}"#
            );
            let e = parse(out.as_bytes()).unwrap_err();
            assert_eq!(
                e,
                format!("its output's {field} holds characters other than printable ASCII")
            );
        }
        // Arbitrary bytes: an error, no panic.
        assert!(parse(&[0xff, 0x00, b'{', 0x80]).is_err());
    }

    #[test]
    fn a_command_runs_under_sh_and_its_status_counts() {
        let out = run("printf '%s' \"$((6 * 7))\"", Limits::default()).unwrap();
        assert_eq!(out, b"42");
        let e = run("echo secret-output; exit 3", Limits::default()).unwrap_err();
        assert_eq!(e, "exited with status 3");
        let e = run("kill -9 $$", Limits::default()).unwrap_err();
        assert!(e.starts_with("ended by a signal"), "{e}");
    }

    #[test]
    fn output_past_the_bound_is_refused_and_the_writer_killed() {
        // Exactly the bound fits; one byte more does not, nor an endless writer.
        assert_eq!(
            run("head -c 1024 /dev/zero", limits(60_000, 1024))
                .unwrap()
                .len(),
            1024
        );
        let e = run("head -c 1025 /dev/zero", limits(60_000, 1024)).unwrap_err();
        assert_eq!(e, "printed more than 1 KiB; killed");
        let e = run("yes", limits(60_000, 1024)).unwrap_err();
        assert_eq!(e, "printed more than 1 KiB; killed");
    }

    /// Processes whose command line contains `marker`.
    fn running(marker: &str) -> Vec<String> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let dir = entry.path();
            let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            let zombie = std::fs::read_to_string(dir.join("stat")).map_or(true, |s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            });
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if !zombie && text.contains(marker) {
                found.push(format!("{}: {text}", dir.display()));
            }
        }
        found
    }

    /// Wait (bounded, generously) until no process's command line contains `marker`.
    fn assert_none_left(marker: &str) {
        let until = Instant::now() + Duration::from_secs(30);
        while !running(marker).is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(running(marker), Vec::<String>::new());
    }

    /// A `sleep` argument no other process has: 1000 s and a unique fraction.
    fn unique_sleep() -> String {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        format!("1000.{}{nanos:09}", std::process::id())
    }

    #[test]
    fn a_command_that_does_not_finish_is_killed_with_its_children() {
        // The shell waits for a child that would run far longer than the bound; both are
        // killed. (The bound is short so that the test is quick; nothing depends on it.)
        let arg = unique_sleep();
        let started = Instant::now();
        let e = run(&format!("sleep {arg} & wait"), limits(300, 1024)).unwrap_err();
        assert_eq!(e, "did not finish within 0.3 s; killed");
        assert!(started.elapsed() < Duration::from_secs(60));
        assert_none_left(&arg);
    }

    #[test]
    fn a_command_that_closes_its_output_but_lingers_is_bounded_too() {
        let arg = unique_sleep();
        let e = run(&format!("exec >&-; exec sleep {arg}"), limits(300, 1024)).unwrap_err();
        assert!(e.starts_with("did not finish"), "{e}");
        assert_none_left(&arg);
    }
}
