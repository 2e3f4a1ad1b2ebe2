//! Where a profile's credentials come from (`Source`), and getting them once (`fetch`).
//!
//! A profile (see [`aws_profile`]) resolves to one of:
//! - **static keys**, used as they are;
//! - **`credential_process`**, run by [`aws_credential_process`](super::aws_credential_process);
//! - **a role**, assumed with [`aws_sts`](super::aws_sts) using the credentials of its source: the profile
//!   named by `source_profile`, resolved the same way (so chains of roles work, up to
//!   [`MAX_CHAIN`] profiles, a loop being an error), the profile's own static keys when it
//!   names itself, or the environment's `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
//!   `AWS_SESSION_TOKEN` with `credential_source = Environment`. The session name is
//!   `role_session_name`, else `h5mount-PID`; STS is reached at `AWS_ENDPOINT_URL_STS`, else
//!   the profile's STS endpoint, else the regional endpoint of the profile's region (else
//!   `us-east-1`). Each renewal of a role fetches its source again (running a source's
//!   `credential_process` again, for instance).
//!
//! Resolving reads the profile files and the environment, never the network; fetching runs
//! commands and calls STS. Neither puts a secret into an error.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use object_store::aws::AwsCredential;
use object_store::client::HttpClient;

use super::aws_credential_process::{self as process, Issued, Limits};
use super::aws_profile::{self, Profile, RoleSource};
use super::aws_sts::{self as sts, AssumeRole};

/// The most profiles a chain of roles may pass through.
pub const MAX_CHAIN: usize = 8;

/// The credentials file and the config file.
pub(crate) type Files = (Option<PathBuf>, Option<PathBuf>);

/// The environment, as a resolver sees it (a fixed map in tests).
pub(crate) type Env = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Where a profile's credentials come from.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Source {
    Static(Arc<AwsCredential>),
    /// The command line of `credential_process`.
    Process(String),
    Role(Arc<Role>),
}

/// A role to assume, and the credentials that assume it.
#[derive(PartialEq, Eq)]
pub(crate) struct Role {
    pub call: AssumeRole,
    pub base: Source,
}

impl Source {
    /// What kind of source this is, for `Debug` output and messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Source::Static(_) => "static keys",
            Source::Process(_) => "credential_process",
            Source::Role(_) => "role",
        }
    }
}

/// The source of profile `name`, which `profile` holds (`None`: it has no credentials).
pub(crate) fn resolve(
    name: &str,
    profile: &Profile,
    files: &Files,
    env: &Env,
) -> Result<Option<Source>, String> {
    resolve_in_chain(name, profile, files, env, &mut vec![name.to_string()])
}

/// [`resolve`], `chain` being the profiles passed through to reach `name` (itself last).
fn resolve_in_chain(
    name: &str,
    profile: &Profile,
    files: &Files,
    env: &Env,
    chain: &mut Vec<String>,
) -> Result<Option<Source>, String> {
    let Some(role) = &profile.role else {
        return Ok(static_keys(profile)
            .or_else(|| profile.credential_process.clone().map(Source::Process)));
    };
    let base = match &role.source {
        RoleSource::Environment => from_environment(name, env)?,
        RoleSource::Profile(source) if source == name => static_keys(profile).ok_or_else(|| {
            format!("profile {name} is its own source_profile but has no static keys")
        })?,
        RoleSource::Profile(source) => {
            if chain.contains(source) {
                return Err(format!(
                    "profile {name}: source_profile makes a loop: {} -> {source}",
                    chain.join(" -> ")
                ));
            }
            if chain.len() >= MAX_CHAIN {
                return Err(format!(
                    "profile {name}: source_profile chain longer than {MAX_CHAIN} profiles"
                ));
            }
            let loaded = aws_profile::load_from(source, files.0.as_deref(), files.1.as_deref())
                .map_err(|e| format!("profile {name}: source_profile {source}: {e}"))?;
            chain.push(source.clone());
            resolve_in_chain(source, &loaded, files, env, chain)?.ok_or_else(|| {
                format!("profile {name}: source_profile {source} has no credentials")
            })?
        }
    };
    let region = profile.region.clone().unwrap_or_else(|| "us-east-1".into());
    let configured = env("AWS_ENDPOINT_URL_STS")
        .filter(|e| !e.is_empty())
        .or_else(|| profile.sts_endpoint_url.clone());
    let endpoint = sts::endpoint(&region, configured.as_deref())
        .map_err(|e| format!("profile {name}: {e}"))?;
    Ok(Some(Source::Role(Arc::new(Role {
        call: AssumeRole {
            role_arn: role.role_arn.clone(),
            session_name: role
                .session_name
                .clone()
                .unwrap_or_else(|| format!("h5mount-{}", std::process::id())),
            external_id: role.external_id.clone(),
            duration_seconds: role.duration_seconds,
            region,
            endpoint,
        },
        base,
    }))))
}

