#!/usr/bin/env python3
"""The Zarr store under xarray and dask, beside xarray with h5netcdf and `cat`, in one run.

Writes (once, in DIR, default /tmp/h5mount-bench-zarr) a float32 dataset of SIZE MiB (a multiple
of 16, default 1024: 16 x SIZE rows of 16384 columns, 16384 x 16384), chunks 256 x 1024,
shuffle + gzip level 4, smooth values that compress about 2:1, and keeps the CRC-32 of h5py's
values beside it. Then, ROUNDS times each (default 3), interleaved, each on a fresh mount:
- `zarr`: `xr.open_zarr(MNT).load()` on a `--zarr` mount with dask's threaded scheduler
  (threads = cores): the chunks pass through as stored, and the reader's cores decode them;
- `zarr-dec`: the same on a `--zarr --zarr-decoded` mount (the daemon decodes, the reader
  copies);
- `h5netcdf`: `xr.open_dataset(FILE, engine="h5netcdf").load()` on the file (libhdf5
  decodes, one thread);
- `cat`: `cat` of the dataset's file in a plain mount (the daemon decodes).
Prints wall seconds (median, spread), the reader's CPU seconds and the daemon's CPU seconds
(median), and the ratios of medians. The issue's aim: with pass-through the daemon only
serves stored bytes, so the store scales with the reader's cores.

With --s3, then the same file over S3 at 30 ms per request (SeaweedFS behind an nginx proxy,
as mount-tests/bench/remote's s3_30) against xarray with h5netcdf over s3fs with its default
cache and with the 4 MiB block cache xarray uses for a URL: see zarr_speed_s3.py. Every
reader's values there are checked against h5py's. --no-local runs only that section.

`python3 mount-tests/bench/zarr_speed.py H5MOUNT_RELEASE_BINARY [ROUNDS] [DIR]
    [--size MIB] [--s3] [--no-local]`
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

LOAD_ZARR = """
import sys, warnings, dask, xarray as xr
warnings.simplefilter("ignore")
dask.config.set(scheduler="threads", num_workers=int(sys.argv[2]))
ds = xr.open_zarr(sys.argv[1], consolidated=True)
ds.load()
"""

LOAD_H5NETCDF = """
import sys, warnings, xarray as xr
warnings.simplefilter("ignore")
xr.open_dataset(sys.argv[1], engine="h5netcdf", phony_dims="access").load()
"""


def make(path, size_mib):
    """The file with the dataset /x of `size_mib` MiB."""
    import h5py
    import numpy as np
    n, rows = 16384, 256
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=(size_mib * 16, n), dtype="f4", chunks=(rows, 1024),
                             compression="gzip", compression_opts=4, shuffle=True)
        cols = np.linspace(0, 20, n, dtype="f4")
        for r in range(0, size_mib * 16, rows):
            y = np.arange(r, r + rows, dtype="f4")[:, None]
            d[r:r + rows] = np.sin(cols[None, :] + y / 97.0) * 100 + y / 7.0


def reference_crc(path):
    """CRC-32 of /x's values as h5py reads them (row-major bytes), kept beside the file."""
    kept = path.with_suffix(".crc32")
    if kept.exists() and kept.stat().st_mtime >= path.stat().st_mtime:
        return json.loads(kept.read_text())["crc32"]
    import h5py
    import zlib
    crc = 0
    with h5py.File(path, "r") as f:
        d = f["x"]
        for r in range(0, d.shape[0], 1024):
            crc = zlib.crc32(memoryview(d[r:r + 1024]).cast("B"), crc)
    kept.write_text(json.dumps({"crc32": crc}))
    return crc


