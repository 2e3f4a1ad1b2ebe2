#!/usr/bin/env python3
"""Check `h5mount refs` manifests with the clients that read them: fsspec's
`ReferenceFileSystem` under zarr-python (Zarr format 2), no mount.

For each file: write its manifest with `h5mount refs` at two inline thresholds (0: every
chunk that can be referenced is; 64 MiB: decoded-only arrays inline too), open it through
fsspec with zarr-python, and check that every array it holds equals h5py's values
(NaN-aware; strings as text) and that what the manifest leaves out is listed there with a
reason (at the large threshold, only what the Zarr view itself cannot map). An array
present with wrong values is a failure; so is an array missing without being listed.

Manifests made elsewhere (of remote objects, read back from where they point):
`refs_check.py --remote PROTOCOL [--endpoint URL] [MANIFEST FILE.h5 ...] [--xarray
MANIFEST FILE.h5 ...]`, pairs of a manifest and the local copy of the object it names, all
in this one process (a Python start and its imports cost more than the reading of a small
file). PROTOCOL is fsspec's for the references (`http`; `s3` through s3fs, unsigned, at
the endpoint URL). The pairs after `--xarray` are also opened with xarray, group by group
(see `check_xarray`).

Run from the repository root:
`python3 mount-tests/refs_check.py H5MOUNT_BINARY [FILE.h5 ...]` (default: the files
`zarr_check.py` checks). Needs zarr (3.x), fsspec, numcodecs, h5py and hdf5plugin; aiohttp
for `http`, s3fs for `s3`, xarray for `--xarray`. Prints `N passed, M failed, K left out`;
exits 1 on a failure.
"""

import argparse
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
    check_manifest(out, "file", src, "threshold %d" % threshold, counts, failures)


def remote_options(protocol, endpoint=None):
    """fsspec's options for the filesystem of the references: an asynchronous target (HTTP,
    S3) must be asked for as one (the local one is wrapped); S3 unsigned at `endpoint`."""
    if protocol == "file":
        return {}
    options = {"asynchronous": True}
    if protocol == "s3":
        options.update(anon=True, client_kwargs={"endpoint_url": endpoint})
    return options


def check_manifest(out, protocol, src, label, counts, failures, endpoint=None):
    """Read every array of manifest `out` (its references read through fsspec's
    `protocol`) and compare with the HDF5 file `src`; a failure names `label` too."""
    # JSON, or the Parquet layout (a directory), whose .zmetadata has the same h5mount member.
    out = Path(out)
    manifest = json.loads((out / ".zmetadata" if out.is_dir() else out).read_text())
    left = {("/" + p.lstrip("/")): why for p, why in manifest["h5mount"]["left_out"].items()}
    fs = fsspec.filesystem("reference", fo=str(out), remote_protocol=protocol,
                           remote_options=remote_options(protocol, endpoint),
                           asynchronous=True, skip_instance_cache=True)
    store = zarr.storage.FsspecStore(fs, read_only=True, path="")
    root = zarr.open_group(store=store, mode="r", zarr_format=2)
    seen = set()
    with h5py.File(src, "r") as h:
        for path, arr in walk(root):
            seen.add(path)
            what = "%s:%s (%s)" % (src.name, path, label)
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
            failures.append("%s:%s (%s): missing, not listed" % (src.name, path, label))