/// The profile's static keys, if it has them.
fn static_keys(profile: &Profile) -> Option<Source> {
    Some(Source::Static(Arc::new(AwsCredential {
        key_id: profile.access_key_id.clone()?,
        secret_key: profile.secret_access_key.clone()?,
        token: profile.session_token.clone(),
    })))
}

/// The environment's keys (`credential_source = Environment`) for profile `name`.
fn from_environment(name: &str, env: &Env) -> Result<Source, String> {
    let get = |var: &str| env(var).filter(|v| !v.is_empty());
    let (Some(key_id), Some(secret_key)) = (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY"))
    else {
        return Err(format!(
            "profile {name} has credential_source = Environment but AWS_ACCESS_KEY_ID or \
             AWS_SECRET_ACCESS_KEY is not set"
        ));
    };
    let token = get("AWS_SESSION_TOKEN");
    for (var, value) in [
        ("AWS_ACCESS_KEY_ID", Some(&key_id)),
        ("AWS_SESSION_TOKEN", token.as_ref()),
    ] {
        if value.is_some_and(|v| !aws_profile::header_safe(v)) {
            return Err(format!("{var} holds characters other than printable ASCII"));
        }
    }
    Ok(Source::Static(Arc::new(AwsCredential {
        key_id,
        secret_key,
        token,
    })))
}

/// Where the HTTP client for STS is kept once made.
pub(crate) type StsClient = OnceLock<Result<HttpClient, String>>;

/// Get credentials from `source` once. Errors name the step that failed.
pub(crate) fn fetch<'a>(
    source: &'a Source,
    limits: Limits,
    client: &'a StsClient,
) -> Pin<Box<dyn Future<Output = Result<Issued, String>> + Send + 'a>> {
    Box::pin(async move {
        match source {
            Source::Static(c) => Ok(Issued {
                credential: AwsCredential {
                    key_id: c.key_id.clone(),
                    secret_key: c.secret_key.clone(),
                    token: c.token.clone(),
                },
                expires: None,
            }),
            Source::Process(command) => {
                let command = command.clone();
                let run = move || process::fetch(&command, limits);
                let outcome = match tokio::runtime::Handle::try_current() {
                    // It blocks for up to its time bound: not on a runtime worker.
                    Ok(rt) => rt
                        .spawn_blocking(run)
                        .await
                        .unwrap_or_else(|e| Err(format!("its runner failed: {e}"))),
                    Err(_) => run(),
                };
                outcome.map_err(|e| format!("credential_process failed: {e}"))
            }
            Source::Role(role) => {
                let base = fetch(&role.base, limits, client)
                    .await
                    .map_err(|e| format!("source of its role: {e}"))?;
                let client = client
                    .get_or_init(sts::client)
                    .as_ref()
                    .map_err(|e| format!("AssumeRole failed: {e}"))?;
                sts::assume_role(client, &role.call, &base.credential)
                    .await
                    .map_err(|e| format!("AssumeRole failed: {e}"))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::aws_sts_fake::{self as fake, FakeSts};

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYBASEKEY";

    /// The two files, written into a temporary directory.
    struct Dir {
        _dir: tempfile::TempDir,
        files: Files,
    }

    fn dir(credentials: &str, config: &str) -> Dir {
        let d = tempfile::tempdir().unwrap();
        let (c, f) = (d.path().join("credentials"), d.path().join("config"));
        std::fs::write(&c, credentials).unwrap();
        std::fs::write(&f, config).unwrap();
        Dir {
            _dir: d,
            files: (Some(c), Some(f)),
        }
    }

    fn env(vars: &'static [(&'static str, &'static str)]) -> Env {
        Arc::new(move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    fn resolve_in(d: &Dir, name: &str, env: &Env) -> Result<Option<Source>, String> {
        let p = aws_profile::load_from(name, d.files.0.as_deref(), d.files.1.as_deref())
            .map_err(|e| e.to_string())?;
        resolve(name, &p, &d.files, env)
    }

    fn role(source: Option<Source>) -> Arc<Role> {
        match source {
            Some(Source::Role(r)) => r,
            _ => panic!("not a role"),
        }
    }

    const BASE: &str = "[base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = ";

    #[test]
    fn a_role_with_a_source_profile() {
        let d = dir(
            &format!("{BASE}{SECRET}\n"),
            "[profile r]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = base\n\
             region = ap-south-1\n",
        );
        let r = role(resolve_in(&d, "r", &env(&[])).unwrap());
        assert_eq!(r.call.role_arn, "arn:aws:iam::1:role/r");
        assert_eq!(r.call.region, "ap-south-1");
        assert_eq!(
            r.call.endpoint.as_str(),
            "https://sts.ap-south-1.amazonaws.com/"
        );
        assert_eq!(
            r.call.session_name,
            format!("h5mount-{}", std::process::id())
        );
        match &r.base {
            Source::Static(c) => assert_eq!(c.key_id, "AKIDBASE"),
            _ => panic!("base"),
        }
        // The environment's STS endpoint wins over the profile's.
        let d = dir(
            &format!("{BASE}{SECRET}\n"),
            "[profile r]\nrole_arn = a\nsource_profile = base\nsts =\n  endpoint_url = http://h:1/\n",
        );
        let r = role(resolve_in(&d, "r", &env(&[])).unwrap());
        assert_eq!(r.call.endpoint.as_str(), "http://h:1/");
        assert_eq!(r.call.region, "us-east-1");
        let r =
            role(resolve_in(&d, "r", &env(&[("AWS_ENDPOINT_URL_STS", "http://e:2/")])).unwrap());
        assert_eq!(r.call.endpoint.as_str(), "http://e:2/");
    }

    #[test]
    fn a_role_from_its_own_keys_the_environment_or_a_helper() {
        let d = dir(
            &format!("[me]\naws_access_key_id = AKIDME\naws_secret_access_key = {SECRET}\n"),
            "[profile me]\nrole_arn = a\nsource_profile = me\n\
             [profile env]\nrole_arn = a\ncredential_source = Environment\n\
             [profile helper]\ncredential_process = get-creds\n\
             [profile via]\nrole_arn = a\nsource_profile = helper\n\
             [profile none]\nregion = x\n[profile empty]\nrole_arn = a\nsource_profile = none\n",
        );
        let key = |s: &Source| match s {
            Source::Static(c) => c.key_id.clone(),
            Source::Process(p) => p.clone(),
            Source::Role(_) => "role".into(),
        };
        let r = role(resolve_in(&d, "me", &env(&[])).unwrap());
        assert_eq!(key(&r.base), "AKIDME");
        let vars = env(&[
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
        ]);
        let r = role(resolve_in(&d, "env", &vars).unwrap());
        assert_eq!(key(&r.base), "AKIDENV");
        assert_eq!(
            resolve_in(&d, "env", &env(&[])).err().unwrap(),
            "profile env has credential_source = Environment but AWS_ACCESS_KEY_ID or \
             AWS_SECRET_ACCESS_KEY is not set"
        );
        let r = role(resolve_in(&d, "via", &env(&[])).unwrap());
        assert_eq!(key(&r.base), "get-creds");
        assert_eq!(
            resolve_in(&d, "empty", &env(&[])).err().unwrap(),
            "profile empty: source_profile none has no credentials"
        );
    }

    #[test]
    fn source_profile_loops_and_long_chains_are_errors() {
        let d = dir(
            "",
            "[profile a]\nrole_arn = x\nsource_profile = b\n\
             [profile b]\nrole_arn = x\nsource_profile = c\n\
             [profile c]\nrole_arn = x\nsource_profile = a\n",
        );
        assert_eq!(
            resolve_in(&d, "a", &env(&[])).err().unwrap(),
            "profile c: source_profile makes a loop: a -> b -> c -> a"
        );
        let mut config = String::new();
        for i in 0..20 {
            config.push_str(&format!(
                "[profile p{i}]\nrole_arn = x\nsource_profile = p{}\n",
                i + 1
            ));
        }
        let d = dir("", &config);
        let e = resolve_in(&d, "p0", &env(&[])).err().unwrap();
        assert!(e.ends_with("chain longer than 8 profiles"), "{e}");
        let d = dir("", "[profile a]\nrole_arn = x\nsource_profile = gone\n");
        let e = resolve_in(&d, "a", &env(&[])).err().unwrap();
        assert!(
            e.starts_with("profile a: source_profile gone: profile gone not found"),
            "{e}"
        );
    }

    #[test]
    fn a_chain_of_roles_signs_each_call_with_the_previous_answer() {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let sts = FakeSts::start(move |_| {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            fake::answer(
                &format!("ASIA{n}"),
                &format!("secret{n}"),
                &format!("token{n}"),
                "2030-01-01T01:00:00Z",
            )
        });
        let d = dir(
            &format!("{BASE}{SECRET}\n"),
            &format!(
                "[profile inner]\nrole_arn = arn:inner\nsource_profile = base\n\
                 endpoint_url = {0}\n\
                 [profile outer]\nrole_arn = arn:outer\nsource_profile = inner\n\
                 endpoint_url = {0}\n",
                sts.url
            ),
        );
        let source = resolve_in(&d, "outer", &env(&[])).unwrap().unwrap();
        let client = StsClient::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let got = rt
            .block_on(fetch(&source, Limits::default(), &client))
            .unwrap();
        assert_eq!(got.credential.key_id, "ASIA2");
        let requests = sts.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].form("RoleArn").as_deref(), Some("arn:inner"));
        assert_eq!(requests[0].signed_by(SECRET).as_deref(), Some("AKIDBASE"));
        assert_eq!(requests[0].header("x-amz-security-token"), None);
        assert_eq!(requests[1].form("RoleArn").as_deref(), Some("arn:outer"));
        assert_eq!(requests[1].signed_by("secret1").as_deref(), Some("ASIA1"));
        assert_eq!(requests[1].header("x-amz-security-token"), Some("token1"));
        // A source that fails: the role is not asked for.
        let d = dir(
            "",
            &format!(
                "[profile helper]\ncredential_process = exit 3\n\
                 [profile r]\nrole_arn = x\nsource_profile = helper\nendpoint_url = {}\n",
                sts.url
            ),
        );
        let source = resolve_in(&d, "r", &env(&[])).unwrap().unwrap();
        let e = rt
            .block_on(fetch(&source, Limits::default(), &client))
            .unwrap_err();
        assert_eq!(
            e,
            "source of its role: credential_process failed: exited with status 3"
        );
        assert_eq!(sts.requests().len(), 2);
    }
}
