#!/usr/bin/env python3
"""Check the views of a live h5mount mount with real consumers (run by views_mount.rs).

Usage: views_mount_check.py MOUNTPOINT FILE.h5 TREE, TREE being `as_stored` (mounted with
`--npy --envi`) or `native` (mounted with `--npy --envi --byte-order native`). For every dataset
of FILE.h5 (h5py's view):
  - `numpy.load(MOUNT/NAME.npy, mmap_mode='r')` equals h5py's array (when the sidecar exists);
  - vlen datasets read as text, one element per line (the text view's escaping);
  - under `native`, `numpy.fromfile(MOUNT/NAME)` with h5py's dtype in native order equals
    h5py's values for simple numeric datasets;
  - ENVI pairs (MOUNT/NAME + MOUNT/NAME.hdr) open in GDAL (Debian's /usr/bin/python3 with
    python3-gdal; skipped, saying so, when absent) with h5py's values.
Prints one summary line; exits 1 on any failure. The value comparisons are views_check.py's.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from views_check import GDAL_PY, Checker, check_npy, check_text  # noqa: E402

# Run under Debian's python3: each argument is SRC=DST; read the ENVI pair SRC with GDAL and
# save it as (bands, lines, samples) to DST (the mount is read-only). One JSON line of results.
GDAL_READER = r"""
import json, sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
out = {}
for arg in sys.argv[1:]:
    src, dst = arg.split("=", 1)
    try:
        ds = gdal.Open(src)
        if ds.GetDriver().ShortName != "ENVI":
            raise RuntimeError("driver " + ds.GetDriver().ShortName)
        a = np.stack([ds.GetRasterBand(b + 1).ReadAsArray() for b in range(ds.RasterCount)])
        np.save(dst, a)
        out[src] = "ok"
    except Exception as e:
        out[src] = "error: %s" % e
print(json.dumps(out))
"""


def datasets(f):
    out = []
    f.visititems(lambda name, obj: out.append(name) if isinstance(obj, h5py.Dataset) else None)
    return out


def exists(p):
    """Path.exists that is False for names the kernel refuses (too long)."""
    try:
        return p.exists()
    except OSError:
        return False


def check_native(c, where, path, h):
    dt = h.dtype
    if dt.kind not in "iufc" or dt.byteorder in ("=", "|") or h.shape is None:
        return
    a = np.fromfile(path, dtype=dt.newbyteorder("="))
    want = np.ascontiguousarray(h).ravel()
    if a.shape != want.shape or not np.array_equal(a, want, equal_nan=True):
        return c.fail(where, f"fromfile in native order differs ({dt})")
    c.ok("native fromfile")


def check_gdal(c, pairs, tmp):
    """Check the ENVI pairs with GDAL; returns why it could not, or None."""
    if not os.path.exists(GDAL_PY) or subprocess.run(
            [GDAL_PY, "-c", "from osgeo import gdal; import numpy"],
            capture_output=True).returncode != 0:
        return f"GDAL: {GDAL_PY} with osgeo.gdal and numpy not available"
    args = [f"{p}={tmp}/{i}.npy" for i, (p, _, _) in enumerate(pairs)]
    r = subprocess.run([GDAL_PY, "-c", GDAL_READER, *args], capture_output=True, text=True)
    if r.returncode != 0:
        c.fail("gdal", r.stderr.strip()[-500:])
        return None
    results = json.loads(r.stdout.strip().splitlines()[-1])
    for i, (path, where, h) in enumerate(pairs):
        res = results.get(str(path))
        code = Path(str(path) + ".hdr").read_text().split("data type = ")[1].split()[0]
        if res != "ok" and code in ("14", "15") and "data_type" in str(res):
            c.ok("envi 64-bit ints: GDAL 3.6 refuses (known)")
            continue
        if res != "ok":
            c.fail(where, f"GDAL: {res}")
            continue
        g = np.load(f"{tmp}/{i}.npy")
        shape = {1: lambda s: (1, 1, s[0]), 2: lambda s: (1, s[0], s[1]),
                 3: lambda s: s}[h.ndim](h.shape)
        want = np.ascontiguousarray(h).reshape(shape)
        if g.shape != want.shape:
            c.fail(where, f"GDAL shape {g.shape} != {want.shape}")
        elif not np.array_equal(g.astype(want.dtype.newbyteorder("=")), want, equal_nan=True):
            c.fail(where, f"GDAL values differ ({g.dtype} vs {want.dtype})")
        else:
            c.ok("envi (GDAL)")


def main():
    mount, fname, tree = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    c = Checker()
    pairs = []
    with h5py.File(fname, "r") as f:
        for name in datasets(f):
            ds = f[name]
            where = f"{os.path.basename(fname)}:/{name}"
            path = mount / name
            try:
                if ds.dtype.kind == "O" and h5py.check_vlen_dtype(ds.dtype) is not None:
                    check_text(c, where, path, ds)
                    continue
                h = ds[()]
            except (OSError, ValueError) as e:  # unreadable by h5py here (missing plugin, ...)
                c.ok(f"skipped by h5py ({type(e).__name__})")
                continue
            try:
                with path.open("rb") as fh:
                    fh.read()
            except OSError as e:  # not servable by h5mount (unsupported filter): nor its npy
                side = Path(str(path) + ".npy")
                try:
                    with side.open("rb") as fh:
                        fh.read()
                    c.fail(where, f"{side.name} reads but the dataset fails ({e})")
                except FileNotFoundError:
                    pass
                except OSError:
                    c.ok("unservable dataset, unservable npy")
                continue
            npy = Path(str(path) + ".npy")
            if exists(npy):
                check_npy(c, where, npy, np.asarray(h), tree)
            if tree == "native":
                check_native(c, where, path, np.asarray(h))
            if exists(Path(str(path) + ".hdr")):
                pairs.append((path, where, np.asarray(h)))
    with tempfile.TemporaryDirectory(prefix="h5mount-gdal-") as tmp:
        skipped = [why for why in [check_gdal(c, pairs, tmp) if pairs else None] if why]
    print(json.dumps({"file": os.path.basename(fname), "tree": tree, "ok": c.counts,
                      "skipped": skipped, "failures": c.failures[:20]}))
    sys.exit(1 if c.failures else 0)


if __name__ == "__main__":
    main()
