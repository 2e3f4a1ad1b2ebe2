#!/usr/bin/env python3
"""Coverage of reference manifests: h5mount refs beside kerchunk's SingleHdf5ToZarr.

For each fixture file, each tool writes a manifest of the local file; every dataset h5py
reads is then read through fsspec's ReferenceFileSystem with zarr-python (format 2) and
counted as correct (equal to h5py, NaN-aware), wrong (read, other values), or refused (the
tool wrote nothing for it, or the read raised). Prints one table, the tools side by side,
with the time each took.

`python3 mount-tests/bench/refs_coverage.py H5MOUNT_BINARY [FILE.h5 ...]`
(default: the files `zarr_check.py` checks). Needs zarr, fsspec, kerchunk, h5py,
hdf5plugin.
"""

import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import fsspec
import h5py
import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from zarr_check import DEFAULT, expected_values, same  # noqa: E402


def read_all(manifest_path, src, counts):
    fs = fsspec.filesystem("reference", fo=str(manifest_path), remote_protocol="file",
                           asynchronous=True, skip_instance_cache=True)
    store = zarr.storage.FsspecStore(fs, read_only=True, path="")
    try:
        root = zarr.open_group(store=store, mode="r", zarr_format=2)
    except Exception:  # noqa: BLE001
        root = None
    with h5py.File(src, "r") as h:
        names = []
        h.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for n in names:
            try:
                want = expected_values(h[n])
            except Exception:  # noqa: BLE001  (h5py cannot read it either)
                continue
            try:
                got = np.asarray(root[n][...])
                if not want.dtype.names and want.dtype.kind != "O" and \
                        got.shape != want.shape and got.size == want.size:
                    got = got.reshape(want.shape)
                counts["correct" if same(got, want) else "wrong"] += 1
            except Exception:  # noqa: BLE001
                counts["refused"] += 1


def main():
    warnings.simplefilter("ignore")
    binary = sys.argv[1]
    files = [Path(f) for f in sys.argv[2:]] or DEFAULT
    tools = {"h5mount refs": {"correct": 0, "wrong": 0, "refused": 0, "seconds": 0.0},
             "kerchunk": {"correct": 0, "wrong": 0, "refused": 0, "seconds": 0.0}}
    with tempfile.TemporaryDirectory() as tmp:
        for src in files:
            out = Path(tmp) / (src.stem + ".h5mount.json")
            t = time.perf_counter()
            subprocess.run([binary, "refs", str(src), "-o", str(out)],
                           stderr=subprocess.DEVNULL, check=False)
            tools["h5mount refs"]["seconds"] += time.perf_counter() - t
            if out.exists():
                read_all(out, src, tools["h5mount refs"])
            kout = Path(tmp) / (src.stem + ".kerchunk.json")
            t = time.perf_counter()
            try:
                from kerchunk.hdf import SingleHdf5ToZarr
                with open(src, "rb") as f:
                    refs = SingleHdf5ToZarr(f, str(src), inline_threshold=500).translate()
                kout.write_text(json.dumps(refs))
            except Exception:  # noqa: BLE001  (the whole file refused)
                pass
            tools["kerchunk"]["seconds"] += time.perf_counter() - t
            if kout.exists():
                read_all(kout, src, tools["kerchunk"])
            else:
                with h5py.File(src, "r") as h:
                    n = []
                    h.visititems(lambda a, o: n.append(a) if isinstance(o, h5py.Dataset) else None)
                tools["kerchunk"]["refused"] += len(n)
    print("%d files" % len(files))
    print("%-14s %8s %8s %8s %9s" % ("tool", "correct", "wrong", "refused", "seconds"))
    for name, c in tools.items():
        print("%-14s %8d %8d %8d %9.2f" % (name, c["correct"], c["wrong"], c["refused"],
                                          c["seconds"]))


if __name__ == "__main__":
    main()
