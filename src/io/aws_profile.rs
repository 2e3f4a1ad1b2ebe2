//! Named AWS profiles (`--profile NAME`), read from the same two files as the AWS CLI.
//!
//! - The shared credentials file: `$AWS_SHARED_CREDENTIALS_FILE`, else
//!   `$HOME/.aws/credentials`. A profile is a section named after it: `[NAME]`.
//! - The config file: `$AWS_CONFIG_FILE`, else `$HOME/.aws/config`. A profile is a section
//!   `[profile NAME]`; the default profile is `[default]` (`[profile default]` works too). A
//!   profile's `services = ID` setting names a `[services ID]` section of this file.
//!
//! A file that does not exist counts as empty; one that exists but cannot be read is an error.
//! When both files set a key of the profile, the credentials file wins (as in the AWS CLI).
//!
//! From a profile this module takes its credentials, `region`, and the S3 and STS
//! endpoints. Credentials are, first match winning (as in the AWS CLI):
//! - a role to assume (`role_arn`, with `source_profile` naming the profile whose
//!   credentials assume it, or `credential_source = Environment`; optional `external_id`,
//!   `role_session_name`, `duration_seconds`);
//! - static keys (`aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`);
//! - the command of `credential_process`.
//!
//! [`aws_credentials`](super::aws_credentials) turns them into credentials for requests.
//! The endpoint of a service (`s3`, `sts`) is, most specific first: `endpoint_url` under
//! `s3 =` (or `sts =`) in the profile's `[services ID]` section, the same under the profile
//! itself, then the profile's own `endpoint_url`; `ignore_configured_endpoint_urls = true`
//! turns all of them off.
//!
//! Profiles that get their credentials some other way (SSO, web identity, a role assumed
//! with an MFA code or with credentials from the instance or container metadata) are
//! refused with an error that says which kinds are supported and how to export the
//! credentials instead. Nothing here talks to the network or runs anything.
//!
//! Syntax accepted: `key = value` lines (key case-insensitive, whitespace around both
//! trimmed, the value is everything after the first `=`), full-line comments starting with
//! `#` or `;`, blank lines, and nested settings: lines indented under a key (`s3 =` followed
//! by `  endpoint_url = ...`) belong to that key. Sections repeated in one file merge, later
//! keys winning. Secret values never appear in errors or in [`Profile`]'s `Debug` output.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::io::{Error, ErrorKind, Result};
use std::path::{Path, PathBuf};

/// What a named profile says (any field may be missing).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Profile {
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    /// The `credential_process` command line, when the profile has no static keys.
    pub credential_process: Option<String>,
    /// The role to assume (which wins over the static keys and `credential_process`).
    pub role: Option<Role>,
    pub region: Option<String>,
    /// The S3 endpoint.
    pub endpoint_url: Option<String>,
    /// The STS endpoint, for assuming a role.
    pub sts_endpoint_url: Option<String>,
}

/// A role a profile assumes (`role_arn` and the settings that go with it).
#[derive(Clone, PartialEq, Eq)]
pub struct Role {
    pub role_arn: String,
    pub source: RoleSource,
    pub external_id: Option<String>,
    pub session_name: Option<String>,
    pub duration_seconds: Option<u32>,
}

/// Where the credentials that assume a role come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleSource {
    /// `source_profile = NAME` (which may be the profile itself: then its static keys).
    Profile(String),
    /// `credential_source = Environment`: `AWS_ACCESS_KEY_ID` and the rest.
    Environment,
}

impl fmt::Debug for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Role")
            .field("role_arn", &self.role_arn)
            .field("source", &self.source)
            // Shared between the account and whoever assumes the role: kept out.
            .field("external_id", &Redacted(self.external_id.is_some()))
            .field("session_name", &self.session_name)
            .field("duration_seconds", &self.duration_seconds)
            .finish()
    }
}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Profile")
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &Redacted(self.secret_access_key.is_some()),
            )
            .field("session_token", &Redacted(self.session_token.is_some()))
            // A command line may carry a secret of its own (`--token ...`).
            .field(
                "credential_process",
                &Redacted(self.credential_process.is_some()),
            )
            .field("role", &self.role)
            .field("region", &self.region)
            .field("endpoint_url", &self.endpoint_url)
            .field("sts_endpoint_url", &self.sts_endpoint_url)
            .finish()
    }
}

/// Debug form of an optional secret: whether it is there, never what it is.
struct Redacted(bool);

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0 { "Some(<redacted>)" } else { "None" })
    }
}

/// Load profile `name` from the shared credentials file and the config file, found through
/// `$AWS_SHARED_CREDENTIALS_FILE`, `$AWS_CONFIG_FILE` and `$HOME` as the AWS CLI finds them.
pub fn load(name: &str) -> Result<Profile> {
    let (credentials, config) = paths();
    load_from(name, credentials.as_deref(), config.as_deref())
}

