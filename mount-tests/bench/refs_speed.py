#!/usr/bin/env python3
"""Manifest speed at a million chunks: `h5mount refs` beside kerchunk, in one run.

Writes (once, in DIR, default /tmp/h5mount-bench-refs) an HDF5 file of one int32 dataset of
1024 x 1024 elements in chunks of one element: 1,048,576 chunks under a v1 B-tree (h5py's
default format). Then times, ROUNDS times each (default 3), the manifest of that file by
`h5mount refs` (the binary given, a release build) and by kerchunk's SingleHdf5ToZarr
(PyPI), both referencing every chunk (inline threshold 0), each as JSON and as kerchunk's
Parquet layout (h5mount `--format parquet`; kerchunk's `refs_to_dataframe` of its references,
timed with the translation), and prints one table: wall seconds (median and spread), CPU
seconds (user + system, median), peak RSS (MB) and output size (MB) of each, and the ratio
of medians. The goal (issue 31): h5mount at most 1 s. Parquet needs kerchunk's fastparquet.

`python3 mount-tests/bench/refs_speed.py H5MOUNT_RELEASE_BINARY [ROUNDS] [DIR]`
"""

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

KERCHUNK = """
import sys, json, warnings
warnings.simplefilter("ignore")
from kerchunk.hdf import SingleHdf5ToZarr
with open(sys.argv[1], "rb") as f:
    refs = SingleHdf5ToZarr(f, sys.argv[1], inline_threshold=0).translate()
with open(sys.argv[2], "w") as o:
    json.dump(refs, o)
"""

KERCHUNK_PARQUET = """
import sys, warnings
warnings.simplefilter("ignore")
from kerchunk.hdf import SingleHdf5ToZarr
from kerchunk.df import refs_to_dataframe
with open(sys.argv[1], "rb") as f:
    refs = SingleHdf5ToZarr(f, sys.argv[1], inline_threshold=0).translate()
refs_to_dataframe(refs, sys.argv[2], record_size=10000)
"""


def make(path):
    import h5py
    import numpy as np
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(1 << 20, dtype="i4").reshape(1024, 1024),
                         chunks=(1, 1))


def timed(cmd):
    """Wall seconds, CPU seconds and peak RSS (MB) of one run of `cmd` (a child; its own
    peak, told by GNU time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, int(r.stderr.strip().splitlines()[-1]) / 1024


def main():
    binary = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    d = Path(sys.argv[3] if len(sys.argv) > 3 else "/tmp/h5mount-bench-refs")
    d.mkdir(parents=True, exist_ok=True)
    src = d / "million.h5"
    if not src.exists():
        make(src)
    tools = {
        "h5mount refs": [binary, "refs", str(src), "-o", str(d / "h5mount.json"),
                         "--inline-threshold", "0"],
        "kerchunk": [sys.executable, "-c", KERCHUNK, str(src), str(d / "kerchunk.json")],
        "h5mount parq": [binary, "refs", str(src), "-o", str(d / "h5mount.parq"),
                         "--inline-threshold", "0"],
        "kerchunk parq": [sys.executable, "-c", KERCHUNK_PARQUET, str(src),
                          str(d / "kerchunk.parq")],
    }
    outputs = {"h5mount refs": d / "h5mount.json", "kerchunk": d / "kerchunk.json",
               "h5mount parq": d / "h5mount.parq", "kerchunk parq": d / "kerchunk.parq"}
    results = {}
    # Interleaved rounds, so that a busy moment of the machine hits both tools alike.
    for _ in range(rounds):
        for name, cmd in tools.items():
            results.setdefault(name, []).append(timed(cmd))
    print("1,048,576 chunks (v1 B-tree), %d rounds, %d cores" % (rounds, os.cpu_count()))
    print("%-14s %10s %10s %10s %10s %10s" % (
        "tool", "wall med", "spread", "cpu med", "rss MB", "out MB"))
    med = {}
    for name, rs in results.items():
        walls = [r[0] for r in rs]
        med[name] = statistics.median(walls)
        print("%-14s %9.2fs %9.2fs %9.2fs %10.0f %10.1f" % (
            name, med[name], max(walls) - min(walls), statistics.median(r[1] for r in rs),
            max(r[2] for r in rs), size(outputs[name]) / 1e6))
    print("kerchunk / h5mount (median wall): JSON %.1fx, Parquet %.1fx" % (
        med["kerchunk"] / med["h5mount refs"], med["kerchunk parq"] / med["h5mount parq"]))


def size(path):
    """Bytes of a file, or of every file under a directory."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


if __name__ == "__main__":
    main()
