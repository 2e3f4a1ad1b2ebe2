"""The wheel's Python API, from a virtual environment it was installed into (run by
packaging/test-wheel with that environment's interpreter):

    wheel_check.py VENV SAMPLE NOT_HDF5

Mounts SAMPLE through h5mount.mount() on a temporary directory and on a given one, reads
every numeric dataset with numpy and compares it with h5py's reading of the file, checks an
option with a value (--readahead=512), a view (--npy) and the Zarr form (--zarr=2), that
leaving the block unmounts (the kernel no longer lists the mount) and removes the temporary
directory, and that refusals arrive as H5mountError with the command's line. Prints one
line, `ok ...`, or fails with an AssertionError naming what differed.
"""

import os
import sys
import tempfile

import h5py
import numpy as np

import h5mount

venv, sample, not_hdf5 = sys.argv[1:]
venv = os.path.realpath(venv)


def mounted(path):
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return any(line.split(" ")[4] == target for line in f)


def temp_dirs():
    return sorted(n for n in os.listdir(tempfile.gettempdir()) if n.startswith("h5mount-"))


# The package and the command are the ones installed into this environment.
assert os.path.realpath(h5mount.__file__).startswith(venv + os.sep), h5mount.__file__
assert h5mount.binary() == os.path.join(venv, "bin", "h5mount"), h5mount.binary()

want = {}
with h5py.File(sample, "r") as f:
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.dtype.kind in "iuf":
            want[name] = obj[()]
    f.visititems(visit)
assert "calibration/gain" in want and "detector/frames" in want, sorted(want)

before = temp_dirs()
with h5mount.mount(sample, readahead=512) as root:
    assert mounted(root), f"{root} is not a mount inside the with block"
    assert os.path.basename(root).startswith("h5mount-"), root
    for name, array in want.items():
        got = np.fromfile(os.path.join(root, name), dtype=array.dtype).reshape(array.shape)
        assert np.array_equal(got, array, equal_nan=array.dtype.kind == "f"), name
    frames = np.memmap(os.path.join(root, "detector/frames"), mode="r",
                       dtype=want["detector/frames"].dtype, shape=want["detector/frames"].shape)
    assert np.array_equal(frames[7], want["detector/frames"][7]), "memmap of detector/frames"
    del frames
assert not mounted(root), f"{root} still mounted after the with block"
assert not os.path.exists(root), f"the temporary mountpoint {root} was not removed"
assert temp_dirs() == before, (before, temp_dirs())

# A given mountpoint, a view: the directory stays, unmounted.
mnt = tempfile.mkdtemp(prefix="given-")
m = h5mount.mount(sample, mnt, npy=True)
assert m.path == mnt and mounted(mnt)
npy = np.load(os.path.join(mnt, "calibration/gain.npy"))
assert np.array_equal(npy, want["calibration/gain"]), "gain.npy"
m.unmount()
m.unmount()  # a second call does nothing
assert not mounted(mnt) and os.path.isdir(mnt), "the given mountpoint after unmount"

# --zarr=2 (the CLI takes its value only after `=`): a Zarr v2 root.
with h5mount.mount(sample, mnt, zarr=2) as root:
    assert os.path.exists(os.path.join(root, ".zgroup")), os.listdir(root)
assert not mounted(mnt)

# Refusals: the command's first line, no mount and no directory left behind.
try:
    h5mount.mount(not_hdf5)
except h5mount.H5mountError as e:
    assert e.message.startswith("h5mount: ") and "not an HDF5 file" in e.message, e.message
    assert "\n" not in e.message and e.returncode == 2, (e.message, e.returncode)
else:
    raise AssertionError("mounting a file that is not HDF5 did not raise")
try:
    h5mount.mount(sample, bogus_option=1)
except h5mount.H5mountError as e:
    assert "--bogus-option" in e.message and "\n" not in e.message, e.message
else:
    raise AssertionError("an unknown option did not raise")
try:
    h5mount.mount(sample, foreground=True)
except TypeError:
    pass
else:
    raise AssertionError("foreground=True did not raise TypeError")
with h5mount.mount(sample, mnt):
    try:
        h5mount.mount(sample, mnt)
    except h5mount.H5mountError as e:
        assert "already a mountpoint" in e.message, e.message
    else:
        raise AssertionError("a second mount on the same directory did not raise")
assert not mounted(mnt)
assert temp_dirs() == before, (before, temp_dirs())
os.rmdir(mnt)

print(f"ok: {len(want)} datasets equal to h5py's through the mount, unmounted on exit")
