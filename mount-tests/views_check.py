#!/usr/bin/env python3
"""Check h5mount's views (src/views) against numpy, h5py and GDAL, without mounting.

1. `cargo test --test views -- --ignored dump_views` writes every view of every fixture dataset
   (mount-tests/fixtures/data) into a directory, under two byte orders: `as_stored/` and
   `native/`, as dNNNNN (the dataset file as served), dNNNNN.npy and dNNNNN.hdr, with
   index.json mapping numbers to fixture paths.
2. This script checks, for every dataset:
   - `numpy.load(dNNNNN.npy, mmap_mode='r')` equals h5py's `ds[()]` (values, by bytes after a
     cast to h5py's dtype; under `as_stored` the dtype must be h5py's too);
   - under `native/`, the npy dtype has no foreign byte order and the dataset file dNNNNN holds
     the npy data bytes;
   - ENVI pairs (dNNNNN + dNNNNN.hdr) opened by GDAL give h5py's values, shaped
     (bands, lines, samples);
   - vlen text views have one line per element equal to h5py's values.

Run from the repository root: `python3 mount-tests/views_check.py [--dump DIR] [--no-build]`.
h5py and numpy come from this interpreter; GDAL from Debian's python3-gdal (run through
/usr/bin/python3, `apt-get install -y gdal-bin python3-gdal`), skipped if absent.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np
from numpy.lib.recfunctions import repack_fields

try:  # the plugin filters of the fixture corpus (blosc, zstd, ...)
    import hdf5plugin  # noqa: F401
except ImportError:
    hdf5plugin = None

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "mount-tests" / "fixtures" / "data"
GDAL_PY = "/usr/bin/python3"

# Run under Debian's python3: read each ENVI pair with GDAL and save it as (bands, lines,
# samples) next to it as NAME.gdal.npy; print one JSON line of results.
GDAL_READER = r"""
import json, sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
out = {}
for name in sys.argv[1:]:
    try:
        ds = gdal.Open(name)
        if ds.GetDriver().ShortName != "ENVI":
            raise RuntimeError("driver " + ds.GetDriver().ShortName)
        a = np.stack([ds.GetRasterBand(b + 1).ReadAsArray() for b in range(ds.RasterCount)])
        np.save(name + ".gdal.npy", a)
        out[name] = "ok"
    except Exception as e:
        out[name] = "error: %s" % e
print(json.dumps(out))
"""


class Checker:
    def __init__(self):
        self.failures = []
        self.counts = {}

    def ok(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def fail(self, where, msg):
        self.failures.append(f"{where}: {msg}")


def same_values(a, h):
    """a (from a view) equals h (from h5py), bit for bit after a cast to h5py's dtype."""
    if a.shape != h.shape:
        return f"shape {a.shape} != {h.shape}"
    try:
        cast = np.asarray(a).astype(h.dtype)
    except (TypeError, ValueError) as e:
        return f"cannot cast {a.dtype} to {h.dtype}: {e}"
    h = np.ascontiguousarray(h)
    if h.dtype.names:
        # Padding bytes between fields are served as stored; h5py zeroes them. Compare fields.
        cast, h = repack_fields(cast, recurse=True), repack_fields(h, recurse=True)
    if cast.tobytes() == h.tobytes():
        return None
    if h.dtype.kind == "S":
        # Space-padded strings: h5py converts the padding on read; compare the text.
        strip = [x.rstrip(b" \0") for x in np.asarray(a).ravel()]
        if strip == [x.rstrip(b" \0") for x in h.ravel()]:
            return None
    return "values differ"


def foreign_order(dt):
    """True if any multi-byte number in dt is not in native order."""
    if dt.fields:
        return any(foreign_order(f[0]) for f in dt.fields.values())
    if dt.subdtype:
        return foreign_order(dt.subdtype[0])
    return dt.itemsize > 1 and dt.kind in "iufcb" and not dt.isnative


def check_npy(c, where, path, h, tree):
    a = np.load(path, mmap_mode="r")
    if h.dtype.kind == "O":  # references: served as raw bytes, |V
        if a.dtype.kind != "V" or a.shape != h.shape:
            return c.fail(where, f"reference npy {a.dtype} {a.shape}")
        return c.ok("npy (references, raw)")
    err = same_values(a, h)
    if err:
        return c.fail(where, f"npy {err} ({a.dtype} vs h5py {h.dtype})")
    if tree == "as_stored" and a.dtype != h.dtype:
        return c.fail(where, f"npy dtype {a.dtype.descr} != h5py {h.dtype.descr}")
    if tree == "native" and foreign_order(a.dtype):
        return c.fail(where, f"native npy dtype {a.dtype.descr}")
    c.ok(f"npy {tree}")


