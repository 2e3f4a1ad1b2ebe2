//! The credentials of a named AWS profile (`--profile NAME`) for the S3 client, kept fresh
//! while a mount runs.
//!
//! [`ProfileCredentials`] is an `object_store` credential provider: the S3 client asks it
//! for credentials before signing each request, so each answer comes from memory, and the
//! work of keeping them current happens in two places:
//!
//! - **The files.** At most every [`CHECK_FILES_EVERY`] (never per request), the shared
//!   credentials file and the config file ([`aws_profile::paths`]) are looked at; when the
//!   identity, size or modification time of either changed, the profile is read and
//!   resolved again (`aws_source::resolve`). So a tool that rewrites `~/.aws/credentials`
//!   with fresh temporary keys (with a session token or without) is picked up by a running
//!   mount, and so is a profile switched to another kind. A file that cannot be read, or a
//!   profile that no longer parses, keeps the credentials read before, with one log line
//!   until it reads again.
//! - **Fetched credentials** (`credential_process`, an assumed role: see [`aws_source`]).
//!   They are fetched when first needed, and again shortly before they expire: [`EARLY`]
//!   before `Expiration`, or half their lifetime before it when they were issued for less
//!   than twice that, so that short-lived credentials are renewed too while still valid.
//!   Credentials without `Expiration` are kept until the files change. Requests that need
//!   credentials while a fetch runs wait for that one fetch (single flight) rather than
//!   starting another; those that come while the previous credentials are still valid use
//!   them meanwhile. A fetch that fails is logged once (the profile and the cause, never
//!   output or secrets) until one succeeds; while the previous credentials are valid they
//!   are used, and no fetch is tried again for [`RETRY_AFTER_FAILURE`], requests meanwhile
//!   failing at once with the same cause.
//!
//! Supported profile kinds: static keys (`aws_access_key_id`, `aws_secret_access_key`,
//! optional `aws_session_token`), `credential_process`, and a role (`role_arn`) assumed
//! with the credentials of `source_profile` (any of these kinds, chains included) or of the
//! environment (`credential_source = Environment`). SSO, web identity, MFA and metadata
//! sources are refused by [`aws_profile`], whose message says how to export credentials
//! instead.
//!
//! Secrets (keys, tokens, the command line, its output) appear in no message and no
//! `Debug` output.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use object_store::aws::AwsCredential;
use object_store::CredentialProvider;

use super::aws_credential_process::{Issued, Limits};
use super::aws_profile::{self, Profile};
use super::aws_source::{self, Env, Files, Source, StsClient};
use crate::sync::lock;

/// How often, at most, the two files are looked at for a change.
pub const CHECK_FILES_EVERY: Duration = Duration::from_secs(5);
/// How long before they expire credentials that expire are renewed (at most: see the module
/// docs for short lifetimes).
pub const EARLY: Duration = Duration::from_secs(5 * 60);
/// How long after a failed fetch (a run of `credential_process`, an AssumeRole) it is not
/// tried again.
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10);

/// The time now, as the provider sees it (a fixed clock in tests).
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// Credentials of one named profile, re-read and renewed as the module docs say.
pub struct ProfileCredentials {
    inner: Arc<Provider>,
}

/// What [`ProfileCredentials`] holds, shared with the task of a fetch (which outlives a
/// request given up).
struct Provider {
    name: String,
    files: Files,
    clock: Clock,
    env: Env,
    limits: Limits,
    state: Mutex<State>,
    /// Held while credentials are fetched: one fetch at a time.
    flight: tokio::sync::Mutex<()>,
    sts: StsClient,
}

/// What the provider knows now.
struct State {
    source: Source,
    /// The files as last looked at (`None`: not yet, so the first request reads them again,
    /// closing the gap between the caller's read and this provider's first look).
    stamps: Option<[Stamp; 2]>,
    checked: SystemTime,
    /// Whether reading the files again failed (and was logged) since they last read well.
    reread_failing: bool,
    /// The credentials fetched last (from `credential_process` or by assuming a role).
    issued: Option<Fetched>,
    /// The last fetch's failure, while no fetch since has succeeded.
    failure: Option<Failure>,
}

