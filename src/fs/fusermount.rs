//! Mounting through `fusermount3` when `/dev/fuse` cannot be opened by this user.
//!
//! Some systems ship `/dev/fuse` readable and writable by root only (mode 0600). fuser then
//! fails with "Permission denied" before it tries anything else, while libfuse, in the same
//! case, asks the setuid helper `fusermount3` to mount: the helper opens the device as root,
//! mounts it on the user's directory (checking that the user owns it and may use the options)
//! and hands the open descriptor back over a Unix socket whose number it finds in the
//! environment variable `_FUSE_COMMFD`, as one `SCM_RIGHTS` message. This module does the same,
//! and the session then runs on that descriptor. Such a mount is also unmounted through the
//! helper (`fusermount3 -u`), as an ordinary user cannot call `umount` on it.
//!
//! When `/dev/fuse` opens but the user may not call `mount` (the usual 0666 device), fuser
//! itself falls back to the helper; this module is only for the device it cannot open.

use std::io::{self, IoSliceMut, Read};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};

use rustix::io::{fcntl_setfd, FdFlags};
use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};

/// The helper, found on `PATH` (it is installed setuid root by the `fuse3` package).
pub const HELPER: &str = "fusermount3";

/// The FUSE device.
const DEVICE: &str = "/dev/fuse";

/// Tests only: with this variable set, every mount goes through the helper, so that the
/// path can be checked where the device opens (as root).
pub const FORCE_ENV: &str = "H5MOUNT_TEST_VIA_FUSERMOUNT";

/// True when this process cannot open the FUSE device itself (mode 0600 for another user):
/// only then is the helper needed before fuser is tried.
pub fn device_denied() -> bool {
    if std::env::var_os(FORCE_ENV).is_some() {
        return true;
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(DEVICE)
    {
        Ok(_) => false,
        Err(e) => e.kind() == io::ErrorKind::PermissionDenied,
    }
}

/// Mount a FUSE filesystem on `mountpoint` with the comma-separated `options` through the
/// helper; returns the open FUSE device of the new mount.
pub fn mount(mountpoint: &Path, options: &str) -> io::Result<OwnedFd> {
    let (ours, theirs) = UnixStream::pair()?;
    // The helper's end must survive exec (std opens sockets close-on-exec).
    fcntl_setfd(&theirs, FdFlags::empty())?;
    let mut child = Command::new(HELPER)
        .arg("-o")
        .arg(options)
        .arg("--")
        .arg(mountpoint)
        .env("_FUSE_COMMFD", theirs.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run {HELPER}: {e}")))?;
    drop(theirs);
    let received = receive_fd(&ours);
    // Without auto_unmount the helper exits once it has sent the descriptor (or failed).
    let mut stderr = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut stderr);
    }
    let status = child.wait()?;
    match received {
        Some(fd) if status.success() => Ok(fd),
        _ => {
            let why = stderr.trim();
            Err(io::Error::other(if why.is_empty() {
                format!("{HELPER} failed ({status})")
            } else {
                why.to_string()
            }))
        }
    }
}

/// The descriptor the helper sends, if any (`None` when it closed the socket without one).
fn receive_fd(sock: &UnixStream) -> Option<OwnedFd> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    recvmsg(
        sock.as_fd(),
        &mut iov,
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .ok()?;
    let mut fds = control.drain().filter_map(|m| match m {
        RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
        _ => None,
    });
    fds.next()
}

/// Unmount a mount made by the helper.
pub fn unmount(mountpoint: &Path, lazy: bool) -> io::Result<()> {
    let mut cmd = Command::new(HELPER);
    cmd.arg(if lazy { "-uz" } else { "-u" })
        .arg("--")
        .arg(mountpoint);
    let out = cmd.stdin(Stdio::null()).stdout(Stdio::null()).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}