/// The shared credentials file and the config file `load` reads (see the module docs).
pub fn paths() -> (Option<PathBuf>, Option<PathBuf>) {
    default_paths(|var| std::env::var_os(var))
}

/// Load profile `name` from the given credentials and config files, without looking at the
/// environment. `None` means there is no such file (the same as a path that does not exist).
pub fn load_from(name: &str, credentials: Option<&Path>, config: Option<&Path>) -> Result<Profile> {
    let credentials_ini = read_ini(credentials)?;
    let config_ini = read_ini(config)?;
    let from_credentials = credentials_ini.merged(|header| header == name);
    let from_config = config_ini.merged(|header| config_profile_name(header) == Some(name));
    if from_credentials.is_none() && from_config.is_none() {
        return Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "profile {name} not found in {} or {}",
                shown(credentials, "credentials"),
                shown(config, "config")
            ),
        ));
    }
    let mut settings = from_config.unwrap_or_default();
    settings.extend(from_credentials.unwrap_or_default());
    resolve(name, &settings, &config_ini)
}

/// The credentials and config file paths the AWS CLI would use, given a way to read
/// environment variables (empty variables count as unset; a leading `~` means `$HOME`).
fn default_paths(env: impl Fn(&str) -> Option<OsString>) -> (Option<PathBuf>, Option<PathBuf>) {
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let pick = |var: &str, file: &str| match env(var).filter(|v| !v.is_empty()) {
        Some(path) => Some(expand_home(PathBuf::from(path), home.as_deref())),
        None => home.as_ref().map(|h| h.join(".aws").join(file)),
    };
    (
        pick("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
        pick("AWS_CONFIG_FILE", "config"),
    )
}

/// `~/x` → `$HOME/x` (other paths, and all paths when the home is unknown, unchanged).
fn expand_home(path: PathBuf, home: Option<&Path>) -> PathBuf {
    match (home, path.strip_prefix("~")) {
        (Some(home), Ok(rest)) => home.join(rest),
        _ => path,
    }
}

/// A path for a message, or what is missing when there is none.
fn shown(path: Option<&Path>, what: &str) -> String {
    path.map_or_else(|| format!("(no {what} file)"), |p| p.display().to_string())
}

/// Keys that make a profile get credentials in a way not supported (SSO, web identity), or
/// that only mean something with `role_arn`. Any other `sso_*` key counts too.
const UNSUPPORTED_KEYS: [&str; 5] = [
    "web_identity_token_file",
    "credential_source",
    "source_profile",
    "sso_session",
    "login_session",
];

/// How to go on when a profile's kind is not supported.
const EXPORT_HINT: &str = "export temporary credentials to the environment and run without \
                           --profile, for example: eval \"$(aws configure export-credentials \
                           --profile";

/// Turn the merged settings of profile `name` into a [`Profile`], refusing incomplete and
/// unsupported credentials. `config` is the config file, for `[services ID]` sections.
fn resolve(name: &str, settings: &Settings, config: &Ini) -> Result<Profile> {
    let get = |key: &str| {
        settings
            .get(key)
            .map(|s| s.value.clone())
            .filter(|v| !v.is_empty())
    };
    let access_key_id = get("aws_access_key_id");
    let secret_access_key = get("aws_secret_access_key");
    // `aws_security_token` is the older name the AWS CLI still reads.
    let session_token = get("aws_session_token").or_else(|| get("aws_security_token"));
    let credential_process = get("credential_process");
    let role = role_of(name, &get)?;
    let dynamic = UNSUPPORTED_KEYS
        .iter()
        .copied()
        .find(|k| settings.contains_key(*k))
        .or_else(|| {
            settings
                .keys()
                .map(String::as_str)
                .find(|k| k.starts_with("sso_"))
        });
    let invalid = |msg: String| Error::new(ErrorKind::InvalidData, msg);
    match (&access_key_id, &secret_access_key) {
        (Some(_), None) => {
            return Err(invalid(format!(
                "profile {name} has aws_access_key_id but no aws_secret_access_key"
            )))
        }
        (None, Some(_)) => {
            return Err(invalid(format!(
                "profile {name} has aws_secret_access_key but no aws_access_key_id"
            )))
        }
        (None, None) if role.is_some() => {}
        (None, None) => {
            if let Some(key) = dynamic {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "profile {name} gets its credentials through {key}, which is not \
                         supported (static keys, credential_process and role_arn with \
                         source_profile are); {EXPORT_HINT} {name} --format env)\""
                    ),
                ));
            }
            if session_token.is_some() && credential_process.is_none() {
                return Err(invalid(format!(
                    "profile {name} has aws_session_token but no aws_access_key_id or \
                     aws_secret_access_key"
                )));
            }
        }
        (Some(_), Some(_)) => {
            let ignored = dynamic.or(credential_process.as_ref().map(|_| "credential_process"));
            if let Some(key) = ignored.filter(|_| role.is_none()) {
                log::warn!("profile {name}: using its static keys, ignoring {key}");
            }
        }
    }
    // The static keys win over credential_process, as in the AWS CLI's credentials file.
    let static_keys = access_key_id.is_some();
    // The key id and the token travel in request headers (the secret only signs).
    for (key, value) in [
        ("aws_access_key_id", &access_key_id),
        ("aws_session_token", &session_token),
    ] {
        if value.as_deref().is_some_and(|v| !header_safe(v)) {
            return Err(invalid(format!(
                "profile {name}: {key} holds characters other than printable ASCII"
            )));
        }
    }

    let ignore_endpoints = get("ignore_configured_endpoint_urls")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let services = get("services")
        .and_then(|id| config.merged(|header| prefixed(header, "services") == Some(&id)));
    let endpoint = |service: &str| {
        let nested = |settings: &Settings| {
            settings
                .get(service)
                .and_then(|s| s.nested.get("endpoint_url"))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        if ignore_endpoints {
            return None;
        }
        services
            .as_ref()
            .and_then(nested)
            .or_else(|| nested(settings))
            .or_else(|| get("endpoint_url"))
    };

    Ok(Profile {
        access_key_id,
        secret_access_key,
        session_token,
        credential_process: credential_process.filter(|_| !static_keys),
        role,
        region: get("region"),
        endpoint_url: endpoint("s3"),
        sts_endpoint_url: endpoint("sts"),
    })
}