/// Credentials fetched.
struct Fetched {
    credential: Arc<AwsCredential>,
    expires: Option<SystemTime>,
    renew_at: Option<SystemTime>,
}

struct Failure {
    at: SystemTime,
    message: String,
}

/// A file's identity, size and modification time (`None`: missing or unreadable).
type Stamp = Option<(u64, u64, u64, SystemTime)>;

/// What a request gets from memory, or the fetch it needs.
enum Lookup {
    Ready(Arc<AwsCredential>),
    Failed(String),
    /// Fetch from this source; `fallback` are credentials still valid meanwhile.
    Fetch {
        source: Source,
        fallback: Option<Arc<AwsCredential>>,
    },
}

impl ProfileCredentials {
    /// A provider for profile `name` as `profile` (just loaded by [`aws_profile::load`])
    /// says, or `None` when it holds no credentials (then the client's default sources
    /// apply). An error when the source of its role cannot be resolved.
    pub fn from_profile(
        name: &str,
        profile: &Profile,
    ) -> std::io::Result<Option<ProfileCredentials>> {
        Self::with_parts(
            name,
            profile,
            aws_profile::paths(),
            Arc::new(SystemTime::now),
            Arc::new(|var| std::env::var(var).ok()),
            Limits::default(),
        )
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    fn with_parts(
        name: &str,
        profile: &Profile,
        files: Files,
        clock: Clock,
        env: Env,
        limits: Limits,
    ) -> Result<Option<ProfileCredentials>, String> {
        let Some(source) = aws_source::resolve(name, profile, &files, &env)? else {
            return Ok(None);
        };
        let checked = clock();
        let inner = Arc::new(Provider {
            name: name.to_string(),
            files,
            clock,
            env,
            limits,
            state: Mutex::new(State {
                source,
                stamps: None,
                checked,
                reread_failing: false,
                issued: None,
                failure: None,
            }),
            flight: tokio::sync::Mutex::new(()),
            sts: StsClient::new(),
        });
        Ok(Some(ProfileCredentials { inner }))
    }

    /// The credentials for a request (the trait's method, without the async wrapper's
    /// error type). A fetch runs in a task of its own, which settles its outcome whether or
    /// not the request that began it still waits: a request given up (its own timeout is
    /// shorter than a slow helper's) neither ends the fetch nor lets the next request begin
    /// another beside it.
    async fn credential(&self) -> Result<Arc<AwsCredential>, String> {
        let fallback = match self.inner.lookup() {
            Lookup::Ready(c) => return Ok(c),
            Lookup::Failed(message) => return Err(message),
            Lookup::Fetch { fallback, .. } => fallback,
        };
        // While a fetch runs, valid credentials serve meanwhile.
        if let Some(c) = fallback {
            if self.inner.flight.try_lock().is_err() {
                return Ok(c);
            }
        }
        let inner = self.inner.clone();
        let fetch = tokio::spawn(async move {
            // One fetch at a time.
            let _flight = inner.flight.lock().await;
            // Another fetch may have settled it while this one waited.
            let source = match inner.lookup() {
                Lookup::Ready(c) => return Ok(c),
                Lookup::Failed(message) => return Err(message),
                Lookup::Fetch { source, .. } => source,
            };
            let outcome = aws_source::fetch(&source, inner.limits, &inner.sts).await;
            inner.settle(&source, outcome)
        });
        fetch.await.unwrap_or_else(|e| {
            Err(format!(
                "profile {}: the fetch of credentials ended early: {e}",
                self.inner.name
            ))
        })
    }
}

impl Provider {
    /// Credentials from memory, or the fetch that is needed.
    fn lookup(&self) -> Lookup {
        let now = (self.clock)();
        let mut st = lock(&self.state);
        self.check_files(&mut st, now);
        if let Source::Static(c) = &st.source {
            return Lookup::Ready(c.clone());
        }
        let valid = st
            .issued
            .as_ref()
            .filter(|f| f.expires.is_none_or(|e| now < e))
            .map(|f| f.credential.clone());
        if let Some(f) = &st.issued {
            if f.renew_at.is_none_or(|r| now < r) {
                return Lookup::Ready(f.credential.clone());
            }
        }
        if let Some(failure) = &st.failure {
            let until = failure.at.checked_add(RETRY_AFTER_FAILURE);
            if now >= failure.at && until.is_some_and(|t| now < t) {
                return match valid {
                    Some(c) => Lookup::Ready(c),
                    None => Lookup::Failed(failure.message.clone()),
                };
            }
        }
        // The source is copied only for a fetch, not for every request served from memory.
        Lookup::Fetch {
            source: st.source.clone(),
            fallback: valid,
        }
    }

