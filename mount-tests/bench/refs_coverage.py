#!/usr/bin/env python3
"""Coverage of reference manifests: h5mount refs beside kerchunk's SingleHdf5ToZarr and
VirtualiZarr's HDF5 parser.

For each fixture file, each tool writes a manifest of the local file; every dataset h5py
reads is then read through fsspec's ReferenceFileSystem with zarr-python (format 2) and
counted as correct (equal to h5py, NaN-aware), wrong (read, other values), or refused (the
tool wrote nothing for it, the read raised, or it hung). Prints one table, the tools side
by side, with the time each took to write its manifests.

Each (tool, file) runs in a worker process that writes the manifest, then reads the
datasets one by one, printing a line for each as it is done. A dataset that takes longer
than --timeout seconds (default 60; kerchunk has hung on some fixtures) counts as refused:
the worker is killed and a new one goes on from the next dataset with the same manifest. A
manifest not written within that time counts the whole file refused.

`python3 mount-tests/bench/refs_coverage.py H5MOUNT_BINARY [--timeout S] [FILE.h5 ...]`
(default: the files `zarr_check.py` checks). Needs zarr, fsspec, kerchunk, h5py,
hdf5plugin, and VirtualiZarr with its HDF5 parser (`pip install "virtualizarr[hdf]"`;
without it its column says so).
"""

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

TOOLS = ("h5mount refs", "kerchunk", "VirtualiZarr")


def dataset_names(src):
    """The datasets of `src` h5py reads, in visiting order."""
    import h5py
    from zarr_check import expected_values
    names = []
    with h5py.File(src, "r") as h:
        h.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        ok = []
        for n in names:
            try:
                expected_values(h[n])
                ok.append(n)
            except Exception:  # noqa: BLE001  (h5py cannot read it either)
                pass
    return ok


def write_manifest(tool, binary, src, out):
    """Write `tool`'s manifest of `src` to `out`; False when the tool refused the file."""
    if tool == "h5mount refs":
        subprocess.run([binary, "refs", str(src), "-o", str(out)], stderr=subprocess.DEVNULL, check=False)
        return out.exists()
    try:
        if tool == "kerchunk":
            from kerchunk.hdf import SingleHdf5ToZarr
            with open(src, "rb") as f:
                refs = SingleHdf5ToZarr(f, str(src), inline_threshold=500).translate()
        else:
            from vz_refs import kerchunk_refs, local_registry
            refs = {"version": 1, "refs": kerchunk_refs("file://" + str(Path(src).resolve()),
                                                        local_registry())[0]}
    except Exception:  # noqa: BLE001  (the whole file refused)
        return False
    out.write_text(json.dumps(refs))
    return True


def worker(tool, binary, src, out, skip):
    """In a worker process: the manifest (unless written), then one line per dataset."""
    warnings.simplefilter("ignore")
    import fsspec
    import h5py
    import hdf5plugin  # noqa: F401  (the plugin filters of the fixtures)
    import numpy as np
    import zarr
    from zarr_check import expected_values, same
    if not out.exists():
        t = time.perf_counter()
        written = write_manifest(tool, binary, src, out)
        print(json.dumps({"manifest": written, "s": time.perf_counter() - t}), flush=True)
        if not written:
            return
    fs = fsspec.filesystem("reference", fo=str(out), remote_protocol="file", asynchronous=True,
                           skip_instance_cache=True)
    store = zarr.storage.FsspecStore(fs, read_only=True, path="")
    try:
        root = zarr.open_group(store=store, mode="r", zarr_format=2)
    except Exception:  # noqa: BLE001
        root = None
    with h5py.File(src, "r") as h:
        for n in dataset_names(src)[skip:]:
            want = expected_values(h[n])
            try:
                got = np.asarray(root[n][...])
                if not want.dtype.names and want.dtype.kind != "O" and \
                        got.shape != want.shape and got.size == want.size:
                    got = got.reshape(want.shape)
                verdict = "correct" if same(got, want) else "wrong"
            except Exception:  # noqa: BLE001
                verdict = "refused"
            print(json.dumps({"dataset": n, "verdict": verdict}), flush=True)


