//! `docs/configuration.md`, written from the command line definition: every option of the
//! mount command with its flag and `-o` forms, its value, default and help text, the fstab
//! options accepted and ignored, and the options of each subcommand.
//!
//! The page is committed; a test ([`super::tests`]) fails when it differs from what this
//! writes, and prints the command that writes it again ([`REGENERATE`]).

use std::fmt::Write;

use crate::cli::mount_options;

/// The command that writes the page again.
pub const REGENERATE: &str = "cargo run -- generate-docs --configuration docs/configuration.md";

/// Where the page lives in the tree.
#[cfg(test)]
pub const PATH: &str = "docs/configuration.md";

/// The page for the definition `cmd` (as `cli::command()` gives it).
pub fn markdown(cmd: &clap::Command) -> String {
    let mut cmd = cmd.clone();
    cmd.build();
    let mut out = String::new();
    let _ = write!(
        out,
        "# Configuration\n\n\
         <!-- Written from the command line definition (src/cli.rs) by `{REGENERATE}`; \
         a test fails when it differs. Do not edit by hand. -->\n\n\
         ```\n\
         h5mount [OPTIONS] SOURCE MOUNTPOINT [-o OPT[,OPT...]]\n\
         h5mount inspect [OPTIONS] FILE [PATH]\n\
         h5mount refs [OPTIONS] FILE [PATH]\n\
         ```\n\n\
         Every option of a mount is a flag and an `-o` mount option of the same name with \
         `_` for `-`: `--cache-size 1G` is `-o cache_size=1G`, `--allow-other` is \
         `-o allow_other`. `-o` is the form `mount -t fuse.h5mount`, `/etc/fstab` lines and \
         systemd mount units use. A flag given on the command line wins over the same option \
         in `-o`; among `-o` options, as among repeated flags, the last wins. A refused value \
         stops h5mount with one line naming the option and the value, and exit status 2.\n"
    );
    arguments(&mut out, &cmd);
    options(&mut out, &cmd, None);
    let _ = write!(
        out,
        "\n## fstab options\n\n\
         Accepted in `-o` and ignored, with or without a value: {}. They are mount(8)'s and \
         fstab's own, or implied: the mount is always read-only, `nodev` and `nosuid`, and \
         mount(8) passes `rw` unless `ro` is given. Any other `-o` option that is not \
         listed above is refused.\n",
        mount_options::IGNORED
            .iter()
            .map(|n| format!("`{n}`"))
            .chain([format!("`{}*`", mount_options::IGNORED_PREFIX)])
            .collect::<Vec<_>>()
            .join(", ")
    );
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let _ = write!(out, "\n## `h5mount {}`\n\n", sub.get_name());
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            let _ = writeln!(out, "{about}");
        }
        arguments(&mut out, sub);
        options(&mut out, sub, Some(&cmd));
    }
    out
}

/// The positional arguments of `cmd`.
fn arguments(out: &mut String, cmd: &clap::Command) {
    let positionals: Vec<_> = cmd.get_positionals().filter(|a| !a.is_hide_set()).collect();
    if positionals.is_empty() {
        return;
    }
    out.push('\n');
    for a in positionals {
        let name = a
            .get_value_names()
            .and_then(|v| v.first())
            .map_or_else(|| a.get_id().as_str().to_uppercase(), |v| v.to_string());
        let help = a.get_long_help().or(a.get_help()).map(|h| h.to_string());
        let (text, default) = split_default(&help.unwrap_or_default());
        let default = default
            .map(|d| format!(" Default: {d}."))
            .unwrap_or_default();
        let _ = writeln!(out, "- `{name}`: {text}{default}");
    }
}

