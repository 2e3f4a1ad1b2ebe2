"""The S3 section of zarr_speed.py: the same file over S3 at 30 ms per request.

The file is uploaded to SeaweedFS on 127.0.0.1, reached through nginx as a reverse proxy that
holds every request 30 ms (echo_sleep) and logs it: the servers, the proxy and its log are
mount-tests/bench/remote's (`s3_30` there), loaded from that script as a module. Then ROUNDS
times each, interleaved, each h5mount on a fresh mount:
- `zarr`: `h5mount --zarr s3://bench/FILE MNT`, read by `xr.open_zarr(MNT).load()` with dask's
  threaded scheduler (threads = cores): stored chunks pass through, the reader decodes;
- `zarr-dec`: the same with `--zarr-decoded` (the daemon decodes);
- `zarr 16 thr`: `zarr` with 16 dask threads: the Zarr view fetches a chunk when a reader
  asks for it, so the reader's threads are the requests in flight;
- `cat`: `cat` of the dataset's file in a plain `h5mount s3://bench/FILE MNT` (the daemon
  decodes);
- `fsspec default`: `xr.open_dataset(fs.open(PATH), engine="h5netcdf").load()` on an s3fs file
  object with the installed s3fs's default cache (its type and block size are printed);
- `xarray URL`: `xr.open_dataset("s3://...", engine="h5netcdf", storage_options=...).load()`,
  for which the installed xarray opens the object itself with fsspec's block cache of 4 MiB
  (when it does not, the row says so).
Every reader runs in a fresh Python process; the time is from opening to loaded (interpreter
start and imports not timed; for `cat` the whole process), the reader's CPU seconds over the
same span (getrusage), the daemon's from its /proc/PID/stat over its whole life (mount,
read, readahead it set off). Requests and bytes are those nginx logged between marker
requests sent before the mount and after the log went quiet (so a mount's own requests and
readahead count). Every reader's values are checked against h5py's (CRC-32 of the array's
bytes; for `cat` of the file read back through the same mount, after the marker).
"""

import atexit
import importlib.machinery
import importlib.util
import inspect
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUCKET = "bench"
DELAY_MS = 30
WIDE = 16  # dask threads of the extra `zarr` row: requests in flight, whatever the cores

CHILD = r"""
import json, resource, sys, time, warnings, zlib
warnings.simplefilter("ignore")
spec = json.loads(sys.argv[1])
import numpy as np, xarray as xr
if spec["kind"] == "zarr":
    import dask
    dask.config.set(scheduler="threads", num_workers=spec["threads"])
if spec["kind"] in ("fsspec", "url"):
    import s3fs

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

out = {}
t0, c0 = time.perf_counter(), cpu()
if spec["kind"] == "zarr":
    ds = xr.open_zarr(spec["path"], consolidated=True)
elif spec["kind"] == "file":
    ds = xr.open_dataset(spec["path"], engine="h5netcdf", phony_dims="access")
elif spec["kind"] == "fsspec":
    fs = s3fs.S3FileSystem(anon=True, endpoint_url=spec["endpoint"])
    fh = fs.open(spec["path"], "rb")
    out["cache"] = "%s, block %d" % (type(fh.cache).__name__, fh.blocksize)
    ds = xr.open_dataset(fh, engine="h5netcdf", phony_dims="access")
else:
    ds = xr.open_dataset("s3://" + spec["path"], engine="h5netcdf", phony_dims="access",
                         storage_options={"anon": True, "endpoint_url": spec["endpoint"]})
ds.load()
out["s"], out["cpu"] = time.perf_counter() - t0, cpu() - c0
a = np.ascontiguousarray(ds[spec["var"]].values)
out["crc"] = zlib.crc32(memoryview(a).cast("B"))
out["dtype"], out["shape"] = str(a.dtype), list(a.shape)
print(json.dumps(out))
"""


def load_remote():
    """mount-tests/bench/remote (a script without .py) as a module: its servers and log."""
    path = str(HERE / "remote")
    loader = importlib.machinery.SourceFileLoader("h5bench_remote", path)
    spec = importlib.util.spec_from_loader("h5bench_remote", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def crc_of_file(path):
    crc = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 22)
            if not b:
                return crc
            crc = zlib.crc32(b, crc)


