//! `-o name[=value],...`: the mount options of `mount -t fuse.h5mount`, `/etc/fstab` lines
//! and `mount.fuse3`, read through the same clap definition as the command line.
//!
//! Each option becomes the long flag of the same name with `_` for `-`: `-o cache_size=1G`
//! is `--cache-size=1G`, `-o allow_other` is `--allow-other`, `-o zarr` is `--zarr`. So an
//! option is declared once (`cli::Cli`), with its help text, type and limits, and the two
//! forms cannot differ. The flags made from `-o` are put before the command line's own
//! arguments and the whole parsed once with clap's `args_override_self`: a flag given on the
//! command line wins over the same option in `-o`, and among `-o` options, as among repeated
//! flags, the last wins.
//!
//! The options mount(8) and fstab use for their own ends ([`IGNORED`], and every name
//! beginning [`IGNORED_PREFIX`]) are accepted and ignored, with or without a value: they
//! mean nothing to a FUSE filesystem or are implied (the mount is always read-only, nodev,
//! nosuid; mount(8) passes `rw` unless `ro` is given). Any other name that is not the long
//! name of a visible option is refused.
//!
//! A refusal is one line naming the `-o` option and its value (see `cli::parse`): an unknown
//! name, a value given to an option that takes none, a value missing, or the value parser's
//! reason.

use crate::config::remote::shown;

/// The fstab and mount(8) options accepted and ignored (`comment` as `comment=...` too).
pub const IGNORED: &[&str] = &[
    "ro",
    "rw",
    "defaults",
    "auto",
    "noauto",
    "nofail",
    "_netdev",
    "user",
    "users",
    "nouser",
    "dev",
    "nodev",
    "suid",
    "nosuid",
    "exec",
    "noexec",
    "atime",
    "noatime",
    "relatime",
    "strictatime",
    "async",
    "comment",
];

/// Options whose names begin with this are accepted and ignored (`x-systemd.automount`,
/// `x-gvfs-show`, ...): fstab's convention for options of other programs.
pub const IGNORED_PREFIX: &str = "x-";

/// Whether the `-o` option named `key` is one of the ignored ones.
pub fn is_ignored(key: &str) -> bool {
    IGNORED.contains(&key) || key.starts_with(IGNORED_PREFIX)
}

/// The `-o` name of a long option: `cache-size` is `cache_size`.
pub fn o_name(long: &str) -> String {
    long.replace('-', "_")
}

/// The arguments of `cmd` that `-o` reaches: the visible ones with a long name, other than
/// `--help` and `--version`.
pub fn reachable(cmd: &clap::Command) -> impl Iterator<Item = &clap::Arg> {
    cmd.get_arguments().filter(|a| {
        a.get_long().is_some()
            && !a.is_hide_set()
            && !matches!(a.get_id().as_str(), "help" | "version")
    })
}

/// The long flag `key` names among `cmd`'s options (its long name or an alias, with `_`
/// for `-`), if any.
fn find<'a>(cmd: &'a clap::Command, key: &str) -> Option<(&'a clap::Arg, String)> {
    if key.contains('-') {
        return None;
    }
    let long = key.replace('_', "-");
    reachable(cmd)
        .find(|a| {
            a.get_long() == Some(long.as_str())
                || a.get_all_aliases()
                    .is_some_and(|al| al.contains(&long.as_str()))
        })
        .map(|a| (a, long))
}

/// One `-o` option made into a flag.
#[derive(Debug, PartialEq, Eq)]
pub struct Flag {
    /// The option as `-o` named it (`cache_size`), for messages.
    pub key: String,
    /// The argument for clap: `--cache-size=1G`, `--allow-other`.
    pub arg: String,
}

/// The flags that the `-o` arguments `lists` stand for, in order (ignored options left
/// out), or the line refusing the first that is wrong.
pub fn to_flags(cmd: &clap::Command, lists: &[String]) -> Result<Vec<Flag>, String> {
    let mut out = Vec::new();
    for opt in lists.iter().flat_map(|l| l.split(',')) {
        if opt.is_empty() {
            continue;
        }
        let (key, value) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        if is_ignored(key) {
            continue;
        }
        let Some((arg, long)) = find(cmd, key) else {
            return Err(format!("-o {}: unknown mount option", shown(opt)));
        };
        let takes_value = arg.get_action().takes_values();
        let arg = match (value, takes_value) {
            (Some(v), true) => format!("--{long}={v}"),
            (Some(v), false) => {
                return Err(format!("-o {key}={}: {key} takes no value", shown(v)));
            }
            (None, false) => format!("--{long}"),
            (None, true) if value_optional(arg) => format!("--{long}"),
            (None, true) => return Err(format!("-o {key}: needs a value (-o {key}=...)")),
        };
        out.push(Flag {
            key: key.to_string(),
            arg,
        });
    }
    Ok(out)
}

/// Whether `arg` takes a value that may be left out (`--zarr`, `--zarr=2`).
pub fn value_optional(arg: &clap::Arg) -> bool {
    arg.get_action().takes_values() && arg.get_num_args().is_some_and(|n| n.min_values() == 0)
}

/// The `-o` form of `arg` for documentation: `allow_other`, `cache_size=SIZE`,
/// `zarr[=FORMAT]`.
pub fn o_form(arg: &clap::Arg) -> Option<String> {
    let name = o_name(arg.get_long()?);
    let value = arg
        .get_value_names()
        .and_then(|v| v.first())
        .filter(|_| arg.get_action().takes_values());
    Some(match value {
        None => name,
        Some(v) if value_optional(arg) => format!("{name}[={v}]"),
        Some(v) => format!("{name}={v}"),
    })
}

/// The ignored options as documentation lists them: `ro, rw, ..., x-*`.
pub fn ignored_list() -> String {
    let mut names: Vec<String> = IGNORED.iter().map(|s| s.to_string()).collect();
    names.push(format!("{IGNORED_PREFIX}*"));
    names.join(", ")
}
