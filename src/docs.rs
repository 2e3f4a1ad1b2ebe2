//! The man page, shell completions and `docs/configuration.md`, generated from the command
//! line definition (`h5mount generate-docs DIR`, hidden, run by `packaging/build-deb`;
//! `--configuration FILE` for the page, see [`configuration`]).
//!
//! clap_mangen renders the name, synopsis, description and every option from the clap
//! definition, so the page cannot drift from `--help`; the `-o` forms and the fstab options
//! ignored come from `cli::mount_options`; the sections a reader of a mount tool looks for
//! beyond that (views, the Zarr store, stopping, examples, exit status, files) are written
//! here in roff. clap_complete writes the bash, zsh and fish completions. A test keeps the
//! set of options that `--help`, the man page and `docs/configuration.md` name equal to the
//! definition's.

pub mod configuration;

use std::io::{self, Write};
use std::path::Path;

use clap_complete::Shell;
use clap_mangen::roff::{bold, italic, roman, Roff};

use crate::cli::mount_options;

/// The page's description after the one-line summary.
const DESCRIPTION: &str = "Groups are directories (mode 0555), datasets regular files (0444) \
    whose bytes are the dataset's elements in the file's datatype, exactly numpy's \
    ds[()].tobytes(); soft and external links are symlinks, hard links share an inode. \
    Attributes and dataset properties are extended attributes (user.*, see getfattr(1)). \
    Every call that would change anything answers EROFS. What cannot be read fails that read \
    with EIO (EOPNOTSUPP when unsupported) and one log line; everything else keeps working.\n\n\
    SOURCE is an HDF5 file; a directory, whose HDF5 files become directories of their trees; \
    s3://BUCKET/KEY, one object of an S3 or S3-compatible store; s3://BUCKET/PREFIX/, every \
    object below the prefix; or an http:// or https:// URL. Remote objects are read in ranges \
    as needed and kept in the cache, never downloaded whole. S3 credentials come from \
    --profile, else the AWS environment variables, web identity, container and instance \
    metadata; --no-sign-request reads public buckets.\n\n\
    h5mount returns once the mount answers and serves it in the background (-f: in the \
    foreground).";

/// The views: (flag, what it serves).
const VIEWS: &[(&str, &str)] = &[
    (
        "--npy",
        "NAME.npy beside every fixed-size dataset: a NumPy file whose data part is the \
         dataset's bytes, so numpy.load(..., mmap_mode='r') maps it",
    ),
    (
        "--envi",
        "NAME.hdr beside 1- to 3-D numeric datasets: an ENVI header, so GDAL and ENVI-aware \
         tools open the raw file as a raster",
    ),
    (
        "--tiff",
        "NAME.tif beside 2-D datasets and 3-D ones read as stacks of 2-D pages (first axis), \
         of integers or IEEE floats: uncompressed strips pointing at the dataset's bytes in \
         their stored byte order; classic TIFF up to 4 GiB, BigTIFF beyond. Fiji/ImageJ, \
         tifffile, Pillow and GDAL open them",
    ),
    (
        "--byte-order ORDER",
        "serve numbers in native, little or big byte order instead of as stored",
    ),
];

/// The Zarr store: the page's section on --zarr.
const ZARR: &str = "With --zarr (Zarr format 3) or --zarr=2, the mount is a Zarr store that \
    zarr-python, xarray and dask open as they would a local one (xarray.open_zarr(MOUNTPOINT)). \
    Every HDF5 group is a directory holding its metadata documents (zarr.json; v2 .zgroup and \
    .zattrs); every dataset a directory holding its documents and one file per chunk that was \
    written (v3 c/0/1, v2 0.1), so chunks never written read as the fill value. In a directory \
    mount each HDF5 file is a group named by the file. The root carries consolidated metadata \
    (v3 in its zarr.json, v2 in .zmetadata). Links to datasets are arrays at each of their \
    paths; names Zarr cannot hold, committed datatypes and further paths of a group are left \
    out, with one log line each. The xattr user.h5mount.zarr_encoding of an array directory \
    says whether its chunk files are the stored bytes or decoded, and why. A dataset that \
    cannot be read fails its files with EIO; the rest of the store reads. --zarr-decoded \
    serves every chunk decoded, for readers that know few codecs.";