/// The role profile `name` assumes, if it has `role_arn` (`get` reads its settings).
fn role_of(name: &str, get: &dyn Fn(&str) -> Option<String>) -> Result<Option<Role>> {
    let Some(role_arn) = get("role_arn") else {
        return Ok(None);
    };
    let invalid = |what: &str| Error::new(ErrorKind::InvalidData, format!("profile {name} {what}"));
    let unsupported = |how: &str| {
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "profile {name} assumes its role {how}, which is not supported (source_profile \
                 and credential_source = Environment are); {EXPORT_HINT} {name} --format env)\""
            ),
        )
    };
    if get("mfa_serial").is_some() {
        return Err(unsupported("with an MFA code (mfa_serial)"));
    }
    let source = match (get("source_profile"), get("credential_source")) {
        (Some(_), Some(_)) => return Err(invalid("has both source_profile and credential_source")),
        (Some(profile), None) => RoleSource::Profile(profile),
        (None, Some(s)) if s.eq_ignore_ascii_case("Environment") => RoleSource::Environment,
        (None, Some(s))
            if s.eq_ignore_ascii_case("Ec2InstanceMetadata")
                || s.eq_ignore_ascii_case("EcsContainer") =>
        {
            return Err(unsupported(&format!("with credentials from {s}")))
        }
        (None, Some(_)) => {
            return Err(invalid(
                "has a credential_source other than Environment, Ec2InstanceMetadata or \
                 EcsContainer",
            ))
        }
        (None, None) if get("web_identity_token_file").is_some() => {
            return Err(unsupported(
                "through web identity (web_identity_token_file)",
            ))
        }
        (None, None) => {
            return Err(invalid(
                "has role_arn but no source_profile or credential_source",
            ))
        }
    };
    let duration_seconds = match get("duration_seconds") {
        None => None,
        Some(v) => Some(
            v.trim()
                .parse::<u32>()
                .ok()
                .filter(|d| (900..=43_200).contains(d))
                .ok_or_else(|| {
                    invalid("has a duration_seconds that is not a number from 900 to 43200")
                })?,
        ),
    };
    Ok(Some(Role {
        role_arn,
        source,
        external_id: get("external_id"),
        session_name: get("role_session_name"),
        duration_seconds,
    }))
}

/// Whether a key id or token can go into a request header as it is: printable ASCII, no
/// spaces (what AWS issues).
pub(crate) fn header_safe(value: &str) -> bool {
    value.bytes().all(|b| b.is_ascii_graphic())
}

/// The profile a config-file section header (already trimmed) stands for: `default`, or
/// `profile NAME`.
fn config_profile_name(header: &str) -> Option<&str> {
    if header == "default" {
        Some(header)
    } else {
        prefixed(header, "profile")
    }
}

/// `NAME` of a header `KIND NAME` (any whitespace between, `NAME` may be in double quotes).
fn prefixed<'a>(header: &'a str, kind: &str) -> Option<&'a str> {
    let rest = header.strip_prefix(kind)?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let name = rest.trim();
    Some(
        name.strip_prefix('"')
            .and_then(|n| n.strip_suffix('"'))
            .unwrap_or(name),
    )
}

/// One `key = value` setting and the settings indented under it.
#[derive(Clone, Debug, Default)]
struct Setting {
    value: String,
    nested: BTreeMap<String, String>,
}