    /// Read the profile again if the files changed (looked at most every
    /// [`CHECK_FILES_EVERY`]).
    fn check_files(&self, st: &mut State, now: SystemTime) {
        let recent = now
            .duration_since(st.checked)
            .is_ok_and(|d| d < CHECK_FILES_EVERY);
        if recent && st.stamps.is_some() {
            return;
        }
        st.checked = now;
        let stamps = [stamp(&self.files.0), stamp(&self.files.1)];
        if st.stamps == Some(stamps) {
            return;
        }
        st.stamps = Some(stamps);
        let read =
            aws_profile::load_from(&self.name, self.files.0.as_deref(), self.files.1.as_deref())
                .map_err(|e| e.to_string())
                .and_then(|p| aws_source::resolve(&self.name, &p, &self.files, &self.env));
        match read {
            Ok(Some(source)) => {
                if st.reread_failing {
                    log::info!("profile {}: read again", self.name);
                    st.reread_failing = false;
                }
                if source != st.source {
                    log::debug!("profile {}: its credentials changed", self.name);
                    st.source = source;
                    st.issued = None;
                    st.failure = None;
                }
            }
            Ok(None) | Err(_) if st.reread_failing => {}
            Ok(None) => {
                st.reread_failing = true;
                log::warn!(
                    "profile {}: no credentials in it any more; keeping those read before",
                    self.name
                );
            }
            Err(e) => {
                st.reread_failing = true;
                log::warn!(
                    "profile {}: cannot read it again ({e}); keeping the credentials read before",
                    self.name
                );
            }
        }
    }

    /// Record the outcome of a fetch from `source` begun for a request; what that request
    /// gets.
    fn settle(
        &self,
        source: &Source,
        outcome: Result<Issued, String>,
    ) -> Result<Arc<AwsCredential>, String> {
        let now = (self.clock)();
        let outcome = outcome.and_then(|issued| match issued.expires {
            Some(e) if e <= now => Err(format!(
                "{} gave credentials that have already expired",
                source.kind()
            )),
            _ => Ok(issued),
        });
        let mut st = lock(&self.state);
        // The files may have changed meanwhile: then this outcome is this request's only.
        let current = st.source == *source;
        match outcome {
            Ok(issued) => {
                let credential = Arc::new(issued.credential);
                if current {
                    if st.failure.take().is_some() {
                        log::info!("profile {}: {} works again", self.name, source.kind());
                    }
                    st.issued = Some(Fetched {
                        credential: credential.clone(),
                        expires: issued.expires,
                        renew_at: issued.expires.map(|e| renew_at(now, e)),
                    });
                }
                Ok(credential)
            }
            Err(cause) => {
                // The previous credentials, if they are still valid now that the fetch ended.
                let fallback = st
                    .issued
                    .as_ref()
                    .filter(|f| current && f.expires.is_none_or(|e| now < e))
                    .map(|f| f.credential.clone());
                let message = format!("profile {}: {cause}", self.name);
                if current {
                    if st.failure.is_none() {
                        let consequence = match &fallback {
                            Some(_) => "using the previous credentials until they expire",
                            None => "requests fail until it succeeds",
                        };
                        log::warn!("{message}; {consequence}");
                    }
                    st.failure = Some(Failure {
                        at: now,
                        message: message.clone(),
                    });
                }
                fallback.ok_or(message)
            }
        }
    }
}

#[async_trait::async_trait]
impl CredentialProvider for ProfileCredentials {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        self.credential()
            .await
            .map_err(|message| object_store::Error::Generic {
                store: "S3",
                source: message.into(),
            })
    }
}