def cpu_of(pid):
    """User + system CPU seconds of process `pid` so far."""
    fields = Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def quiet(log_path, still=0.3, limit=10.0):
    """Wait until the proxy's log stops growing (readahead still in flight is logged)."""
    t = time.perf_counter()
    size, since = -1, t
    while time.perf_counter() - t < limit:
        now = os.path.getsize(log_path)
        if now != size:
            size, since = now, time.perf_counter()
        elif time.perf_counter() - since >= still:
            return
        time.sleep(0.05)


def child(spec, env, limit=1800):
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True,
                       env=env, timeout=limit)
    if p.returncode != 0:
        msg = p.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError("reader exited with %d: %s" % (p.returncode, msg[-1] if msg else ""))
    return json.loads(p.stdout.decode().strip().splitlines()[-1])


def missing():
    """Why the S3 section cannot run here, or None."""
    R = load_remote()
    if not (R.nginx_binary() and R.echo_module(R.nginx_binary())):
        return "nginx with its echo module is not installed (mount-tests/install-servers)"
    if not R.weed_binary():
        return "SeaweedFS (weed) is not installed (mount-tests/install-servers)"
    for m in ("boto3", "s3fs", "xarray", "dask", "zarr", "h5netcdf"):
        if importlib.util.find_spec(m) is None:
            return "Python package %s is not installed" % m
    return None


def xarray_url_cache():
    """The cache the installed xarray asks fsspec for when open_dataset gets an S3 URL."""
    from xarray.backends.h5netcdf_ import H5NetCDFStore
    src = inspect.getsource(H5NetCDFStore.open)
    if '"blockcache"' in src and "4 * 1024 * 1024" in src:
        return "blockcache, block 4194304"
    return None


def upload(R, client, src, key, weed_log):
    from boto3.s3.transfer import TransferConfig
    t = time.perf_counter()
    while True:  # volumes are still being allocated just after start
        try:
            client.create_bucket(Bucket=BUCKET)
            break
        except Exception as e:
            if "BucketAlreadyOwnedByYou" in str(e) or "BucketAlreadyExists" in str(e):
                break
            if time.perf_counter() - t > 60:
                raise RuntimeError("create bucket: %s\n%s" % (e, R.tail(weed_log)))
            time.sleep(0.2)
    client.upload_file(str(src), BUCKET, key,
                       Config=TransferConfig(multipart_chunksize=64 << 20, max_concurrency=4))
    size = client.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
    if size != src.stat().st_size:
        raise RuntimeError("uploaded %s has %d bytes, not %d" % (key, size, src.stat().st_size))
    R.log("uploaded %s (%.0f MB) in %.1f s" % (key, size / 1e6, time.perf_counter() - t))


