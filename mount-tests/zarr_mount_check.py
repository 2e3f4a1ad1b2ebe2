#!/usr/bin/env python3
"""Check an h5mount Zarr store (a directory mount served with --zarr) with zarr-python.

Usage: zarr_mount_check.py MOUNT DATA_DIR FORMAT SEED

MOUNT is the mounted directory DATA_DIR served with --zarr (FORMAT 3) or --zarr=2 (FORMAT 2):
each HDF5 file of DATA_DIR is a group named by the file. The store is opened the way a user
opens it (zarr.open_group on the mount, consolidated metadata), and for every numeric
dataset of every file (h5py's visit: each object once; soft and external links are checked
by the caller) the array of the same path must hold h5py's values, NaN-aware, whole and in
a few random slices (SEED; an array of very many chunks in slices only). For every chunked dataset the chunk keys listed in the array's
directory must be exactly the chunks h5py says are written, and each chunk of the grid that
was not written must be absent (stat: ENOENT) while zarr-python reads it as the fill value
(covered by the whole-array comparison). Every array directory says how its chunks are
served (xattr user.h5mount.zarr_encoding).

Prints one JSON object: counts, and lists naming "FILE/PATH" for each dataset that did not
compare equal ("mismatch"), failed with EIO ("eio"), failed otherwise ("errors"), is absent
from the store ("missing"), lists other keys than h5py's chunks ("listing") or has no listing
h5py can vouch for ("no_oracle"). The caller
decides which of those are expected (datasets this build cannot decode; datasets libhdf5
converts on read). Exit status 0 unless the script itself could not run.
"""

import errno
import json
import os
import random
import sys
import warnings

warnings.simplefilter("ignore")  # zarr-python warns that v3 consolidated metadata is an extension

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import zarr  # noqa: E402

try:
    import hdf5plugin  # noqa: F401,E402  (h5py then reads the plugin filters too)
except ImportError:
    pass

DOCUMENTS = {"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"}

# Arrays of more chunks than this are compared in slices of about this many chunks only:
# zarr-python spends a fraction of a millisecond on each chunk, written or not.
MANY_CHUNKS = 4096


def numeric(ds):
    dt = ds.dtype
    return (
        dt.kind in "biufc"
        and dt.fields is None
        and dt.subdtype is None
        and h5py.check_vlen_dtype(dt) is None
        and ds.shape is not None
    )


def same(a, b):
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fc":
        return np.array_equal(a, b, equal_nan=True)
    return np.array_equal(a, b)


def random_slices(shape, span, rng, n=3):
    """`n` random hyperslabs of `shape`, each at most `span` long per dimension."""
    out = []
    for _ in range(n):
        sl = []
        for d, most in zip(shape, span):
            if d == 0:
                sl.append(slice(None))
                continue
            start = rng.randrange(d)
            stop = rng.randrange(start + 1, min(d, start + most) + 1)
            sl.append(slice(start, stop, rng.choice([1, 1, 2, 3])))
        out.append(tuple(sl))
    return out


def listed_keys(array_dir, fmt, rank):
    """The chunk coordinates the array directory lists."""
    keys = set()
    if fmt == 2:
        for name in os.listdir(array_dir):
            if name in DOCUMENTS:
                continue
            keys.add(tuple(int(p) for p in name.split(".")) if rank else ())
        return keys
    top = os.path.join(array_dir, "c")
    if not os.path.exists(top):
        return keys
    if rank == 0:
        return {()}

    def walk(path, prefix):
        for name in os.listdir(path):
            coords = prefix + (int(name),)
            sub = os.path.join(path, name)
            if len(coords) == rank:
                assert os.path.isfile(sub), sub
                keys.add(coords)
            else:
                assert os.path.isdir(sub), sub
                walk(sub, coords)

    walk(top, ())
    return keys


def key_path(array_dir, fmt, coords):
    if fmt == 2:
        return os.path.join(array_dir, ".".join(map(str, coords)) or "0")
    return os.path.join(array_dir, "c", *map(str, coords))