/// The options of `cmd`, by help heading in the order of the definition. The mount
/// command's (`mount` is `None`) come with their `-o` forms; a subcommand's that are the
/// mount command's too are only named.
fn options(out: &mut String, cmd: &clap::Command, mount: Option<&clap::Command>) {
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_positional() && !a.is_hide_set())
        .collect();
    let shared = |a: &clap::Arg| {
        mount.is_some_and(|m| {
            a.get_long().is_some()
                && !matches!(a.get_id().as_str(), "help" | "version")
                && m.get_arguments()
                    .any(|b| b.get_id() == a.get_id() && b.get_help() == a.get_help())
        })
    };
    let mut headings: Vec<Option<&str>> = Vec::new();
    for a in &args {
        if !headings.contains(&a.get_help_heading()) {
            headings.push(a.get_help_heading());
        }
    }
    let level = if mount.is_none() { "##" } else { "###" };
    for heading in headings {
        let _ = write!(out, "\n{level} {}\n", heading.unwrap_or("Other options"));
        let of_heading = || args.iter().filter(|a| a.get_help_heading() == heading);
        let named: Vec<String> = of_heading()
            .filter(|a| shared(a))
            .filter_map(|a| a.get_long().map(|l| format!("`--{l}`")))
            .collect();
        if !named.is_empty() {
            let _ = write!(out, "\nAs for a mount: {}.\n", named.join(", "));
        }
        for a in of_heading().filter(|a| !shared(a)) {
            option(out, a, mount.is_none());
        }
    }
}

/// One option: its forms, then its help, then its default.
fn option(out: &mut String, a: &clap::Arg, with_o: bool) {
    let mut forms: Vec<String> = Vec::new();
    if let Some(s) = a.get_short() {
        forms.push(format!("-{s}"));
    }
    let value = a
        .get_value_names()
        .and_then(|v| v.first())
        .filter(|_| a.get_action().takes_values());
    let optional = mount_options::value_optional(a);
    if let Some(long) = a.get_long() {
        forms.push(match value {
            Some(v) if optional => format!("--{long}[={v}]"),
            Some(v) => format!("--{long} {v}"),
            None => format!("--{long}"),
        });
    } else if let (Some(v), Some(last)) = (value, forms.last_mut()) {
        last.push_str(&format!(" {v}"));
    }
    let forms: Vec<String> = forms.iter().map(|f| format!("`{f}`")).collect();
    let _ = write!(out, "\n- {}", forms.join(", "));
    let reachable =
        with_o && a.get_long().is_some() && !matches!(a.get_id().as_str(), "help" | "version");
    if reachable {
        let mut o: Vec<String> = mount_options::o_form(a).into_iter().collect();
        if let Some(aliases) = a.get_all_aliases() {
            o.extend(aliases.iter().map(|al| mount_options::o_name(al)));
        }
        let o: Vec<String> = o.iter().map(|f| format!("`-o {f}`")).collect();
        let _ = write!(out, ", {}", o.join(", "));
    }
    let help = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let (text, default) = split_default(&help);
    let _ = write!(out, ": {text}");
    // A flag's own default (false, 0) says nothing.
    let clap_default: Vec<String> = a
        .get_default_values()
        .iter()
        .filter(|_| a.get_action().takes_values())
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    match (default, clap_default.is_empty()) {
        (Some(d), _) => {
            let _ = write!(out, " Default: {d}.");
        }
        (None, false) => {
            let _ = write!(out, " Default: {}.", clap_default.join(", "));
        }
        (None, true) => {}
    }
    out.push('\n');
}

/// A help text and the `[default: ...]` at its end, if any.
fn split_default(help: &str) -> (String, Option<String>) {
    let help = help.trim();
    if let Some(start) = help.rfind("[default: ") {
        if help.ends_with(']') {
            let default = help[start + "[default: ".len()..help.len() - 1].to_string();
            let mut text = help[..start].trim_end().to_string();
            if !text.ends_with('.') {
                text.push('.');
            }
            return (text, Some(default));
        }
    }
    let mut text = help.to_string();
    if !text.is_empty() && !text.ends_with('.') {
        text.push('.');
    }
    (text, None)
}
