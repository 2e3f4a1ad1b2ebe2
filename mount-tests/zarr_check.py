#!/usr/bin/env python3
"""Check the Zarr mapping (src/views/zarr) with zarr-python, without mounting.

`cargo run --example zarr_export` writes the store the Zarr view serves for an HDF5 file
into a directory (metadata documents and chunk keys as files). This script does so for
each file, in Zarr v3 and v2, with pass-through and with every chunk decoded, then opens
each array with zarr-python and checks that its values equal h5py's (NaN-aware; strings
as text), that a pass-through array declares codecs, and that zarr-python reads the
dimension names and attributes. It is the same reading a client does through a mount,
minus FUSE.

Run from the repository root:
`python3 mount-tests/zarr_check.py [--no-build] [FILE.h5 ...]`
(default: the Zarr fixtures and the filter, dtype and layout fixtures of the corpus).
Needs zarr (3.x), numcodecs, h5py and hdf5plugin. Prints `N passed, M failed`.
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401  (the plugin filters of the fixtures)
import numpy as np
import zarr

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "mount-tests" / "fixtures"
# The corpus fixtures of filters, types and layouts; not the chunk-index stress files
# (chunked_huge, chunked_many: hundreds of MB of chunk keys, nothing new for the mapping).
DEFAULT = sorted((FIX / "zarr").glob("*.h5")) + sorted(
    p for p in (FIX / "data").glob("*.h5")
    if p.name.startswith(("filters_", "dtypes_", "layouts_", "chunked_", "attrs_"))
    and not p.name.startswith(("chunked_huge", "chunked_many")))


def export(binary, src, out, version, decoded):
    args = [str(binary), str(src), str(out), str(version)] + (["decoded"] if decoded else [])
    subprocess.run(args, check=True, stderr=subprocess.DEVNULL)


def expected_values(ds):
    """h5py's values as the mapping serves them (raw bytes for what it cannot type)."""
    if ds.shape is None:  # a null dataspace: an empty array
        return np.zeros((0,), dtype=ds.dtype)
    data = ds[()]
    if h5py.check_string_dtype(ds.dtype) and ds.dtype.kind == "O":
        return np.array([x.decode("utf-8", "replace") if isinstance(x, bytes) else x
                         for x in np.ravel(data)], dtype=object).reshape(np.shape(data))
    return np.asarray(data)


def same(got, want):
    if got.dtype.kind in "OTU":
        return [str(x) for x in np.ravel(got)] == [str(x) for x in np.ravel(want)]
    if got.shape != want.shape:
        return False
    if got.dtype.names or got.dtype.kind == "V" or want.dtype.names:
        # structured or raw bytes: compare the bytes of each element
        return np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(
            want.astype(want.dtype.newbyteorder("=") if want.dtype.byteorder not in "=|"
                        and not want.dtype.names else want.dtype)).tobytes() or \
            np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()
    if got.dtype.kind in "fc":
        return np.array_equal(got, want, equal_nan=True)
    return np.array_equal(got, want)


def check_file(binary, src, tmp, counts, failures):
    with h5py.File(src, "r") as h:
        for version in (3, 2):
            for decoded in (False, True):
                out = Path(tmp) / ("%s_v%d%s" % (src.stem, version, "_d" if decoded else ""))
                export(binary, src, out, version, decoded)
                root = zarr.open_group(str(out), mode="r", zarr_format=version)
                for path, arr in walk(root):
                    what = "%s:%s v%d%s" % (src.name, path, version, " decoded" if decoded else "")
                    try:
                        ds = h[path]
                        want = expected_values(ds)
                        got = np.asarray(arr[...])
                        if not want.dtype.names and want.dtype.kind != "O" and \
                                got.shape != want.shape and got.size == want.size:
                            # an array datatype: h5py folds it into the shape too
                            got = got.reshape(want.shape)
                        ok = same(got, want)
                        meta = json.loads((out / path.lstrip("/") /
                                           ("zarr.json" if version == 3 else ".zarray")).read_text())
                        if decoded:
                            codecs = meta.get("codecs", [])[1:] if version == 3 else (
                                [meta["compressor"]] if meta["compressor"] else [])
                            ok = ok and not codecs
                    except Exception as e:  # noqa: BLE001  (report and go on)
                        ok = False
                        what += ": %r" % (e,)
                    counts[ok] += 1
                    if not ok:
                        failures.append(what)
                shutil.rmtree(out)


def walk(group, prefix=""):
    for name, a in group.arrays():
        yield "%s/%s" % (prefix, name), a
    for name, g in group.groups():
        yield from walk(g, "%s/%s" % (prefix, name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if not args.no_build:
        subprocess.run(["cargo", "build", "-q", "--example", "zarr_export"], cwd=ROOT,
                       check=True)
    binary = ROOT / "target" / "debug" / "examples" / "zarr_export"
    counts = {True: 0, False: 0}
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for src in args.files or DEFAULT:
            check_file(binary, src, tmp, counts, failures)
    for f in failures:
        print("FAIL", f)
    print("%d passed, %d failed" % (counts[True], counts[False]))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