/// The examples: (what, command).
const EXAMPLES: &[(&str, &str)] = &[
    (
        "Mount a file, read a dataset, unmount:",
        "h5mount run42.h5 /mnt/run42\ncat /mnt/run42/detector/frames > frames.raw\n\
         fusermount3 -u /mnt/run42",
    ),
    (
        "Stay in the foreground with info logging:",
        "h5mount -f -v run42.h5 /mnt/run42",
    ),
    (
        "A directory of files, with TIFF and NumPy views:",
        "h5mount --tiff --npy /data/campaign /mnt/campaign",
    ),
    (
        "An object on S3, and a public one over HTTPS:",
        "h5mount s3://bucket/runs/run42.h5 /mnt/run42\n\
         h5mount --no-sign-request https://example.org/data/run42.h5 /mnt/run42",
    ),
    (
        "An S3-compatible store, with a named profile:",
        "h5mount --endpoint http://127.0.0.1:8333 --profile lab s3://bucket/prefix/ /mnt/lab",
    ),
    (
        "Through mount(8), and the same as an /etc/fstab line:",
        "mount -t h5mount /data/run42.h5 /srv/run42 -o allow_other\n\
         /data/run42.h5  /srv/run42  h5mount  ro,allow_other,nofail  0 0",
    ),
    (
        "A file as a Zarr store, opened by xarray:",
        "h5mount --zarr run42.h5 /mnt/run42\n\
         python3 -c 'import xarray; print(xarray.open_zarr(\"/mnt/run42\"))'",
    ),
    (
        "List the objects of a file:",
        "h5mount inspect run42.h5 /detector",
    ),
];

/// Exit statuses: (status, meaning).
const EXIT: &[(&str, &str)] = &[
    (
        "0",
        "mounted (in the background), or served until unmounted (-f); inspect listed the file",
    ),
    (
        "1",
        "the mount failed or serving ended with an error (for example FUSE unavailable)",
    ),
    (
        "2",
        "usage error, a source that cannot be opened or read, access denied by a server, or \
         a mountpoint that is already a mountpoint",
    ),
];

/// Write the man page `h5mount.1` and the completions (`h5mount.bash`, `_h5mount`,
/// `h5mount.fish`) into `dir`, and the configuration page into `configuration`.
pub fn generate(
    cmd: clap::Command,
    dir: Option<&Path>,
    configuration: Option<&Path>,
) -> io::Result<()> {
    let named = |path: &Path| {
        let path = path.display().to_string();
        move |e: io::Error| io::Error::new(e.kind(), format!("{path}: {e}"))
    };
    if let Some(file) = configuration {
        std::fs::write(file, configuration::markdown(&cmd)).map_err(named(file))?;
    }
    let Some(dir) = dir else { return Ok(()) };
    std::fs::create_dir_all(dir).map_err(named(dir))?;
    let mut page = Vec::new();
    man_page(cmd.clone(), &mut page)?;
    let file = dir.join("h5mount.1");
    std::fs::write(&file, page).map_err(named(&file))?;
    for (shell, name) in [
        (Shell::Bash, "h5mount.bash"),
        (Shell::Zsh, "_h5mount"),
        (Shell::Fish, "h5mount.fish"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cmd.clone(), "h5mount", &mut out);
        let file = dir.join(name);
        std::fs::write(&file, out).map_err(named(&file))?;
    }
    Ok(())
}