impl std::fmt::Debug for ProfileCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = lock(&self.inner.state).source.kind();
        f.debug_struct("ProfileCredentials")
            .field("profile", &self.inner.name)
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

/// When credentials issued at `now` that expire at `expires` are renewed: [`EARLY`] before,
/// or half their remaining lifetime before when that is shorter.
fn renew_at(now: SystemTime, expires: SystemTime) -> SystemTime {
    let life = expires.duration_since(now).unwrap_or_default();
    expires.checked_sub(EARLY.min(life / 2)).unwrap_or(now)
}

/// The identity, size and modification time of the file at `path`.
fn stamp(path: &Option<PathBuf>) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path.as_ref()?).ok()?;
    Some((meta.dev(), meta.ino(), meta.len(), meta.modified().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::aws_sts_fake as fake;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

    /// Log lines from the moment a [`Home`] was first made, kept by a logger installed once
    /// for the test binary.
    static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

    fn keep_log_lines() {
        struct Keep;
        impl log::Log for Keep {
            fn enabled(&self, _: &log::Metadata) -> bool {
                true
            }
            fn log(&self, record: &log::Record) {
                lock(&LINES).push(format!("{} {}", record.level(), record.args()));
            }
            fn flush(&self) {}
        }
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            // The only logger of the library's tests: without it, the checks that nothing
            // was logged would pass for want of a listener.
            log::set_logger(&Keep).expect("no other logger in the library's tests");
            log::set_max_level(log::LevelFilter::Info);
        });
    }

    /// The log lines about `profile` (each test has a profile name of its own).
    fn logged(profile: &str) -> Vec<String> {
        let tag = format!("profile {profile}:");
        lock(&LINES)
            .iter()
            .filter(|l| l.contains(&tag))
            .cloned()
            .collect()
    }

    /// A clock the test moves by hand, starting at 2030-01-01T00:00:00Z.
    #[derive(Clone)]
    struct FakeClock(Arc<Mutex<SystemTime>>);

    const T0: u64 = 1_893_456_000;

    impl FakeClock {
        fn new() -> FakeClock {
            FakeClock(Arc::new(Mutex::new(
                SystemTime::UNIX_EPOCH + Duration::from_secs(T0),
            )))
        }
        /// Move to `secs` (may be fractional) after T0.
        fn at(&self, secs: f64) {
            *lock(&self.0) =
                SystemTime::UNIX_EPOCH + Duration::from_secs(T0) + Duration::from_secs_f64(secs);
        }
        fn clock(&self) -> Clock {
            let me = self.0.clone();
            Arc::new(move || *lock(&me))
        }
    }

    /// RFC 3339 text of `secs` after T0.
    fn rfc3339(secs: u64) -> String {
        let t = chrono::DateTime::from_timestamp((T0 + secs) as i64, 0).unwrap();
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    /// A temporary home for a profile's files and a credential helper: the helper counts
    /// its runs in `count`, fails while `fail` exists, prints what `print` holds if it
    /// exists, and otherwise keys numbered by its run with the expiration `expires` holds.
    struct Home {
        dir: tempfile::TempDir,
        clock: FakeClock,
    }

    impl Home {
        fn new() -> Home {
            keep_log_lines();
            let dir = tempfile::tempdir().unwrap();
            let helper = dir.path().join("helper");
            std::fs::write(
                &helper,
                format!(
                    "#!/bin/sh\ncd '{}' || exit 9\n\
                     n=$(($(cat count 2>/dev/null || echo 0) + 1)); echo $n > count\n\
                     while [ -e gate ]; do sleep 0.01; done\n\
                     [ -e fail ] && {{ echo \"helper failed {SECRET}\" >&2; exit 1; }}\n\
                     [ -e print ] && {{ cat print; exit 0; }}\n\
                     printf '{{\"Version\": 1, \"AccessKeyId\": \"AKID%s\", \
                     \"SecretAccessKey\": \"{SECRET}%s\", \"SessionToken\": \"token%s\", \
                     \"Expiration\": \"%s\"}}' $n $n $n \"$(cat expires)\"\n",
                    dir.path().display()
                ),
            )
            .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
            Home {
                dir,
                clock: FakeClock::new(),
            }
        }

        fn path(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        fn write(&self, name: &str, text: &str) {
            // Through a new file renamed over the old, as tools that refresh them do.
            let tmp = self.path(".tmp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, self.path(name)).unwrap();
        }

        fn runs(&self) -> u32 {
            std::fs::read_to_string(self.path("count")).map_or(0, |s| s.trim().parse().unwrap())
        }

        /// The helper's credentials expire `secs` after T0.
        fn expires(&self, secs: u64) {
            self.write("expires", &rfc3339(secs));
        }

        /// A profile `name` that runs the helper.
        fn process_profile(&self, name: &str) {
            self.write(
                "config",
                &format!(
                    "[profile {name}]\nregion = us-east-1\ncredential_process = {}\n",
                    self.path("helper").display()
                ),
            );
        }

        fn provider(&self, name: &str, limits: Limits) -> ProfileCredentials {
            let (creds, config) = (self.path("credentials"), self.path("config"));
            let profile = aws_profile::load_from(name, Some(&creds), Some(&config)).unwrap();
            ProfileCredentials::with_parts(
                name,
                &profile,
                (Some(creds), Some(config)),
                self.clock.clock(),
                Arc::new(|_| None),
                limits,
            )
            .unwrap()
            .unwrap()
        }
    }

    fn get(p: &ProfileCredentials) -> Result<Arc<AwsCredential>, String> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(p.credential())
    }

    fn key(p: &ProfileCredentials) -> String {
        get(p).unwrap().key_id.clone()
    }

    #[test]
    fn renewal_comes_early_and_earlier_for_short_lifetimes() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(T0);
        let s = Duration::from_secs;
        assert_eq!(renew_at(now, now + s(3600)), now + s(3300));
        assert_eq!(renew_at(now, now + s(600)), now + s(300));
        assert_eq!(renew_at(now, now + s(4)), now + s(2));
        assert_eq!(renew_at(now, now), now);
        assert_eq!(renew_at(now + s(5), now), now);
    }

    #[test]
    fn credential_process_runs_once_until_shortly_before_expiry() {
        let home = Home::new();
        home.process_profile("proc-renew");
        home.expires(4);
        let p = home.provider("proc-renew", Limits::default());
        assert_eq!(home.runs(), 0, "nothing runs before credentials are needed");
        let c = get(&p).unwrap();
        assert_eq!(
            (c.key_id.as_str(), c.secret_key.clone(), c.token.as_deref()),
            ("AKID1", format!("{SECRET}1"), Some("token1"))
        );
        // Issued for 4 s: renewed after 2 s, not before.
        home.clock.at(1.9);
        assert_eq!((key(&p), home.runs()), ("AKID1".into(), 1));
        home.expires(2 + 3600);
        home.clock.at(2.0);
        assert_eq!((key(&p), home.runs()), ("AKID2".into(), 2));
        // Issued for an hour: renewed 5 minutes before it ends.
        home.clock.at(2.0 + 3600.0 - 301.0);
        assert_eq!((key(&p), home.runs()), ("AKID2".into(), 2));
        home.expires(10_000);
        home.clock.at(2.0 + 3600.0 - 300.0);
        assert_eq!((key(&p), home.runs()), ("AKID3".into(), 3));
        assert!(
            logged("proc-renew").is_empty(),
            "{:?}",
            logged("proc-renew")
        );
    }

    #[test]
    fn concurrent_requests_run_the_helper_once() {
        let home = Home::new();
        home.process_profile("proc-flight");
        home.expires(3600);
        home.write("gate", "");
        let p = Arc::new(home.provider("proc-flight", Limits::default()));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .build()
            .unwrap();
        let asked = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (p, asked) = (p.clone(), asked.clone());
                rt.spawn(async move {
                    asked.fetch_add(1, Ordering::SeqCst);
                    p.get_credential().await.map(|c| c.key_id.clone())
                })
            })
            .collect();
        // The helper waits at its gate until every request has asked.
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while (home.runs() == 0 || asked.load(Ordering::SeqCst) < 16)
            && std::time::Instant::now() < until
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::fs::remove_file(home.path("gate")).unwrap();
        for t in tasks {
            assert_eq!(rt.block_on(t).unwrap().unwrap(), "AKID1");
        }
        assert_eq!(home.runs(), 1);
    }

    /// A request that gives up while the helper runs (its own time bound, shorter than a slow
    /// helper's) leaves the fetch running: the next request takes its outcome rather than
    /// running the helper again beside it.
    #[test]
    fn a_request_given_up_leaves_its_fetch_to_the_next() {
        let home = Home::new();
        home.process_profile("proc-gone");
        home.expires(3600);
        home.write("gate", "");
        let p = Arc::new(home.provider("proc-gone", Limits::default()));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        // The helper waits at its gate: the first request cannot end before its bound.
        let first = rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(50), p.get_credential()).await
        });
        assert!(first.is_err(), "the first request ended with the gate shut");
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while home.runs() == 0 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(home.runs(), 1, "the helper never started");
        let second = {
            let p = p.clone();
            rt.spawn(async move { p.get_credential().await.map(|c| c.key_id.clone()) })
        };
        std::fs::remove_file(home.path("gate")).unwrap();
        assert_eq!(rt.block_on(second).unwrap().unwrap(), "AKID1");
        assert_eq!(home.runs(), 1);
    }

    #[test]
    fn a_failing_helper_is_logged_once_and_run_again_after_a_pause() {
        let home = Home::new();
        home.process_profile("proc-fail");
        home.expires(3600);
        home.write("fail", "");
        let p = home.provider("proc-fail", Limits::default());
        let e = get(&p).unwrap_err();
        assert_eq!(
            e,
            "profile proc-fail: credential_process failed: exited with status 1"
        );
        // Within the pause: the same error at once, nothing run.
        home.clock.at(9.0);
        assert_eq!(get(&p).unwrap_err(), e);
        assert_eq!(home.runs(), 1);
        home.clock.at(10.0);
        assert_eq!(get(&p).unwrap_err(), e);
        assert_eq!(home.runs(), 2);
        let lines = logged("proc-fail");
        assert_eq!(
            lines,
            vec![format!("WARN {e}; requests fail until it succeeds")]
        );
        // It works again: used, and said once.
        std::fs::remove_file(home.path("fail")).unwrap();
        home.clock.at(20.0);
        assert_eq!(key(&p), "AKID3");
        let lines = logged("proc-fail");
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[1].contains("works again"), "{lines:?}");
        assert!(lines.iter().all(|l| !l.contains(SECRET)));
    }

    #[test]
    fn previous_credentials_serve_while_the_helper_fails_until_they_expire() {
        let home = Home::new();
        home.process_profile("proc-keep");
        home.expires(600);
        let p = home.provider("proc-keep", Limits::default());
        assert_eq!(key(&p), "AKID1");
        home.write("fail", "");
        // Renewal is due after 300 s: it fails, the valid ones serve.
        home.clock.at(301.0);
        assert_eq!((key(&p), home.runs()), ("AKID1".into(), 2));
        home.clock.at(305.0);
        assert_eq!((key(&p), home.runs()), ("AKID1".into(), 2));
        home.clock.at(311.0);
        assert_eq!((key(&p), home.runs()), ("AKID1".into(), 3));
        // Expired, and still failing: an error.
        home.clock.at(600.0);
        assert!(get(&p).unwrap_err().contains("exited with status 1"));
        let lines = logged("proc-keep");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].ends_with("using the previous credentials until they expire"));
    }

    #[test]
    fn helper_output_that_is_no_credential_is_an_error() {
        let home = Home::new();
        home.process_profile("proc-bad");
        home.expires(3600);
        home.write("print", &format!("AccessKeyId={SECRET}\n"));
        let p = home.provider("proc-bad", Limits::default());
        let e = get(&p).unwrap_err();
        assert!(e.contains("not a JSON object"), "{e}");
        assert!(!e.contains(SECRET));
        // Credentials that have expired already.
        home.write(
            "print",
            &format!(
                r#"{{"Version":1,"AccessKeyId":"A","SecretAccessKey":"{SECRET}","Expiration":"{}"}}"#,
                rfc3339(0)
            ),
        );
        home.clock.at(100.0);
        let e = get(&p).unwrap_err();
        assert!(
            e.ends_with("credential_process gave credentials that have already expired"),
            "{e}"
        );
        // Too much output, killed; then a good answer.
        home.write("print", &"x".repeat(2000));
        let small = Limits {
            max_output: 1024,
            ..Limits::default()
        };
        let p = home.provider("proc-bad", small);
        assert!(get(&p)
            .unwrap_err()
            .ends_with("printed more than 1 KiB; killed"));
        std::fs::remove_file(home.path("print")).unwrap();
        home.clock.at(200.0);
        assert!(key(&p).starts_with("AKID"));
    }

    /// A credentials file giving profile `name` the static keys `key` (and a token).
    fn static_keys(name: &str, key: &str) -> String {
        format!(
            "[{name}]\naws_access_key_id = {key}\naws_secret_access_key = {SECRET}\n\
             aws_session_token = token-of-{key}\n"
        )
    }

    #[test]
    fn rewritten_files_are_read_again_within_seconds() {
        const NAME: &str = "keys-reread";
        let home = Home::new();
        home.write("credentials", &static_keys(NAME, "AKIDONE"));
        let p = home.provider(NAME, Limits::default());
        assert_eq!(key(&p), "AKIDONE");
        assert_eq!(get(&p).unwrap().token.as_deref(), Some("token-of-AKIDONE"));
        // A tool rewrites the file: seen at the next look, not per request.
        home.write("credentials", &static_keys(NAME, "AKIDTWO"));
        home.clock.at(4.9);
        assert_eq!(key(&p), "AKIDONE");
        home.clock.at(5.0);
        assert_eq!(key(&p), "AKIDTWO");
        assert_eq!(get(&p).unwrap().token.as_deref(), Some("token-of-AKIDTWO"));
        // Rewritten in place with the same size: the modification time tells (set a second
        // on, so that a file system with coarse times cannot keep it the same).
        let path = home.path("credentials");
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, static_keys(NAME, "AKIDTRI")).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(before + Duration::from_secs(1))
            .unwrap();
        home.clock.at(10.0);
        assert_eq!(key(&p), "AKIDTRI");
        // A file that no longer parses, or lost the profile: the last good keys, said once.
        home.write(
            "credentials",
            &format!("[{NAME}]\naws_access_key_id {SECRET}\n"),
        );
        home.clock.at(15.0);
        assert_eq!(key(&p), "AKIDTRI");
        home.write("credentials", "[other]\n");
        home.clock.at(20.0);
        assert_eq!(key(&p), "AKIDTRI");
        let lines = logged(NAME);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("cannot read it again"), "{lines:?}");
        assert!(!lines[0].contains(SECRET), "{lines:?}");
        // Good again.
        home.write("credentials", &static_keys(NAME, "AKIDFOUR"));
        home.clock.at(25.0);
        assert_eq!(key(&p), "AKIDFOUR");
        // Switched to a helper: it runs.
        std::fs::remove_file(home.path("credentials")).unwrap();
        home.process_profile(NAME);
        home.expires(3600);
        home.clock.at(30.0);
        assert_eq!((key(&p), home.runs()), ("AKID1".into(), 1));
    }

    #[test]
    fn the_first_request_reads_the_files_again() {
        const NAME: &str = "keys-first";
        // Changed between the caller's read and the provider's first request.
        let home = Home::new();
        home.write("credentials", &static_keys(NAME, "AKIDOLD"));
        let p = home.provider(NAME, Limits::default());
        home.write("credentials", &static_keys(NAME, "AKIDNEW"));
        assert_eq!(key(&p), "AKIDNEW");
    }

    #[test]
    fn debug_output_names_the_profile_and_kind_only() {
        let home = Home::new();
        home.write("credentials", &static_keys("keys-debug", "AKIDDBG"));
        let p = home.provider("keys-debug", Limits::default());
        let text = format!("{p:?}");
        assert_eq!(
            text,
            r#"ProfileCredentials { profile: "keys-debug", kind: "static keys", .. }"#
        );
        home.process_profile("proc-dbg");
        let p = home.provider("proc-dbg", Limits::default());
        let text = format!("{p:?}");
        assert!(
            text.contains("credential_process") && !text.contains("helper"),
            "{text}"
        );
    }

    /// A fake STS whose n-th answer gives `ASIAn`, expiring n hours after T0.
    fn counting_sts() -> fake::FakeSts {
        let calls = AtomicUsize::new(0);
        fake::FakeSts::start(move |_| {
            let n = calls.fetch_add(1, Ordering::SeqCst) as u64 + 1;
            let token = format!("token{n}");
            fake::answer(&format!("ASIA{n}"), SECRET, &token, &rfc3339(n * 3600))
        })
    }

    #[test]
    fn a_role_is_assumed_once_and_again_shortly_before_it_expires() {
        let sts = counting_sts();
        let home = Home::new();
        home.write("credentials", &static_keys("role-base", "AKIDBASE"));
        home.write(
            "config",
            &format!(
                "[profile role-renew]\nrole_arn = arn:aws:iam::1:role/r\n\
                 source_profile = role-base\nsts =\n  endpoint_url = {}\n",
                sts.url
            ),
        );
        let p = home.provider("role-renew", Limits::default());
        assert_eq!(
            format!("{p:?}"),
            r#"ProfileCredentials { profile: "role-renew", kind: "role", .. }"#
        );
        let c = get(&p).unwrap();
        assert_eq!(
            (c.key_id.as_str(), c.token.as_deref()),
            ("ASIA1", Some("token1"))
        );
        home.clock.at(3299.0);
        assert_eq!(key(&p), "ASIA1");
        assert_eq!(sts.requests().len(), 1);
        home.clock.at(3300.0);
        assert_eq!(key(&p), "ASIA2");
        let requests = sts.requests();
        assert_eq!(requests.len(), 2);
        // Each call signed with the source profile's keys.
        for r in &requests {
            assert_eq!(r.signed_by(SECRET).as_deref(), Some("AKIDBASE"));
        }
        assert!(logged("role-renew").is_empty());
    }

    #[test]
    fn a_refused_role_is_one_logged_error() {
        let sts = fake::FakeSts::start(|_| {
            let body = "<ErrorResponse><Error><Code>AccessDenied</Code>\
                        <Message>not allowed</Message></Error></ErrorResponse>";
            (403, vec![], body.to_string())
        });
        let home = Home::new();
        home.write("credentials", &static_keys("role-base", "AKIDBASE"));
        home.write(
            "config",
            &format!(
                "[profile role-denied]\nrole_arn = arn:aws:iam::1:role/r\n\
                 source_profile = role-base\nendpoint_url = {}\n",
                sts.url
            ),
        );
        let p = home.provider("role-denied", Limits::default());
        let want = "profile role-denied: AssumeRole failed: STS answered status 403: \
                    AccessDenied: not allowed";
        assert_eq!(get(&p).unwrap_err(), want);
        home.clock.at(5.0);
        assert_eq!(get(&p).unwrap_err(), want);
        assert_eq!(sts.requests().len(), 1);
        assert_eq!(
            logged("role-denied"),
            vec![format!("WARN {want}; requests fail until it succeeds")]
        );
    }

    #[test]
    fn a_profile_without_credentials_has_no_provider() {
        let profile = Profile {
            region: Some("eu-west-1".into()),
            ..Profile::default()
        };
        let none = ProfileCredentials::with_parts(
            "r",
            &profile,
            (None, None),
            FakeClock::new().clock(),
            Arc::new(|_| None),
            Limits::default(),
        );
        assert!(none.unwrap().is_none());
    }
}
