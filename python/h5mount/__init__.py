"""Mount HDF5 files read-only as directory trees, from Python.

This package is a thin layer over the ``h5mount`` command that the wheel installs beside
it: :func:`mount` runs ``h5mount SOURCE MOUNTPOINT --option...``, which returns once the
mount answers (the filesystem is then served by a background process), and unmounts with
``fusermount3 -u``. A refusal of the command (a file that is not HDF5, a mountpoint in use,
an unknown option) is raised as :class:`H5mountError` carrying the command's one-line
message.

    import numpy, h5mount
    with h5mount.mount("data.h5", readahead=512) as root:
        gain = numpy.fromfile(f"{root}/calibration/gain", dtype="<f4")

Keyword options are the command's long options with ``_`` for ``-``: ``True`` gives the bare
flag (``zarr=True`` is ``--zarr``), ``False`` or ``None`` leaves it out, a list repeats it,
any other value is passed as ``--name=value`` (``zarr=2`` is ``--zarr=2``). ``h5mount
--help`` lists them.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time

__all__ = ["H5mountError", "Mount", "binary", "is_mounted", "mount"]

#: How long to wait for the kernel to drop a mount after ``fusermount3 -u`` returned.
UNMOUNT_WAIT_SECONDS = 30.0


class H5mountError(Exception):
    """The ``h5mount`` command (or the unmount) failed; the message is its one line."""

    def __init__(self, message, returncode=None, stderr=""):
        super().__init__(message)
        self.message = message
        self.returncode = returncode
        #: Everything the command wrote to stderr (clap's refusals add a usage hint).
        self.stderr = stderr


def binary():
    """The path of the ``h5mount`` command: the one installed with this package (the
    scripts directory of the installation scheme whose library directory holds it: the
    environment's, or the user's for ``pip install --user``), else the first on ``PATH``."""
    here = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    schemes = [None] + [s for s in ("posix_user",) if s in sysconfig.get_scheme_names()]
    for scheme in schemes:
        paths = sysconfig.get_paths(scheme) if scheme else sysconfig.get_paths()
        libs = {os.path.realpath(paths[k]) for k in ("purelib", "platlib") if k in paths}
        if here in libs and "scripts" in paths:
            candidate = os.path.join(paths["scripts"], "h5mount")
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    found = shutil.which("h5mount")
    if found is None:
        raise H5mountError("h5mount: the h5mount command is not installed (not beside this "
                           "package nor on PATH)")
    return found


def _flags(options):
    """``name=value`` keywords as command-line arguments (see the module's docs)."""
    args = []
    for name, value in options.items():
        if name in ("foreground", "f", "daemon_child"):
            # A foreground mount would never return to the caller.
            raise TypeError(f"h5mount.mount() does not take {name!r}: it mounts in the background")
        flag = "--" + name.replace("_", "-")
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if v is True:
                args.append(flag)
            elif v is False or v is None:
                continue
            else:
                args.append(f"{flag}={os.fspath(v) if isinstance(v, os.PathLike) else v}")
    return args


def _unescape_mountinfo(field):
    # /proc/self/mountinfo writes space, tab, newline and backslash as \ooo octal.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit() and len(field[i + 1:i + 4]) == 3:
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def is_mounted(path):
    """Whether ``path`` is a mount point now (read from ``/proc/self/mountinfo``, which
    answers even when the filesystem behind it no longer does)."""
    target = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields = line.split(" ")
                if len(fields) > 4 and _unescape_mountinfo(fields[4]) == target:
                    return True
    except OSError:
        return os.path.ismount(target)
    return False


class Mount:
    """A mounted source: ``path`` is where it is mounted; :meth:`unmount` (or leaving the
    ``with`` block) takes it away and removes the directory if :func:`mount` made it."""

    def __init__(self, path, made_dir):
        self.path = path
        self._made_dir = made_dir
        self._mounted = True

    def __repr__(self):
        state = "mounted" if self._mounted else "unmounted"
        return f"<h5mount.Mount {self.path!r} {state}>"

    def __fspath__(self):
        return self.path

    def __enter__(self):
        return self.path

    def __exit__(self, exc_type, exc, tb):
        try:
            self.unmount()
        except H5mountError:
            if exc_type is None:
                raise
            # The block's own exception is the one to see; the mount stays, and says so.
            print(f"h5mount: {self.path} left mounted: unmount failed", file=sys.stderr)
        return False

    def unmount(self):
        """Unmount, and wait until the kernel no longer lists the mount (a second call
        does nothing)."""
        if not self._mounted:
            return
        tool = shutil.which("fusermount3")
        cmd = [tool, "-u", self.path] if tool else ["umount", self.path]
        res = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, errors="replace")
        if res.returncode != 0 and is_mounted(self.path):
            raise H5mountError(_first_line(res.stderr) or f"{cmd[0]} -u {self.path} failed",
                               res.returncode, res.stderr)
        deadline = time.monotonic() + UNMOUNT_WAIT_SECONDS
        delay = 0.01
        while is_mounted(self.path):
            if time.monotonic() > deadline:
                raise H5mountError(f"h5mount: {self.path}: still mounted "
                                   f"{UNMOUNT_WAIT_SECONDS:.0f} s after {cmd[0]} returned")
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        self._mounted = False
        if self._made_dir:
            try:
                os.rmdir(self.path)
            except OSError:
                pass


def _first_line(text):
    """The message of a failure: h5mount's own are one line; clap's refusals start with
    theirs and follow it with a tip and the usage."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[0].strip() if lines else ""


def mount(source, mountpoint=None, **options):
    """Mount ``source`` (an HDF5 file, a directory of them, or an ``s3://`` / ``http(s)://``
    URL) read-only on ``mountpoint`` (an existing empty directory; a new temporary directory
    when ``None``) and return a :class:`Mount`, which as a context manager gives the mount's
    path and unmounts on exit. Raises :class:`H5mountError` with the command's message when
    the mount is refused."""
    source = os.fspath(source)
    args = _flags(options)
    made_dir = mountpoint is None
    path = tempfile.mkdtemp(prefix="h5mount-") if made_dir else os.fspath(mountpoint)
    try:
        res = subprocess.run([binary(), *args, "--", source, path], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             errors="replace")
    except BaseException:
        if made_dir:
            os.rmdir(path)
        raise
    if res.returncode != 0:
        if made_dir:
            try:
                os.rmdir(path)
            except OSError:
                pass
        raise H5mountError(_first_line(res.stderr) or f"h5mount exited with {res.returncode}",
                           res.returncode, res.stderr)
    return Mount(path, made_dir)