def cpu_of(pid):
    """User + system CPU seconds of process `pid` so far."""
    fields = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mount(binary, src, mnt, *opts):
    mnt.mkdir(parents=True, exist_ok=True)
    p = subprocess.Popen([binary, "-f", *opts, str(src), str(mnt)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        if os.path.ismount(mnt):
            return p
        time.sleep(0.05)
    p.kill()
    raise SystemExit("mount of %s did not come up" % src)


def timed(cmd, daemon):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    d0 = cpu_of(daemon.pid) if daemon else 0.0
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reader = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, reader, (cpu_of(daemon.pid) - d0) if daemon else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary", help="h5mount (a release build)")
    ap.add_argument("rounds", nargs="?", type=int, default=3)
    ap.add_argument("dir", nargs="?", default="/tmp/h5mount-bench-zarr")
    ap.add_argument("--size", type=int, default=1024, help="MiB of float32 values (multiple of 16)")
    ap.add_argument("--s3", action="store_true", help="also over S3 at 30 ms per request")
    ap.add_argument("--no-local", action="store_true", help="skip the local section")
    args = ap.parse_args()
    if args.size < 16 or args.size % 16 or args.rounds < 1:
        ap.error("--size must be a positive multiple of 16 and ROUNDS at least 1")
    binary, rounds, d = os.path.abspath(args.binary), args.rounds, Path(args.dir).resolve()
    d.mkdir(parents=True, exist_ok=True)
    src = d / ("gzip_shuffle_1g.h5" if args.size == 1024 else "gzip_shuffle_%dm.h5" % args.size)
    if not src.exists():
        make(src, args.size)
    title = "%d MiB float32 (%d x 16384, chunks 256 x 1024), shuffle+gzip (%.0f MiB stored)" % (
        args.size, args.size * 16, src.stat().st_size / 2**20)
    if not args.no_local:
        local(binary, rounds, d, src, title)
    if args.s3:
        import zarr_speed_s3
        zarr_speed_s3.run(binary, src, "x", rounds, reference_crc(src), title)


def local(binary, rounds, d, src, title):
    """The local section: the file itself, a --zarr mount and a plain mount of it."""
    cores = os.cpu_count()
    zm, pm = d / "zarr_mnt", d / "plain_mnt"
    # Each run on a fresh mount: nothing served from the daemon's caches or the kernel's
    # page cache of the mount (the file itself is in the page cache for every reader).
    runs = {
        "zarr": (lambda m: [sys.executable, "-c", LOAD_ZARR, str(m), str(cores)], zm,
                 ["--zarr"]),
        "zarr-dec": (lambda m: [sys.executable, "-c", LOAD_ZARR, str(m), str(cores)], zm,
                     ["--zarr", "--zarr-decoded"]),
        "h5netcdf": (lambda m: [sys.executable, "-c", LOAD_H5NETCDF, str(src)], None, None),
        "cat": (lambda m: ["cat", str(m / "x")], pm, []),
    }
    results = {}
    for _ in range(rounds):
        for name, (cmd, mnt, opts) in runs.items():
            daemon = mount(binary, src, mnt, *opts) if mnt else None
            try:
                results.setdefault(name, []).append(timed(cmd(mnt), daemon))
            finally:
                if daemon:
                    subprocess.run(["fusermount3", "-u", str(mnt)], check=False)
                    daemon.wait(timeout=60)
    print("%s, %d rounds, %d cores" % (title, rounds, cores))
    print("%-10s %9s %8s %11s %11s" % ("reader", "wall med", "spread", "reader cpu",
                                      "daemon cpu"))
    med = {}
    for name, rs in results.items():
        walls = [r[0] for r in rs]
        med[name] = statistics.median(walls)
        print("%-10s %8.2fs %7.2fs %10.2fs %10.2fs" % (
            name, med[name], max(walls) - min(walls), statistics.median(r[1] for r in rs),
            statistics.median(r[2] for r in rs)))
    print("h5netcdf / zarr: %.2fx   h5netcdf / zarr-dec: %.2fx   cat / zarr: %.2fx "
          "(median wall)" % (med["h5netcdf"] / med["zarr"], med["h5netcdf"] / med["zarr-dec"],
                             med["cat"] / med["zarr"]))


if __name__ == "__main__":
    main()