/// The settings of a section, by lower-case key.
type Settings = BTreeMap<String, Setting>;

/// A parsed INI file: its sections in file order, by trimmed header text.
#[derive(Debug, Default)]
struct Ini {
    sections: Vec<(String, Settings)>,
}

impl Ini {
    /// The settings of all sections whose header `wanted` accepts, merged in file order
    /// (later keys win); `None` if there is no such section.
    fn merged(&self, mut wanted: impl FnMut(&str) -> bool) -> Option<Settings> {
        let mut found: Option<Settings> = None;
        for (header, settings) in &self.sections {
            if wanted(header) {
                found
                    .get_or_insert_with(Settings::new)
                    .extend(settings.iter().map(|(k, s)| (k.clone(), s.clone())));
            }
        }
        found
    }
}

/// Read and parse the file at `path`; no path or no file is an empty file.
fn read_ini(path: Option<&Path>) -> Result<Ini> {
    let Some(path) = path else {
        return Ok(Ini::default());
    };
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text).map_err(|(line, what)| {
            Error::new(
                ErrorKind::InvalidData,
                format!("{}, line {line}: {what}", path.display()),
            )
        }),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            Ok(Ini::default())
        }
        Err(e) => Err(Error::new(
            e.kind(),
            format!("cannot read {}: {e}", path.display()),
        )),
    }
}