def run_worker(tool, binary, src, out, skip, timeout):
    """Start a worker; yield its lines (dicts), then None if it went silent for `timeout`
    seconds (it is killed then)."""
    cmd = [sys.executable, __file__, binary, "--worker", tool, str(src), str(out), str(skip)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    lines = queue.Queue()

    def pump():
        for line in p.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    try:
        while True:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                yield None
                return
            if not line:
                return
            try:
                yield json.loads(line)
            except ValueError:
                pass
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def cover(tool, binary, src, tmp, timeout, counts):
    """Count `tool`'s verdicts on the datasets of `src` into `counts`."""
    names = dataset_names(src)
    out = Path(tmp) / f"{src.stem}.{tool.split()[0]}.json"
    done = 0
    while done < len(names):
        hung = True
        for msg in run_worker(tool, binary, src, out, done, timeout):
            if msg is None:
                break
            if "manifest" in msg:
                counts["seconds"] += msg["s"]
                if not msg["manifest"]:
                    counts["refused"] += len(names) - done
                    return
            else:
                counts[msg["verdict"]] += 1
                done += 1
        else:
            hung = False
        if hung or done < len(names):
            # Silent for `timeout` seconds, or gone: the next dataset is refused.
            if not out.exists():  # no manifest (in time): the whole file
                counts["seconds"] += timeout if hung else 0
                counts["refused"] += len(names) - done
                counts["hung"] += hung
                return
            counts["refused"] += 1
            counts["hung"] += hung
            done += 1


def available(tool):
    """None if `tool` can run here, else why not."""
    mods = {"kerchunk": "kerchunk.hdf", "VirtualiZarr": "virtualizarr.parsers"}.get(tool)
    if not mods:
        return None
    try:
        __import__(mods)
        if tool == "VirtualiZarr":
            __import__("obstore")
            __import__("obspec_utils")
        return None
    except ImportError as e:
        return f"not installed ({e})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per dataset (default 60)")
    ap.add_argument("--worker", nargs=4, metavar=("TOOL", "SRC", "OUT", "SKIP"), help=argparse.SUPPRESS)
    args = ap.parse_intermixed_args()
    if args.worker:
        tool, src, out, skip = args.worker
        worker(tool, args.binary, Path(src), Path(out), int(skip))
        return
    from zarr_check import DEFAULT
    files = [Path(f) for f in args.files] or DEFAULT
    why = {t: available(t) for t in TOOLS}
    tools = {t: {"correct": 0, "wrong": 0, "refused": 0, "hung": 0, "seconds": 0.0} for t in TOOLS if not why[t]}
    with tempfile.TemporaryDirectory() as tmp:
        for src in files:
            for tool, counts in tools.items():
                cover(tool, args.binary, src, tmp, args.timeout, counts)
    vers = []
    for m in ("kerchunk", "virtualizarr", "zarr", "fsspec", "h5py"):
        try:
            vers.append(f"{m} {__import__(m).__version__}")
        except Exception:  # noqa: BLE001
            pass
    print("%d files, %d datasets h5py reads; %s; timeout %g s per dataset" % (
        len(files), sum(len(dataset_names(f)) for f in files), ", ".join(vers), args.timeout))
    print("%-14s %8s %8s %8s %9s  %s" % ("tool", "correct", "wrong", "refused", "seconds", "of which hung"))
    for name in TOOLS:
        if why[name]:
            print("%-14s %s" % (name, why[name]))
            continue
        c = tools[name]
        print("%-14s %8d %8d %8d %9.2f  %d" % (name, c["correct"], c["wrong"], c["refused"], c["seconds"],
                                              c["hung"]))


if __name__ == "__main__":
    main()
