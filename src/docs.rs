//! The man page and shell completions, generated from the command line definition
//! (`h5mount generate-docs DIR`, hidden; run by `packaging/build-deb`).
//!
//! clap_mangen renders the name, synopsis, description and every option from the clap
//! definition, so the page cannot drift from `--help`; the sections a reader of a mount tool
//! looks for beyond that (mount options, views, remote sources, stopping, examples, exit
//! status, files) are written here in roff. clap_complete writes the bash, zsh and fish
//! completions.

use std::io::{self, Write};
use std::path::Path;

use clap_complete::Shell;
use clap_mangen::roff::{bold, italic, roman, Roff};

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

/// The `-o` options: (option, meaning).
const MOUNT_OPTIONS: &[(&str, &str)] = &[
    ("ro, rw", "accepted; the mount is always read-only"),
    (
        "allow_other, allow_root",
        "let other users (or root) use the mount; for other users than root, /etc/fuse.conf \
         must hold user_allow_other",
    ),
    (
        "default_permissions",
        "the kernel checks the modes shown (on by default; nodefault_permissions turns it off)",
    ),
    (
        "auto_unmount",
        "unmount when the process dies (needs allow_other or allow_root)",
    ),
    (
        "uid=N, gid=N",
        "owner shown for every entry (default: the owner of the file)",
    ),
    (
        "fsname=NAME, subtype=NAME",
        "source and type shown in /proc/mounts (default: the source, fuse.h5mount)",
    ),
    (
        "cache_size=SIZE, threads=N, readahead=KB, max_open_files=N, refresh=SECONDS",
        "as the options of the same names",
    ),
    (
        "npy, envi, tiff, byte_order=ORDER",
        "as --npy, --envi, --tiff, --byte-order (see VIEW FILES)",
    ),
    (
        "zarr, zarr=2, zarr_decoded",
        "as --zarr, --zarr=2, --zarr-decoded (see ZARR STORE)",
    ),
    (
        "endpoint=URL, region=NAME, profile=NAME, no_sign_request, virtual_hosted, \
         allow_redirects, list_max_keys=N, request_timeout=S, retry_timeout=S, no_warm_up",
        "as the options of the same names (see REMOTE SOURCES)",
    ),
    (
        "allow_external_paths",
        "follow external links, virtual-dataset sources, external storage and directory \
         symlinks that lead outside the mounted file's directory or the mounted directory \
         (refused by default)",
    ),
    (
        "noauto, auto, nofail, _netdev, user, users, defaults, dev, nodev, suid, nosuid, exec, \
         noexec, atime, noatime, relatime, x-*, comment=*",
        "fstab options: accepted and ignored (the mount is always nodev,nosuid)",
    ),
];

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
/// `h5mount.fish`) into `dir`.
pub fn generate(cmd: clap::Command, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut page = Vec::new();
    man_page(cmd.clone(), &mut page)?;
    std::fs::write(dir.join("h5mount.1"), page)?;
    for (shell, name) in [
        (Shell::Bash, "h5mount.bash"),
        (Shell::Zsh, "_h5mount"),
        (Shell::Fish, "h5mount.fish"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut cmd.clone(), "h5mount", &mut out);
        std::fs::write(dir.join(name), out)?;
    }
    Ok(())
}

/// The man page: clap's sections, then ours.
fn man_page(cmd: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let inspect_flags = cmd
        .find_subcommand("inspect")
        .map(flags_of)
        .unwrap_or_default();
    let about = cmd.get_about().map(|a| a.to_string()).unwrap_or_default();
    let cmd = cmd.long_about(format!("{about}.\n\n{DESCRIPTION}"));
    let man = clap_mangen::Man::new(cmd).date(env!("CARGO_PKG_VERSION"));
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
    table(
        &mut r,
        "OPTIONS OF -o",
        MOUNT_OPTIONS,
        "Comma separated, repeatable, and the options field of an /etc/fstab line:",
    );
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
    use super::*;

    #[test]
    fn the_page_and_completions_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = crate::cli::command();
        generate(cmd, dir.path()).unwrap();
        let page = std::fs::read_to_string(dir.path().join("h5mount.1")).unwrap();
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
        // Every option of the definition is on the page (the command's and inspect's), and
        // every remote option also in the table of -o options.
        let cmd = crate::cli::command();
        let inspect = cmd.find_subcommand("inspect").unwrap();
        for a in cmd.get_arguments().chain(inspect.get_arguments()) {
            let Some(long) = a.get_long().filter(|_| !a.is_hide_set()) else {
                continue;
            };
            let escaped = long.replace('-', "\\-");
            assert!(page.contains(&escaped), "--{long} is not on the page");
        }
        let table = MOUNT_OPTIONS
            .iter()
            .map(|(tag, _)| *tag)
            .collect::<Vec<_>>()
            .join(", ");
        let remote = cmd
            .get_arguments()
            .filter(|a| a.get_help_heading() == Some("Remote sources"));
        let mut seen = 0;
        for a in remote {
            let Some(long) = a.get_long() else { continue };
            seen += 1;
            let key = long.replace('-', "_");
            assert!(table.contains(&key), "-o {key} is not in the table");
        }
        assert!(seen >= 10, "{seen} remote options");
        for key in ["zarr", "zarr=2", "zarr_decoded"] {
            assert!(table.contains(key), "-o {key} is not in the table");
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
}
