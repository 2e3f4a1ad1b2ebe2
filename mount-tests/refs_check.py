#!/usr/bin/env python3
"""Check `h5mount refs` manifests with the clients that read them: fsspec's
`ReferenceFileSystem` under zarr-python (Zarr format 2), no mount.

For each file: write its manifest with `h5mount refs` at two inline thresholds (0: every
chunk that can be referenced is; 64 MiB: decoded-only arrays inline too), open it through
fsspec with zarr-python, and check that every array it holds equals h5py's values
(NaN-aware; strings as text) and that what the manifest leaves out is listed there with a
reason (at the large threshold, only what the Zarr view itself cannot map). An array
present with wrong values is a failure; so is an array missing without being listed.

Run from the repository root:
`python3 mount-tests/refs_check.py H5MOUNT_BINARY [FILE.h5 ...]`, or for a manifest made
elsewhere (of a remote object), `refs_check.py --manifest MANIFEST PROTOCOL FILE.h5`
(default: the files `zarr_check.py` checks). Needs zarr (3.x), fsspec, numcodecs, h5py
and hdf5plugin. Prints `N passed, M failed, K left out`; exits 1 on a failure.
"""

import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import fsspec
import h5py
import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zarr_check import DEFAULT, expected_values, same, walk  # noqa: E402


def arrays_of(h):
    """The paths of every dataset of the HDF5 file `h`, as the manifest names them."""
    out = []
    h.visititems(lambda name, obj: out.append("/" + name)
                 if isinstance(obj, h5py.Dataset) else None)
    return out


def check(binary, src, tmp, threshold, counts, failures):
    out = Path(tmp) / ("%s_%d.json" % (src.stem, threshold))
    subprocess.run([str(binary), "refs", str(src), "-o", str(out),
                    "--inline-threshold", str(threshold)],
                   check=True, stderr=subprocess.DEVNULL)
    check_manifest(out, "file", src, threshold, counts, failures)


def check_manifest(out, protocol, src, threshold, counts, failures):
    """Read every array of manifest `out` (its references read through fsspec's
    `protocol`) and compare with the HDF5 file `src`."""
    # JSON, or the Parquet layout (a directory), whose .zmetadata has the same h5mount member.
    out = Path(out)
    manifest = json.loads((out / ".zmetadata" if out.is_dir() else out).read_text())
    left = {("/" + p.lstrip("/")): why for p, why in manifest["h5mount"]["left_out"].items()}
    # An asynchronous target (HTTP) must be asked for as one; the local one is wrapped.
    remote = {"asynchronous": True} if protocol != "file" else {}
    fs = fsspec.filesystem("reference", fo=str(out), remote_protocol=protocol,
                           remote_options=remote, asynchronous=True,
                           skip_instance_cache=True)
    store = zarr.storage.FsspecStore(fs, read_only=True, path="")
    root = zarr.open_group(store=store, mode="r", zarr_format=2)
    seen = set()
    with h5py.File(src, "r") as h:
        for path, arr in walk(root):
            seen.add(path)
            what = "%s:%s (threshold %d)" % (src.name, path, threshold)
            try:
                want = expected_values(h[path])
                got = np.asarray(arr[...])
                if not want.dtype.names and want.dtype.kind != "O" and \
                        got.shape != want.shape and got.size == want.size:
                    got = got.reshape(want.shape)
                ok = same(got, want)
            except Exception as e:  # noqa: BLE001  (report and go on)
                ok = False
                what += ": %r" % (e,)
            counts["passed" if ok else "failed"] += 1
            if not ok:
                failures.append(what)
        for path in arrays_of(h):
            if path in seen:
                continue
            if path in left:
                counts["left out"] += 1
                continue
            # Dimensions without a variable (netCDF) are not arrays; anything else
            # missing must be listed.
            if h[path].attrs.get("CLASS") == b"DIMENSION_SCALE" and \
                    b"This is a netCDF dimension but not a netCDF variable" in \
                    bytes(h[path].attrs.get("NAME", b"")):
                continue
            counts["failed"] += 1
            failures.append("%s:%s (threshold %d): missing, not listed" % (
                src.name, path, threshold))


def main():
    warnings.simplefilter("ignore")
    counts = {"passed": 0, "failed": 0, "left out": 0}
    failures = []
    if sys.argv[1] == "--manifest":
        # A manifest made elsewhere (of a remote object): MANIFEST PROTOCOL FILE.h5
        out, protocol, src = sys.argv[2], sys.argv[3], Path(sys.argv[4])
        check_manifest(out, protocol, src, -1, counts, failures)
        report(counts, failures)
    binary = Path(sys.argv[1])
    files = [Path(f) for f in sys.argv[2:]] or DEFAULT
    with tempfile.TemporaryDirectory() as tmp:
        for src in files:
            for threshold in (0, 64 << 20):
                check(binary, src, tmp, threshold, counts, failures)
    report(counts, failures)


def report(counts, failures):
    for f in failures:
        print("FAIL", f)
    print("%d passed, %d failed, %d left out" % (
        counts["passed"], counts["failed"], counts["left out"]))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