/// The section on `-o`: each heading's options in their `-o` form, then the ignored ones.
fn mount_options_section(r: &mut Roff, cmd: &clap::Command) {
    r.control("SH", ["OPTIONS OF -o"]);
    r.text([roman(
        "Comma separated, repeatable, and the options field of an /etc/fstab line. Every long \
         option above is also an -o option of the same name with _ for -: --cache-size 1G is \
         -o cache_size=1G. A flag given on the command line wins over the same option in -o; \
         among -o options, as among repeated flags, the last wins.",
    )]);
    let args: Vec<&clap::Arg> = mount_options::reachable(cmd).collect();
    let mut headings: Vec<Option<&str>> = Vec::new();
    for a in &args {
        if !headings.contains(&a.get_help_heading()) {
            headings.push(a.get_help_heading());
        }
    }
    for heading in headings {
        let mut forms = Vec::new();
        for a in args.iter().filter(|a| a.get_help_heading() == heading) {
            forms.extend(mount_options::o_form(a));
            if let Some(aliases) = a.get_all_aliases() {
                forms.extend(aliases.iter().map(|al| mount_options::o_name(al)));
            }
        }
        let heading = heading.unwrap_or("Other options");
        r.control("TP", [])
            .text([bold(forms.join(", "))])
            .text([roman(format!(
                "as the options of the same names ({heading})"
            ))]);
    }
    r.control("TP", [])
        .text([bold(mount_options::ignored_list())])
        .text([roman(
            "fstab options: accepted and ignored (the mount is always read-only, nodev and \
             nosuid; mount(8) passes rw unless ro is given)",
        )]);
}

/// The man page: clap's sections, then ours.
fn man_page(cmd: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let sub_flags = |name| cmd.find_subcommand(name).map(flags_of).unwrap_or_default();
    let (inspect_flags, refs_flags) = (sub_flags("inspect"), sub_flags("refs"));
    let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
    let cmd = cmd.long_about(format!("{about}.\n\n{DESCRIPTION}"));
    let man = clap_mangen::Man::new(cmd.clone()).date(env!("CARGO_PKG_VERSION"));
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;

    let mut r = Roff::new();
    r.control("SH", ["COMMANDS"]);
    r.control("TP", []).text([
        bold("h5mount inspect "),
        italic("FILE"),
        roman(" ["),
        italic("PATH"),
        roman(format!("]{inspect_flags}")),
    ]);
    r.text([roman(
        "Print the tree of objects below PATH (default /) with types, shapes, layouts and \
         attributes, without mounting. FILE may be a URL, as for mounting, reached with the \
         same remote-source options.",
    )]);
    r.control("TP", []).text([
        bold("h5mount refs "),
        italic("FILE"),
        roman(" ["),
        italic("PATH"),
        roman(format!("]{refs_flags}")),
    ]);
    let refs_about = cmd.find_subcommand("refs").and_then(|s| s.get_about());
    r.text([roman(refs_about.map(|a| a.to_string()).unwrap_or_default())]);
    mount_options_section(&mut r, &cmd);
    table(
        &mut r,
        "VIEW FILES",
        VIEWS,
        "Off by default; each flag also works as the -o option of the same name. A view file \
         never shadows a real link of the same name:",
    );
    r.control("SH", ["ZARR STORE"]);
    r.text([roman(ZARR)]);
    r.control("SH", ["STOPPING"]);
    r.text([roman(
        "fusermount3 -u MOUNTPOINT, or umount MOUNTPOINT as root, ends the daemon with status \
         0. SIGTERM, SIGINT and SIGHUP unmount and exit 0; a busy mount is detached lazily. \
         Mounting on a directory that is already a mountpoint is refused.",
    )]);
    r.control("SH", ["EXAMPLES"]);
    for (what, cmd) in EXAMPLES {
        r.control("PP", []).text([roman(*what)]);
        r.control("PP", []).control("RS", ["4"]).control("nf", []);
        for line in cmd.lines() {
            r.text([bold(line)]).control("br", []);
        }
        r.control("fi", []).control("RE", []);
    }
    table(&mut r, "EXIT STATUS", EXIT, "");
    r.control("SH", ["FILES"]);
    r.control("TP", []).text([italic("/etc/h5mount/NAME.conf")]);
    r.text([roman(
        "configuration of the systemd unit h5mount@NAME.service (FILE=, MOUNTPOINT=, OPTIONS=)",
    )]);
    r.control("TP", [])
        .text([italic("~/.aws/credentials, ~/.aws/config")]);
    r.text([roman(
        "profiles read by --profile (static keys, credential_process, role_arn; read again \
         when they change)",
    )]);
    r.control("SH", ["SEE ALSO"]);
    r.text([roman(
        "mount(8), fstab(5), fusermount3(1), mount.fuse3(8), getfattr(1), h5ls(1)",
    )]);
    r.to_writer(out)?;
    man.render_version_section(out)
}