def check_text(c, where, path, ds):
    text = Path(path).read_bytes().decode("utf-8")
    if ds.shape is None:  # null dataspace: no elements, no text
        return c.fail(where, "text for a null dataspace") if text else c.ok("text")
    lines = text.split("\n")
    if lines[-1] != "":
        return c.fail(where, "text does not end in a newline")
    lines = lines[:-1]
    vals = ds[()]
    vals = [vals] if ds.shape == () else list(vals)
    if len(lines) != len(vals):
        return c.fail(where, f"{len(lines)} lines for {len(vals)} elements")
    for line, v in zip(lines, vals):
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        if isinstance(v, str):
            want = v.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
            if line != want:
                return c.fail(where, f"line {line!r} != {want!r}")
        else:
            got = [float(x) for x in line.split()]
            if got != [float(x) for x in v]:
                return c.fail(where, f"line {line!r} != {list(v)}")
    c.ok("text")


def check_envi_pairs(c, pairs):
    if not os.path.exists(GDAL_PY):
        c.fail("gdal", f"{GDAL_PY} missing")
        return
    names = [str(p) for p, _, _ in pairs]
    results = {}
    for i in range(0, len(names), 200):
        r = subprocess.run([GDAL_PY, "-c", GDAL_READER, *names[i:i + 200]],
                           capture_output=True, text=True)
        if r.returncode != 0:
            c.fail("gdal", r.stderr.strip()[-500:])
            return
        results.update(json.loads(r.stdout.strip().splitlines()[-1]))
    for path, where, h in pairs:
        res = results.get(str(path))
        code = Path(str(path) + ".hdr").read_text().split("data type = ")[1].split()[0]
        if res != "ok" and code in ("14", "15") and "data_type" in str(res):
            # ENVI codes 14/15 (64-bit integers) are standard, but older GDAL ENVI drivers
            # (3.6) do not know them.
            c.ok("envi 64-bit ints: GDAL refuses (known)")
            continue
        if res != "ok":
            c.fail(where, f"GDAL: {res}")
            continue
        g = np.load(str(path) + ".gdal.npy")
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", help="dump directory (default: a temporary one)")
    ap.add_argument("--no-build", action="store_true", help="use an existing dump")
    args = ap.parse_args()
    tmp = None
    if args.dump:
        dump = Path(args.dump).resolve()
    else:
        tmp = tempfile.TemporaryDirectory(prefix="h5mount-views-")
        dump = Path(tmp.name)
    if not args.no_build:
        env = dict(os.environ, H5MOUNT_VIEWS_DUMP=str(dump))
        subprocess.run(["cargo", "test", "--quiet", "--test", "views", "--", "--ignored",
                        "dump_views"], cwd=ROOT, env=env, check=True)
    index = json.loads((dump / "index.json").read_text())
    # External storage names are relative; libhdf5 resolves them against the current directory.
    os.chdir(DATA)
    c = Checker()
    files = {}
    envi_pairs = []
    for e in index:
        where = f"{e['tree']}:{e['file']}:{e['path']}"
        base = dump / e["tree"] / e["name"]
        for err in e["errors"]:
            if e.get("raw_readable", True):
                c.fail(where, f"view read failed: {err}")
            else:  # the library cannot read the dataset itself (VDS, missing filter)
                c.ok("skipped: dataset unreadable by the library")
                print(f"note: {where}: {err}", file=sys.stderr)
        if not e.get("raw_readable", True):
            continue
        if e["file"] not in files:
            files[e["file"]] = h5py.File(DATA / e["file"], "r")
        ds = files[e["file"]][e["path"]]
        try:
            h = ds[()]
        except Exception as ex:  # h5py cannot read it either (e.g. missing plugin)
            c.ok("skipped: h5py cannot read")
            print(f"note: {where}: h5py: {ex}", file=sys.stderr)
            continue
        if e["primary"] == "Text" and "" in e["files"] and e["tree"] == "as_stored":
            check_text(c, where, base, ds)
        if isinstance(h, h5py.Empty):
            if ".npy" in e["files"] or ".hdr" in e["files"]:
                c.fail(where, "sidecars for a null dataspace")
            continue
        h = np.asarray(h)
        if ".npy" in e["files"]:
            check_npy(c, where, base.with_name(e["name"] + ".npy"), h, e["tree"])
            if e["primary"] == "Data" and "" in e["files"]:
                npy = base.with_name(e["name"] + ".npy").read_bytes()
                if not npy.endswith(base.read_bytes()):
                    c.fail(where, "dataset file differs from the npy data")
        if ".hdr" in e["files"] and "" in e["files"]:
            envi_pairs.append((base, where, h))
    check_envi_pairs(c, envi_pairs)
    for k in sorted(c.counts):
        print(f"{c.counts[k]:6d}  {k}")
    for f in c.failures:
        print("FAIL", f)
    print(f"{sum(c.counts.values())} checks passed, {len(c.failures)} failed")
    if tmp:
        tmp.cleanup()
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