/// Parse INI text. Errors give the line number and what is wrong, never the line itself
/// (it may hold a secret).
fn parse(text: &str) -> std::result::Result<Ini, (usize, &'static str)> {
    const NOT_A_SETTING: &str = "expected `key = value`";
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut ini = Ini::default();
    // The last key of the current section and its indentation: lines indented deeper
    // belong to it.
    let mut parent: Option<(String, usize)> = None;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let body = line.trim_start();
        let indent = line.len() - body.len();
        let body = body.trim_end();
        if body.is_empty() || body.starts_with(['#', ';']) {
            continue;
        }
        if let Some((key, key_indent)) = &parent {
            if indent > *key_indent {
                // `key = value` under a key is a nested setting; other indented lines
                // continue a multi-line value, which none of the settings used here has.
                if let Some((k, v)) = body.split_once('=') {
                    let k = k.trim().to_ascii_lowercase();
                    if k.is_empty() {
                        return Err((number, NOT_A_SETTING));
                    }
                    if let Some(setting) = ini
                        .sections
                        .last_mut()
                        .and_then(|(_, settings)| settings.get_mut(key))
                    {
                        setting.nested.insert(k, v.trim().to_string());
                    }
                }
                continue;
            }
        }
        if let Some(rest) = body.strip_prefix('[') {
            let Some((header, after)) = rest.split_once(']') else {
                return Err((number, "section header without a closing `]`"));
            };
            let after = after.trim_start();
            if !(after.is_empty() || after.starts_with(['#', ';'])) {
                return Err((number, "unexpected text after the section header"));
            }
            ini.sections
                .push((header.trim().to_string(), Settings::new()));
            parent = None;
            continue;
        }
        let Some((_, settings)) = ini.sections.last_mut() else {
            return Err((number, "setting before the first section header"));
        };
        let Some((k, v)) = body.split_once('=') else {
            return Err((number, NOT_A_SETTING));
        };
        let k = k.trim().to_ascii_lowercase();
        if k.is_empty() {
            return Err((number, NOT_A_SETTING));
        }
        settings.insert(
            k.clone(),
            Setting {
                value: v.trim().to_string(),
                nested: BTreeMap::new(),
            },
        );
        parent = Some((k, indent));
    }
    Ok(ini)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const TOKEN: &str = "FwoGZXIvYXdzEXAMPLETOKEN==";

    /// Write the two files (an empty string: no file) into a temporary directory and load
    /// profile `name` from them.
    fn load_texts(name: &str, credentials: &str, config: &str) -> Result<Profile> {
        let dir = tempfile::tempdir().unwrap();
        let cred_path = dir.path().join("credentials");
        let config_path = dir.path().join("config");
        if !credentials.is_empty() {
            std::fs::write(&cred_path, credentials).unwrap();
        }
        if !config.is_empty() {
            std::fs::write(&config_path, config).unwrap();
        }
        load_from(name, Some(&cred_path), Some(&config_path))
    }

    fn err_text(result: Result<Profile>) -> (ErrorKind, String) {
        let e = result.unwrap_err();
        let text = e.to_string();
        assert!(!text.contains(SECRET) && !text.contains(TOKEN), "{text}");
        (e.kind(), text)
    }

    #[test]
    fn default_profile_from_credentials_file() {
        let creds = format!(
            "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = {SECRET}\n\
             aws_session_token = {TOKEN}\n\n[other]\naws_access_key_id = AKIDOTHER\n\
             aws_secret_access_key = x\n"
        );
        let p = load_texts("default", &creds, "").unwrap();
        assert_eq!(
            p,
            Profile {
                access_key_id: Some("AKIDDEFAULT".into()),
                secret_access_key: Some(SECRET.into()),
                session_token: Some(TOKEN.into()),
                credential_process: None,
                role: None,
                region: None,
                endpoint_url: None,
                sts_endpoint_url: None,
            }
        );
    }

    #[test]
    fn named_profile_with_region_from_config() {
        let creds = format!(
            "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = a\n\
             [dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = {SECRET}\n"
        );
        let config = "[default]\nregion = us-east-1\n[profile dev]\nregion = eu-west-3\n";
        let p = load_texts("dev", &creds, config).unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKIDDEV"));
        assert_eq!(p.secret_access_key.as_deref(), Some(SECRET));
        assert_eq!(p.session_token, None);
        assert_eq!(p.region.as_deref(), Some("eu-west-3"));
        let p = load_texts("default", &creds, config).unwrap();
        assert_eq!(p.region.as_deref(), Some("us-east-1"));
    }

    #[test]
    fn config_sections_need_the_profile_prefix() {
        let config = format!(
            "[profile  x ]\naws_access_key_id = AKIDX\naws_secret_access_key = {SECRET}\n\
             region = ap-south-1\n[y]\nregion = nowhere\n[profile \"quoted name\"]\nregion = q\n"
        );
        let p = load_texts("x", "", &config).unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKIDX"));
        assert_eq!(p.secret_access_key.as_deref(), Some(SECRET));
        assert_eq!(p.region.as_deref(), Some("ap-south-1"));
        // `[y]` in the config file is not profile y; `[profiley]` is not either.
        let (kind, _) = err_text(load_texts("y", "", &config));
        assert_eq!(kind, ErrorKind::NotFound);
        let (kind, _) = err_text(load_texts("y", "", "[profiley]\nregion = r\n"));
        assert_eq!(kind, ErrorKind::NotFound);
        let p = load_texts("quoted name", "", &config).unwrap();
        assert_eq!(p.region.as_deref(), Some("q"));
        // In the credentials file the header is the name itself.
        let (kind, _) = err_text(load_texts("x", "[profile x]\nregion = r\n", ""));
        assert_eq!(kind, ErrorKind::NotFound);
    }

    #[test]
    fn default_written_as_profile_default() {
        let p = load_texts("default", "", "[profile default]\nregion = sa-east-1\n").unwrap();
        assert_eq!(p.region.as_deref(), Some("sa-east-1"));
        let p = load_texts("default", "", "[default]\nregion = sa-east-1\n").unwrap();
        assert_eq!(p.region.as_deref(), Some("sa-east-1"));
    }

    #[test]
    fn credentials_file_wins_over_config() {
        let creds = format!(
            "[p]\naws_access_key_id = AKIDCREDS\naws_secret_access_key = {SECRET}\n\
             region = us-west-2\n"
        );
        let config = "[profile p]\naws_access_key_id = AKIDCONFIG\n\
                      aws_secret_access_key = fromconfig\naws_session_token = tok\n\
                      region = eu-central-1\nendpoint_url = http://config:9000\n";
        let p = load_texts("p", &creds, config).unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKIDCREDS"));
        assert_eq!(p.secret_access_key.as_deref(), Some(SECRET));
        // Keys only the config file sets still count.
        assert_eq!(p.session_token.as_deref(), Some("tok"));
        assert_eq!(p.region.as_deref(), Some("us-west-2"));
        assert_eq!(p.endpoint_url.as_deref(), Some("http://config:9000"));
        // Region from the credentials file alone.
        let p = load_texts("p", &creds, "").unwrap();
        assert_eq!(p.region.as_deref(), Some("us-west-2"));
    }

    #[test]
    fn comments_blank_lines_whitespace_and_key_case() {
        let creds = format!(
            "# a comment\n; another\n\n  [default]   # trailing comment\n\
             \tAWS_Access_Key_ID\t=   AKIDCASE   \n\n   # indented comment\n\
             ; aws_access_key_id = AKIDCOMMENTED\n\
             Aws_Secret_Access_Key={SECRET}\n#region = commented-out\n"
        );
        let p = load_texts("default", &creds, "").unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKIDCASE"));
        assert_eq!(p.secret_access_key.as_deref(), Some(SECRET));
        assert_eq!(p.region, None);
    }

    #[test]
    fn crlf_line_ends_and_byte_order_mark() {
        let creds = format!(
            "\u{feff}[default]\r\naws_access_key_id = AKIDCRLF\r\n\
             aws_secret_access_key = {SECRET}\r\n"
        );
        let p = load_texts("default", &creds, "").unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKIDCRLF"));
        assert_eq!(p.secret_access_key.as_deref(), Some(SECRET));
    }

    #[test]
    fn nested_s3_endpoint_url() {
        let config = "[profile minio]\nregion = us-east-1\ns3 =\n  addressing_style = path\n\
                      \n  endpoint_url = http://localhost:9000\nec2 =\n  \
                      endpoint_url = http://ec2.invalid\n";
        let p = load_texts("minio", "", config).unwrap();
        assert_eq!(p.endpoint_url.as_deref(), Some("http://localhost:9000"));
        // Nested settings do not leak out to the profile.
        assert_eq!(p.region.as_deref(), Some("us-east-1"));

        // The nested S3 endpoint beats the profile-wide one, in either order.
        let config = "[profile a]\nendpoint_url = http://global\ns3 =\n endpoint_url = http://s3\n\
                      [profile b]\ns3 =\n\tendpoint_url = http://s3\nendpoint_url = http://global\n";
        for name in ["a", "b"] {
            let p = load_texts(name, "", config).unwrap();
            assert_eq!(p.endpoint_url.as_deref(), Some("http://s3"), "{name}");
        }

        // Only another service's endpoint: the profile-wide one.
        let config =
            "[profile c]\nendpoint_url = http://global\nec2 =\n  endpoint_url = http://e\n";
        let p = load_texts("c", "", config).unwrap();
        assert_eq!(p.endpoint_url.as_deref(), Some("http://global"));

        // An indented line right after a header is an ordinary setting.
        let p = load_texts("d", "", "[profile d]\n  endpoint_url = http://d\n").unwrap();
        assert_eq!(p.endpoint_url.as_deref(), Some("http://d"));
    }

    #[test]
    fn services_section_endpoint_and_ignore_switch() {
        let config = "[profile s]\nservices = local\nendpoint_url = http://global\n\
                      [services local]\ns3 =\n  endpoint_url = http://from-services:9000\n";
        let p = load_texts("s", "", config).unwrap();
        assert_eq!(p.endpoint_url.as_deref(), Some("http://from-services:9000"));

        let ignored = format!(
            "{config}[profile i]\nservices = local\nendpoint_url = http://g\n\
                               ignore_configured_endpoint_urls = True\n"
        );
        let p = load_texts("i", "", &ignored).unwrap();
        assert_eq!(p.endpoint_url, None);
    }

    #[test]
    fn missing_profile_error_names_both_files() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("credentials");
        let config = dir.path().join("config");
        std::fs::write(&creds, "[default]\nregion = r\n").unwrap();
        // The config file does not exist: that is fine, and the profile is just not found.
        let e = load_from("nope", Some(&creds), Some(&config)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(
            e.to_string(),
            format!(
                "profile nope not found in {} or {}",
                creds.display(),
                config.display()
            )
        );
        let e = load_from("nope", None, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "profile nope not found in (no credentials file) or (no config file)"
        );
        // An empty section still makes a profile, with nothing in it.
        std::fs::write(&config, "[profile empty]\n").unwrap();
        let p = load_from("empty", Some(&creds), Some(&config)).unwrap();
        assert_eq!(p, Profile::default());
    }

    #[test]
    fn unreadable_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be cannot be read as one.
        let e = load_from("default", Some(dir.path()), None).unwrap_err();
        assert!(
            e.to_string().contains(&dir.path().display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn half_credentials() {
        let creds = "[p]\naws_access_key_id = AKIDHALF\n";
        let (kind, text) = err_text(load_texts("p", creds, ""));
        assert_eq!(kind, ErrorKind::InvalidData);
        assert_eq!(
            text,
            "profile p has aws_access_key_id but no aws_secret_access_key"
        );

        let creds = format!("[p]\naws_secret_access_key = {SECRET}\n");
        let (_, text) = err_text(load_texts("p", &creds, ""));
        assert_eq!(
            text,
            "profile p has aws_secret_access_key but no aws_access_key_id"
        );

        // An empty value counts as missing.
        let creds = "[p]\naws_access_key_id = AKID\naws_secret_access_key =\n";
        let (_, text) = err_text(load_texts("p", creds, ""));
        assert!(text.contains("no aws_secret_access_key"), "{text}");

        // A session token alone is no credential either.
        let creds = format!("[p]\naws_session_token = {TOKEN}\n");
        let (_, text) = err_text(load_texts("p", &creds, ""));
        assert!(text.contains("aws_session_token"), "{text}");
    }

    #[test]
    fn role_profiles() {
        let config = "[profile base]\nregion = us-east-1\n[profile role]\nregion = eu-west-1\n\
                      role_arn = arn:aws:iam::123456789012:role/reader\nsource_profile = base\n\
                      external_id = ext-1\nrole_session_name = lab\nduration_seconds = 3600\n\
                      sts =\n  endpoint_url = http://127.0.0.1:9/sts\n";
        let p = load_texts("role", "", config).unwrap();
        assert_eq!(
            p.role,
            Some(Role {
                role_arn: "arn:aws:iam::123456789012:role/reader".into(),
                source: RoleSource::Profile("base".into()),
                external_id: Some("ext-1".into()),
                session_name: Some("lab".into()),
                duration_seconds: Some(3600),
            })
        );
        assert_eq!(
            p.sts_endpoint_url.as_deref(),
            Some("http://127.0.0.1:9/sts")
        );
        assert_eq!(p.endpoint_url, None);
        let text = format!("{p:?}");
        assert!(!text.contains("ext-1") && text.contains("external_id: Some(<redacted>)"));

        let config = "[profile env]\nrole_arn = arn:aws:iam::1:role/r\n\
                      credential_source = Environment\n";
        let p = load_texts("env", "", config).unwrap();
        assert_eq!(p.role.unwrap().source, RoleSource::Environment);

        // With static keys too, the role wins; the keys stay, for a source_profile naming
        // the profile itself.
        let creds =
            format!("[role]\naws_access_key_id = AKIDSTATIC\naws_secret_access_key = {SECRET}\n");
        let config = "[profile role]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = role\n";
        let p = load_texts("role", &creds, config).unwrap();
        assert_eq!(p.role.unwrap().source, RoleSource::Profile("role".into()));
        assert_eq!(p.access_key_id.as_deref(), Some("AKIDSTATIC"));
    }

    #[test]
    fn malformed_role_profiles() {
        let cases = [
            (
                "role_arn = a\n",
                "has role_arn but no source_profile or credential_source",
            ),
            (
                "role_arn = a\nsource_profile = b\ncredential_source = Environment\n",
                "has both source_profile and credential_source",
            ),
            (
                "role_arn = a\ncredential_source = Moon\n",
                "has a credential_source other than Environment",
            ),
            (
                "role_arn = a\nsource_profile = b\nduration_seconds = 60\n",
                "has a duration_seconds that is not a number from 900 to 43200",
            ),
        ];
        for (settings, want) in cases {
            let config = format!("[profile r]\n{settings}");
            let (kind, text) = err_text(load_texts("r", "", &config));
            assert_eq!(kind, ErrorKind::InvalidData, "{text}");
            assert!(text.starts_with(&format!("profile r {want}")), "{text}");
        }
    }

    #[test]
    fn unsupported_profile_kinds_say_what_is_supported() {
        let hint = "aws configure export-credentials --profile x --format env";
        let cases = [
            ("role_arn = arn:aws:iam::123456789012:role/r\nsource_profile = b\nmfa_serial = m\n", "MFA code (mfa_serial)"),
            ("role_arn = a\ncredential_source = Ec2InstanceMetadata\n", "credentials from Ec2InstanceMetadata"),
            ("role_arn = a\nweb_identity_token_file = /t\n", "web identity"),
            ("sso_start_url = https://example.awsapps.com/start\nsso_account_id = 123456789012\n", "sso_account_id"),
            ("sso_session = corp\n", "sso_session"),
            ("source_profile = b\n", "source_profile"),
        ];
        for (settings, want) in cases {
            let config = format!("[profile x]\n{settings}");
            let (kind, text) = err_text(load_texts("x", "", &config));
            assert_eq!(kind, ErrorKind::Unsupported, "{text}");
            assert!(text.starts_with("profile x "), "{text}");
            assert!(text.contains(want) && text.contains(hint), "{text}");
            assert!(text.contains("source_profile"), "{text}");
            assert!(!text.contains("123456789012"), "{text}");
            assert_eq!(text.lines().count(), 1);
        }
    }

    #[test]
    fn credential_process_profiles() {
        let config = "[profile proc]\nregion = eu-west-1\n\
                      credential_process = /usr/bin/get-creds --json \"a = b\"\n";
        let p = load_texts("proc", "", config).unwrap();
        assert_eq!(
            p.credential_process.as_deref(),
            Some("/usr/bin/get-creds --json \"a = b\"")
        );
        assert_eq!(p.access_key_id, None);
        assert_eq!(p.region.as_deref(), Some("eu-west-1"));
        // Static keys win, as in the AWS CLI's credentials file; the command is dropped.
        let creds =
            format!("[proc]\naws_access_key_id = AKIDS\naws_secret_access_key = {SECRET}\n");
        let p = load_texts("proc", &creds, config).unwrap();
        assert_eq!(p.access_key_id.as_deref(), Some("AKIDS"));
        assert_eq!(p.credential_process, None);
        // A role wins over it.
        let config = "[profile proc]\ncredential_process = x\nrole_arn = arn:aws:iam::1:role/r\n\
                      source_profile = other\n";
        let p = load_texts("proc", "", config).unwrap();
        assert!(p.role.is_some());
    }

    #[test]
    fn keys_a_header_cannot_carry_are_refused() {
        let creds =
            format!("[p]\naws_access_key_id = AKID\u{1}X\naws_secret_access_key = {SECRET}\n");
        let (_, text) = err_text(load_texts("p", &creds, ""));
        assert_eq!(
            text,
            "profile p: aws_access_key_id holds characters other than printable ASCII"
        );
        let creds = format!(
            "[p]\naws_access_key_id = AKID\naws_secret_access_key = {SECRET}\n\
             aws_session_token = tok\u{e9}n\n"
        );
        let (_, text) = err_text(load_texts("p", &creds, ""));
        assert!(text.contains("aws_session_token"), "{text}");
        // The secret only signs: any text will do.
        let creds = "[p]\naws_access_key_id = AKID\naws_secret_access_key = s\u{e9} cr\u{1}t\n";
        assert!(load_texts("p", creds, "").is_ok());
    }

    #[test]
    fn debug_redacts_secrets() {
        let p = Profile {
            access_key_id: Some("AKIDVISIBLE".into()),
            secret_access_key: Some(SECRET.into()),
            session_token: Some(TOKEN.into()),
            credential_process: Some(format!("get-creds --token {TOKEN}")),
            role: None,
            region: Some("us-east-1".into()),
            endpoint_url: Some("http://localhost:9000".into()),
            sts_endpoint_url: None,
        };
        for text in [format!("{p:?}"), format!("{p:#?}")] {
            assert!(!text.contains(SECRET) && !text.contains(TOKEN), "{text}");
            assert!(text.contains("AKIDVISIBLE"), "{text}");
            assert!(text.contains("us-east-1"), "{text}");
            assert!(text.contains("http://localhost:9000"), "{text}");
            assert!(
                text.contains("secret_access_key: Some(<redacted>)"),
                "{text}"
            );
            assert!(
                text.contains("credential_process: Some(<redacted>)"),
                "{text}"
            );
        }
        let text = format!("{:?}", Profile::default());
        assert!(text.contains("secret_access_key: None"), "{text}");
        assert!(text.contains("session_token: None"), "{text}");
    }

    #[test]
    fn values_may_contain_equals_signs() {
        let creds = "[p]\naws_access_key_id = AKIDEQ\naws_secret_access_key = ab==cd=\n\
                     aws_session_token=IQoJb3JpZ2luX2VjEA==\n";
        let config = "[profile p]\nendpoint_url = http://host:9000/?a=b\ns3 =\n  \
                      endpoint_url = http://s3:9000/?x=y=z\n";
        let p = load_texts("p", creds, config).unwrap();
        assert_eq!(p.secret_access_key.as_deref(), Some("ab==cd="));
        assert_eq!(p.session_token.as_deref(), Some("IQoJb3JpZ2luX2VjEA=="));
        assert_eq!(p.endpoint_url.as_deref(), Some("http://s3:9000/?x=y=z"));
    }

    #[test]
    fn malformed_lines_are_errors_without_their_text() {
        let creds = format!("[p]\naws_access_key_id = AKID\naws_secret_access_key {SECRET}\n");
        let (kind, text) = err_text(load_texts("p", &creds, ""));
        assert_eq!(kind, ErrorKind::InvalidData);
        assert!(text.contains("line 3"), "{text}");
        let (_, text) = err_text(load_texts("p", &format!("key = {SECRET}\n[p]\n"), ""));
        assert!(text.contains("line 1"), "{text}");
        let (_, text) = err_text(load_texts("p", "[p\n", ""));
        assert!(text.contains("line 1"), "{text}");
    }

    #[test]
    fn repeated_sections_merge() {
        let config =
            "[profile p]\nregion = one\nendpoint_url = http://e\n[profile p]\nregion = two\n";
        let p = load_texts("p", "", config).unwrap();
        assert_eq!(p.region.as_deref(), Some("two"));
        assert_eq!(p.endpoint_url.as_deref(), Some("http://e"));
    }

    #[test]
    fn file_locations_from_the_environment() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(
            default_paths(env(&[("HOME", "/home/u")])),
            (
                Some(PathBuf::from("/home/u/.aws/credentials")),
                Some(PathBuf::from("/home/u/.aws/config"))
            )
        );
        assert_eq!(
            default_paths(env(&[
                ("HOME", "/home/u"),
                ("AWS_SHARED_CREDENTIALS_FILE", "/etc/creds"),
                ("AWS_CONFIG_FILE", "~/cfg/aws"),
            ])),
            (
                Some(PathBuf::from("/etc/creds")),
                Some(PathBuf::from("/home/u/cfg/aws"))
            )
        );
        // Empty variables count as unset; without a home there are no default files.
        assert_eq!(
            default_paths(env(&[("AWS_CONFIG_FILE", ""), ("HOME", "")])),
            (None, None)
        );
        assert_eq!(
            default_paths(env(&[("AWS_CONFIG_FILE", "/c")])),
            (None, Some(PathBuf::from("/c")))
        );
    }
}