/// A section of tagged paragraphs, after an optional lead sentence.
fn table(r: &mut Roff, title: &str, rows: &[(&str, &str)], lead: &str) {
    r.control("SH", [title]);
    if !lead.is_empty() {
        r.text([roman(lead)]);
    }
    for (tag, text) in rows {
        r.control("TP", []).text([bold(*tag)]).text([roman(*text)]);
    }
}

/// The long options of `cmd`, as a synopsis: ` [--flag] [--name VALUE] ...`.
fn flags_of(cmd: &clap::Command) -> String {
    let mut out = String::new();
    for a in cmd.get_arguments() {
        let Some(long) = a.get_long() else { continue };
        if a.is_hide_set() {
            continue;
        }
        let value = a
            .get_value_names()
            .and_then(|v| v.first())
            .filter(|_| a.get_action().takes_values());
        match value {
            Some(v) => out.push_str(&format!(" [--{long} {v}]")),
            None => out.push_str(&format!(" [--{long}]")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// `text` without roff's escapes of `-` and of fonts (`\fB`).
    fn unroff(text: &str) -> String {
        let mut t = text.replace("\\-", "-");
        for font in ["\\fB", "\\fI", "\\fR", "\\fP"] {
            t = t.replace(font, " ");
        }
        t
    }

    /// The long options `text` names (`--cache-size`; `\-\-` in roff counts as `--`).
    fn long_flags(text: &str) -> BTreeSet<String> {
        let text = unroff(text);
        let b = text.as_bytes();
        let mut out = BTreeSet::new();
        let mut i = 0;
        while let Some(at) = text[i..].find("--").map(|p| p + i) {
            let start = at + 2;
            let before_ok = at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'-');
            let mut end = start;
            while end < b.len()
                && (b[end].is_ascii_lowercase() || b[end].is_ascii_digit() || b[end] == b'-')
            {
                end += 1;
            }
            let name = text[start..end].trim_end_matches('-');
            if before_ok && name.starts_with(|c: char| c.is_ascii_lowercase()) {
                out.insert(format!("--{name}"));
            }
            i = end.max(at + 2);
        }
        out
    }

    /// The words of `text` (runs of a-z, 0-9 and `_`).
    fn words(text: &str) -> BTreeSet<String> {
        unroff(text)
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map(str::to_string)
            .collect()
    }

    /// The definition, built (with `--help` and `--version`), and its visible subcommands.
    fn built() -> clap::Command {
        let mut cmd = crate::cli::command();
        cmd.build();
        cmd
    }

    fn visible_subcommands(cmd: &clap::Command) -> impl Iterator<Item = &clap::Command> {
        cmd.get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    }

    /// Every long option the definition holds: the mount command's and its subcommands'.
    fn defined(cmd: &clap::Command) -> BTreeSet<String> {
        std::iter::once(cmd)
            .chain(visible_subcommands(cmd))
            .flat_map(|c| c.get_arguments())
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect()
    }

    /// The `-o` names of the mount command's options (aliases included).
    fn o_names(cmd: &clap::Command) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for a in mount_options::reachable(cmd) {
            out.insert(mount_options::o_name(a.get_long().unwrap()));
            for al in a.get_all_aliases().unwrap_or_default() {
                out.insert(mount_options::o_name(al));
            }
        }
        out
    }

    /// `named` names exactly the options of `want`: none missing, none that does not exist.
    fn same_options(what: &str, named: &BTreeSet<String>, want: &BTreeSet<String>) {
        let missing: Vec<_> = want.difference(named).collect();
        let unknown: Vec<_> = named.difference(want).collect();
        assert!(
            missing.is_empty() && unknown.is_empty(),
            "{what}: options of the definition it does not name: {missing:?}; options it \
             names that the definition does not hold: {unknown:?}"
        );
    }

    fn man_page_text(cmd: clap::Command) -> (String, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        generate(cmd, Some(dir.path()), None).unwrap();
        let page = std::fs::read_to_string(dir.path().join("h5mount.1")).unwrap();
        (page, dir)
    }

    #[test]
    fn the_page_and_completions_are_written() {
        let (page, dir) = man_page_text(crate::cli::command());
        for section in [
            "OPTIONS",
            "COMMANDS",
            "OPTIONS OF -o",
            "VIEW FILES",
            "ZARR STORE",
            "EXAMPLES",
            "EXIT STATUS",
            "SEE ALSO",
        ] {
            assert!(
                page.contains(&format!(".SH {}", section.replace(' ', "\\ ")))
                    || page.contains(&format!(".SH \"{section}\""))
                    || page.contains(&format!(".SH {section}")),
                "{section}"
            );
        }
        let bash = std::fs::read_to_string(dir.path().join("h5mount.bash")).unwrap();
        assert!(bash.contains("--cache-size"));
        for name in ["_h5mount", "h5mount.fish"] {
            assert!(
                dir.path().join(name).metadata().unwrap().len() > 0,
                "{name}"
            );
        }
    }

    /// The committed docs/configuration.md is what the definition writes.
    #[test]
    fn configuration_page_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(configuration::PATH);
        let want = configuration::markdown(&crate::cli::command());
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is not what the command line definition writes; write it again with\n    {}",
            configuration::PATH,
            configuration::REGENERATE
        );
    }

    /// `--help` (of the command and of each subcommand), the man page and
    /// docs/configuration.md name exactly the options of the definition, and the latter two
    /// every `-o` option; docs/configuration.md names no `-o` option that does not exist.
    #[test]
    fn help_man_page_and_docs_name_the_same_options() {
        let cmd = built();
        let want = defined(&cmd);
        assert!(want.len() >= 35, "{want:?}");
        let mut help = cmd.clone().render_long_help().to_string();
        for sub in visible_subcommands(&cmd) {
            help.push_str(&sub.clone().render_long_help().to_string());
        }
        same_options("--help", &long_flags(&help), &want);
        let (page, _dir) = man_page_text(crate::cli::command());
        same_options("the man page", &long_flags(&page), &want);
        let md = configuration::markdown(&crate::cli::command());
        // The page names the hidden command that writes it.
        let prose = md.replace(configuration::REGENERATE, "");
        same_options(configuration::PATH, &long_flags(&prose), &want);

        let o = o_names(&cmd);
        for (what, text) in [("the man page", &page), (configuration::PATH, &md)] {
            let w = words(text);
            let missing: Vec<_> = o.iter().filter(|n| !w.contains(*n)).collect();
            assert!(missing.is_empty(), "{what} lacks -o {missing:?}");
            for ignored in mount_options::IGNORED {
                assert!(w.contains(*ignored), "{what} lacks the ignored {ignored}");
            }
        }
        // Every `-o NAME` the page shows is an option or an ignored one.
        for part in md.split("`-o ").skip(1) {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                name.is_empty()
                    || name.starts_with(|c: char| c.is_ascii_uppercase())
                    || o.contains(&name)
                    || mount_options::is_ignored(&name),
                "{}: -o {name} is no option",
                configuration::PATH
            );
        }
    }

    /// The README's prose names no option that does not exist (its list of options is
    /// docs/configuration.md).
    #[test]
    fn the_readme_names_existing_options() {
        let readme = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"),
        )
        .unwrap();
        assert!(
            readme.contains(configuration::PATH),
            "README does not point to the page"
        );
        let want = defined(&built());
        let unknown: Vec<_> = long_flags(&readme)
            .into_iter()
            .filter(|f| !want.contains(f) && !OTHER_PROGRAMS_FLAGS.contains(&f.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "README.md names {unknown:?}, not options of h5mount"
        );
    }

    /// Options of other programs that the README shows in commands.
    const OTHER_PROGRAMS_FLAGS: &[&str] = &[
        "--example",     // cargo run --example
        "--format",      // aws configure export-credentials --format
        "--now",         // systemctl enable --now
        "--only-values", // getfattr --only-values
        "--path",        // cargo install --path
        "--suffix",      // systemd-escape --suffix
    ];
}