def check_xarray(out, protocol, src, counts, failures, endpoint=None):
    """Open every group of manifest `out` that holds arrays with xarray (the root through
    kerchunk's engine where installed; the others, or all without it, with engine "zarr"
    over fsspec's reference filesystem), CF decoding off: each of its arrays must be a
    variable, equal to h5py's values of `src`. A netCDF-4 file (`_NCProperties`) is also
    opened with CF decoding on, identical to h5netcdf's reading of `src`. A group xarray
    cannot open is a failure."""
    import xarray as xr
    storage = {"remote_protocol": protocol,
               "remote_options": remote_options(protocol, endpoint)}

    def opened(group, **kw):
        # Numpy arrays, not dask's (kerchunk's engine asks xarray for dask arrays unless
        # told): dask's scheduling costs more than the reading.
        if group is None and "kerchunk" in xr.backends.list_engines():
            return xr.open_dataset(str(out), engine="kerchunk", storage_options=storage,
                                   open_dataset_options={"chunks": None}, **kw)
        # A subgroup through the consolidated metadata: kerchunk's engine opens without,
        # and then zarr-python's FsspecStore lists a subgroup `sub` by asking the reference
        # filesystem for `/sub`, which names no key: the group seems empty, whatever the
        # manifest (kerchunk's own too).
        return xr.open_dataset("reference://", engine="zarr", group=group, chunks=None,
                               backend_kwargs={"storage_options": dict(storage, fo=str(out)),
                                               "consolidated": True}, **kw)

    manifest = json.loads(Path(out).read_text())
    # The groups that hold arrays ('' is the root), with their arrays' names.
    groups = {}
    for k in manifest["refs"]:
        array, _, doc = k.rpartition("/")
        if doc == ".zarray":
            group, _, name = array.rpartition("/")
            groups.setdefault(group, set()).add(name)
    with h5py.File(src, "r") as h:
        for group, names in sorted(groups.items()):
            what = "%s:/%s (xarray)" % (src.name, group)
            try:
                # Raw values: nothing decoded, and Zarr v2's fill_value no mask (xarray's
                # zarr backend masks with it even under decode_cf=False).
                with opened(group or None, mask_and_scale=False, decode_times=False,
                            decode_timedelta=False, concat_characters=False,
                            use_zarr_fill_value_as_mask=False) as ds:
                    if names - set(ds.variables):
                        counts["failed"] += 1
                        failures.append("%s: not variables: %s" % (
                            what, sorted(names - set(ds.variables))))
                    for name, var in ds.variables.items():
                        path = "/%s/%s" % (group, name) if group else "/" + name
                        zarray = json.loads(manifest["refs"][path[1:] + "/.zarray"])
                        if isinstance(zarray["dtype"], list) and not h[path].dtype.isnative:
                            # xarray's endianness decoding casts a record with fields of
                            # another byte order to plain bytes, which numpy refuses: xarray
                            # cannot give these values (zarr-python's reading checked them).
                            print("xarray cannot read %s:%s (%s)" % (
                                src.name, path, zarray["dtype"]))
                            continue
                        want = expected_values(h[path])
                        got = var.values
                        if not want.dtype.names and want.dtype.kind != "O" and \
                                got.shape != want.shape and got.size == want.size:
                            got = got.reshape(want.shape)
                        ok = same(got, want)
                        counts["passed" if ok else "failed"] += 1
                        if not ok:
                            failures.append("%s:%s (xarray): other values" % (src.name, path))
            except Exception as e:  # noqa: BLE001  (report and go on)
                counts["failed"] += 1
                failures.append("%s: %r" % (what, e))
        if "_NCProperties" not in h.attrs:
            return
    try:
        want = xr.open_dataset(src, engine="h5netcdf").load()
        with opened(None) as got:
            xr.testing.assert_identical(want, got.load())
        counts["passed"] += 1
    except Exception as e:  # noqa: BLE001
        counts["failed"] += 1
        failures.append("%s (xarray, CF decoded, as h5netcdf): %r" % (src.name, e))


def remote_main(argv):
    """`--remote`: many manifests of remote objects, each read back with its local copy."""
    ap = argparse.ArgumentParser(prog="refs_check.py --remote")
    ap.add_argument("protocol")
    ap.add_argument("--endpoint")
    ap.add_argument("--xarray", nargs="+", default=[], metavar="MANIFEST FILE.h5",
                    help="pairs read with xarray too")
    ap.add_argument("pairs", nargs="*", metavar="MANIFEST FILE.h5")
    args = ap.parse_intermixed_args(argv)
    if len(args.pairs) % 2 or len(args.xarray) % 2:
        ap.error("MANIFEST FILE.h5 pairs expected")
    counts = {"passed": 0, "failed": 0, "left out": 0}
    failures = []
    for pairs, xarray in ((args.pairs, False), (args.xarray, True)):
        for out, src in zip(pairs[::2], pairs[1::2]):
            check_manifest(out, args.protocol, Path(src), Path(out).name, counts, failures,
                           args.endpoint)
            if xarray:
                check_xarray(out, args.protocol, Path(src), counts, failures, args.endpoint)
    report(counts, failures)


def main():
    warnings.simplefilter("ignore")
    if sys.argv[1] == "--remote":
        remote_main(sys.argv[2:])
    counts = {"passed": 0, "failed": 0, "left out": 0}
    failures = []
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