def written_chunks(ds):
    """Chunk coordinates h5py says are written; None where its answer cannot be right.

    libhdf5 (2.0) reports chunk offsets outside the dataset for extensible-array indexes
    whose unlimited dimension is not the first: such a dataset has no listing to compare
    with here (its values still are).
    """
    offsets = []
    if hasattr(ds.id, "chunk_iter"):
        ds.id.chunk_iter(lambda info: offsets.append(info.chunk_offset))
    else:
        offsets = [ds.id.get_chunk_info(i).chunk_offset for i in range(ds.id.get_num_chunks())]
    if any(o >= n for off in offsets for o, n in zip(off, ds.shape)):
        return None
    return {tuple(o // c for o, c in zip(off, ds.chunks)) for off in offsets}


def main():
    mount, data_dir, fmt, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    root = zarr.open_group(mount, mode="r", zarr_format=fmt)
    report = {
        "files": 0,
        "compared": 0,
        "sliced_only": 0,
        "slices": 0,
        "listings": 0,
        "unwritten_absent": 0,
        "encodings": 0,
        "mismatch": [],
        "eio": [],
        "errors": [],
        "missing": [],
        "listing": [],
        "no_oracle": [],
    }
    for fname in sorted(os.listdir(data_dir)):
        path = os.path.join(data_dir, fname)
        try:
            f = h5py.File(path, "r")
        except OSError:
            continue  # not HDF5: not part of the store
        report["files"] += 1
        datasets = []
        f.visititems(lambda name, obj: datasets.append(name) if isinstance(obj, h5py.Dataset) else None)
        for name in datasets:
            ds = f[name]
            label = f"{fname}/{name}"
            if not numeric(ds):
                continue
            try:
                want = ds[()]
            except Exception:
                continue  # h5py cannot read it either: nothing to compare with
            try:
                arr = root[f"{fname}/{name}"]
            except KeyError:
                report["missing"].append(label)
                continue
            array_dir = os.path.join(mount, fname, name)
            enc = os.getxattr(array_dir, "user.h5mount.zarr_encoding").decode()
            if not (enc.startswith("decoded") or enc.startswith("pass-through")):
                report["errors"].append(f"{label}: encoding {enc!r}")
            report["encodings"] += 1
            rank = len(ds.shape)
            grid = [-(-n // c) for n, c in zip(ds.shape, arr.chunks)]
            many = rank > 0 and int(np.prod(grid)) > MANY_CHUNKS
            span = list(ds.shape)
            if many:
                per_dim = max(1, int(MANY_CHUNKS ** (1 / rank)))
                span = [c * per_dim for c in arr.chunks]
            try:
                if many:
                    ok = True
                    report["sliced_only"] += 1
                else:
                    ok = same(np.asarray(arr[...]), np.asarray(want))
                for sl in random_slices(ds.shape, span, rng) if rank else []:
                    ok = ok and same(np.asarray(arr[sl]), np.asarray(ds[sl]))
                    report["slices"] += 1
            except OSError as e:
                if e.errno == errno.EIO:
                    report["eio"].append(label)
                else:
                    report["errors"].append(f"{label}: {e!r}")
                continue
            except Exception as e:  # noqa: BLE001 (reported, judged by the caller)
                report["errors"].append(f"{label}: {e!r}")
                continue
            report["compared"] += 1
            if not ok:
                report["mismatch"].append(label)
            if ds.chunks is None:
                continue
            written = written_chunks(ds)
            if written is None:
                report["no_oracle"].append(label)
                continue
            if listed_keys(array_dir, fmt, len(ds.shape)) != written:
                report["listing"].append(label)
            report["listings"] += 1
            grid = [-(-n // c) for n, c in zip(ds.shape, ds.chunks)]
            for coords in np.ndindex(*grid):  # to the first unwritten chunk
                if coords in written:
                    continue
                try:
                    os.stat(key_path(array_dir, fmt, coords))
                    report["listing"].append(f"{label}: unwritten chunk {coords} has a key")
                except FileNotFoundError:
                    report["unwritten_absent"] += 1
                break  # one per dataset is enough; the listing compared them all
        f.close()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