def clean_env(home):
    """The readers' and mounts' environment: anonymous, no instance metadata, no proxies."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env.update(AWS_EC2_METADATA_DISABLED="true", AWS_METADATA_ENDPOINT="http://127.0.0.1:9",
               HOME=home, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    return env


class Ctx:
    pass


def on_term(signum, _frame):
    raise KeyboardInterrupt("signal %d" % signum)  # so that the servers and mounts are ended


def measure(R, ctx, slog, row, src_crc):
    """One run of `row`: {s, cpu, dcpu, ready, req, bytes, methods, ok, note}."""
    name, mount_opts, reader, threads = row
    tag = name.replace(" ", "-")
    a = slog.mark(tag)
    m = None
    out = {}
    try:
        if mount_opts is not None:
            m = R.Mount(ctx, "s3://%s/%s" % (BUCKET, ctx.key),
                        [*mount_opts, "--endpoint", ctx.endpoint, "--no-sign-request"]).start()
            m.wait_readahead()
            out["ready"] = m.ready_s
        if reader == "cat":
            path = os.path.join(m.mnt, ctx.var)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(["cat", path], check=True, stdout=subprocess.DEVNULL)
            out["s"] = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            out["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        else:
            spec = {"kind": reader, "threads": threads, "var": ctx.var, "endpoint": ctx.endpoint,
                    "path": m.mnt if m else "%s/%s" % (BUCKET, ctx.key)}
            res = child(spec, ctx.env)
            out.update(s=res["s"], cpu=res["cpu"], crc=res["crc"], note=res.get("cache", ""))
        quiet(slog.path)
        out["dcpu"] = cpu_of(m.proc.pid) if m else None
        srv = slog.between(a, slog.mark(tag))
        out.update(req=srv["req"], bytes=srv["bytes"], methods=R.fmt_methods(srv),
                   errors={s: n for s, n in srv["statuses"].items() if s >= 400})
        if reader == "cat":  # read back through the same mount, after the closing marker
            out["crc"] = crc_of_file(os.path.join(m.mnt, ctx.var))
        out["ok"] = out["crc"] == src_crc
    finally:
        if m:
            m.close()
    return out


def cell(xs, fmt):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    med = statistics.median(xs)
    return (fmt % med) + (" ±" + fmt % ((max(xs) - min(xs)) / 2) if len(xs) > 1 else "")


def run(binary, src, var, rounds, src_crc, title):
    """The S3 section: start the servers, upload `src`, run every row `rounds` times, print."""
    why = missing()
    if why:
        print("\nS3 section skipped: " + why)
        return
    R = load_remote()
    workdir = str(src.parent)
    R.sweep_stale(workdir)
    R.RUNDIR = rundir = tempfile.mkdtemp(prefix="run-%d-" % os.getpid(), dir=workdir)
    atexit.register(R.cleanup)
    old_term = signal.signal(signal.SIGTERM, on_term)
    try:
        home = os.path.join(rundir, "home")
        os.makedirs(home)
        ctx = Ctx()
        ctx.binary, ctx.rundir, ctx.env = binary, rundir, clean_env(home)
        ctx.key, ctx.var, ctx.cores = src.name, var, os.cpu_count()
        os.environ.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        s3port, client, weed_log = R.start_seaweed(rundir)
        upload(R, client, src, src.name, weed_log)
        port, slog = R.start_nginx(DELAY_MS, rundir, upstream=s3port)
        ctx.endpoint = "http://127.0.0.1:%d" % port
        url_cache = xarray_url_cache()
        n = ctx.cores
        rows = [("zarr", ["--zarr"], "zarr", n),
                ("zarr-dec", ["--zarr", "--zarr-decoded"], "zarr", n),
                ("zarr %d thr" % WIDE, ["--zarr"], "zarr", WIDE),
                ("cat", [], "cat", None),
                ("fsspec default", None, "fsspec", None)]
        if url_cache:
            rows.append(("xarray URL", None, "url", None))
        results = {r[0]: [] for r in rows}
        load = [R.loadavg()]
        for i in range(rounds):
            for row in rows:
                R.log("S3 round %d/%d: %s" % (i + 1, rounds, row[0]))
                results[row[0]].append(measure(R, ctx, slog, row, src_crc))
        load.append(R.loadavg())
    finally:
        signal.signal(signal.SIGTERM, old_term)
        R.cleanup()
    print("\nS3: %s; SeaweedFS behind nginx, %d ms added per request (%s); %d rounds, "
          "median ±half-range; %d cores, load average %s at the start, %s at the end" % (
              title, DELAY_MS, ctx.endpoint, rounds, ctx.cores, load[0], load[1]))
    print("time: open to loaded, imports not timed; cpu: reader over that span, daemon over its "
          "whole mount; requests and MB (10^6 bytes) from nginx's log, mount included")
    print("%-15s %14s %11s %11s %9s %13s %9s  %s" % (
        "reader", "wall s", "reader cpu", "daemon cpu", "mount s", "requests", "MB", "values"))
    med = {}
    for name, rs in results.items():
        med[name] = statistics.median(r["s"] for r in rs)
        bad = sum(not r["ok"] for r in rs)
        print("%-15s %14s %11s %11s %9s %13s %9s  %s" % (
            name, cell([r["s"] for r in rs], "%.2f"), cell([r["cpu"] for r in rs], "%.1f"),
            cell([r["dcpu"] for r in rs], "%.1f"), cell([r.get("ready") for r in rs], "%.2f"),
            cell([r["req"] for r in rs], "%.0f"), cell([r["bytes"] / 1e6 for r in rs], "%.0f"),
            "equal to h5py" if not bad else "WRONG in %d of %d" % (bad, len(rs))))
    for name, rs in results.items():
        notes = [rs[-1]["methods"]]
        if rs[-1].get("note"):
            notes.append("cache: " + rs[-1]["note"])
        errs = [r["errors"] for r in rs if r["errors"]]
        if errs:
            notes.append("HTTP errors %s" % errs)
        print("  %-13s %s" % (name, "; ".join(notes)))
    if not url_cache:
        print("  (xarray URL row left out: this xarray does not open a URL with a 4 MiB block cache)")
    z = med["zarr"]
    print("wall against zarr: " + "   ".join("%s %.2fx" % (n, med[n] / z) for n in med if n != "zarr"))
