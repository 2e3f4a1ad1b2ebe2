"""The refs section of mount-tests/bench/remote (`remote --refs`): reference manifests of the
bench's files by `h5mount refs`, kerchunk and VirtualiZarr, side by side in one run.

For each server row of the run (--only) and for the local copy, --reps rounds, interleaved
(each round runs every tool once, so a busy moment of the machine hits them alike):
  * the 100-dataset file (remote.h5): one manifest of the whole file, written to a file
      - h5mount refs (the release build; for S3 --endpoint and --no-sign-request, as a mount);
      - kerchunk's SingleHdf5ToZarr(url, storage_options=...).translate(), json.dump of it:
        fsspec's defaults (HTTPFileSystem, or s3fs anonymous with the endpoint), only what
        is needed to reach the server passed;
      - VirtualiZarr's HDF5 parser on an obstore registry (LocalStore, HTTPStore, S3Store
        with the endpoint, unsigned), its manifest written as vz_refs.py says (the time
        includes it; where its datatree refuses the file, the notes say so);
  * the prefix of 1,000 small files (s3 rows and the local directory; nginx lists nothing):
    every file's manifest, one file each under an output directory
      - h5mount refs on the prefix with -o DIR (its own parallel walk of the files);
      - kerchunk: a sequential loop in one process over the listing (fs.ls), kerchunk
        having no parallel driver of its own (its docs hand that to dask);
      - VirtualiZarr: a sequential loop likewise (open_virtual_mfdataset combines the files
        into one dataset, which is not a manifest per file).
Each peer runs in a fresh Python process; interpreter start and imports are not timed (the
timed part is bracketed by marker requests, so the server's log counts only it). Shown:
wall seconds (median ± half-range), CPU seconds of the tool's process (median; h5mount's
from its rusage, a peer's from time.process_time() over the timed part), requests and MB
from the server's log where there is one (the s3 row without added latency has none: n/a),
the chunk references each manifest holds (h5mount names the 32 MiB contiguous dataset as
8 chunks of 4 MiB, the others as one: 408 against 401), and the goal of issue 31 beside h5mount's
numbers at 30 ms (<= 1 s and <= 10 requests for the 100-dataset file). On S3 rows a second
h5mount row adds --merge-gap 32M: S3 answers one range per GET, and the file's object headers
lie between their data (datasets' about 660 KB apart, groups' up to 12.5 MB), so few requests
means fetching the gaps.
"""
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PEER_CHILD = r"""
import json, os, sys, time, urllib.request, warnings
warnings.simplefilter("ignore")
spec = json.loads(sys.argv[1])


def mark(i):
    if spec["marks"]:
        urllib.request.urlopen(spec["marks"][i], timeout=30).read()


def count(refs):
    return sum(1 for v in refs.values() if isinstance(v, list))


if spec["tool"] == "kerchunk":
    from kerchunk.hdf import SingleHdf5ToZarr
    import fsspec
    if spec["kind"] == "s3":
        so = {"anon": True, "endpoint_url": spec["endpoint"]}
    else:
        so = {}

    def one(url, out):
        refs = SingleHdf5ToZarr(url, storage_options=so).translate()
        with open(out, "w") as f:
            json.dump(refs, f)
        return count(refs["refs"])

    def listing(where):
        if spec["kind"] == "s3":
            fs = fsspec.filesystem("s3", **so)
            return ["s3://" + n for n in fs.ls(where, detail=False) if n.endswith(".h5")]
        return [os.path.join(where, n) for n in sorted(os.listdir(where)) if n.endswith(".h5")]
else:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import HTTPStore, LocalStore, S3Store
    if spec["kind"] == "s3":
        store = S3Store(spec["bucket"], endpoint=spec["endpoint"], skip_signature=True,
                        region="us-east-1", client_options={"allow_http": True})
        registry = ObjectStoreRegistry({"s3://" + spec["bucket"]: store})
    elif spec["kind"] == "http":
        base = spec["url"].rsplit("/", 1)[0]
        registry = ObjectStoreRegistry({base: HTTPStore.from_url(base, client_options={"allow_http": True})})
    else:
        registry = ObjectStoreRegistry({"file://": LocalStore()})

    NOTES = set()
    sys.path.insert(0, spec["here"])
    from vz_refs import kerchunk_refs

    def one(url, out):
        refs, note = kerchunk_refs(url if "://" in url else "file://" + url, registry)
        if note:
            NOTES.add(note)
        with open(out, "w") as f:
            json.dump({"version": 1, "refs": refs}, f)
        return count(refs)

    def listing(where):
        if spec["kind"] == "s3":
            import obstore
            pre = where.split("/", 1)[1]
            return ["s3://" + spec["bucket"] + "/" + o["path"] for batch in obstore.list(store, prefix=pre)
                    for o in batch if o["path"].endswith(".h5")]
        return [os.path.join(where, n) for n in sorted(os.listdir(where)) if n.endswith(".h5")]

mark(0)
t = time.perf_counter()
c = time.process_time()
if spec["op"] == "file":
    n, files = one(spec["url"], spec["out"]), 1
else:
    urls = listing(spec["url"])
    n = sum(one(u, os.path.join(spec["out"], os.path.basename(u) + ".json")) for u in urls)
    files = len(urls)
out = {"s": time.perf_counter() - t, "cpu": time.process_time() - c, "refs": n, "files": files,
       "note": "; ".join(sorted(globals().get("NOTES", ())))}
mark(1)
print(json.dumps(out))
"""

TOOLS = ("h5mount refs", "h5mount --merge-gap", "kerchunk", "VirtualiZarr")
# What the second h5mount row adds (servers that answer one range per GET: fewer requests for
# the bytes between the object headers).
MERGE_GAP_ARGS = ["--merge-gap", "32M"]
GOAL_S, GOAL_REQ = 1.0, 10


def count_refs(path):
    """Chunk references (list values) in the kerchunk JSON at `path`."""
    with open(path) as f:
        refs = json.load(f).get("refs", {})
    return sum(1 for v in refs.values() if isinstance(v, list))


def h5mount_refs(b, ctx, row, op, out, extra=()):
    """One `h5mount refs` of the row's file (op "file") or prefix into `out`; a record."""
    src = row.source if op == "file" else row.prefix_source
    cmd = [ctx.binary, "refs", src, "-o", out, *row.h5m_args, *extra]
    a = row.log.mark() if row.log else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       env=ctx.env, timeout=900)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    srv = row.log.between(a, row.log.mark()) if row.log else None
    if r.returncode != 0:
        return {"err": f"exited with {r.returncode}: {r.stderr.decode(errors='replace').strip()[-300:]}"}
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if op == "file":
        n, files = count_refs(out), 1
    else:
        names = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs]
        n, files = sum(count_refs(p) for p in names), len(names)
    return b.record(dt, srv, None, cpu=cpu, refs=n, files=files)


def peer_refs(b, ctx, row, tool, op, out):
    """One manifest by kerchunk or VirtualiZarr in a fresh Python process; a record."""
    names = [row.log.new_name(f"{tool}-{op}-{i}") for i in range(2)] if row.log else []
    if op == "file":
        url = row.fs_url
    else:
        url = row.fs_prefix
        os.makedirs(out, exist_ok=True)
    spec = {"tool": "kerchunk" if tool == "kerchunk" else "vz", "kind": row.fs_kind, "op": op, "url": url,
            "out": out, "endpoint": row.endpoint, "bucket": b.BUCKET, "here": os.path.dirname(__file__),
            "marks": [row.log.mark_url() + n for n in names]}
    try:
        res, _ = b.run_child(PEER_CHILD, spec, ctx.env)
    except Exception as e:  # noqa: BLE001  (a tool that cannot do it: its reason is the cell)
        return {"err": str(e)[:300]}
    srv = None
    if row.log:
        offs = [row.log.offset_after(n) for n in names]
        srv = row.log.between(offs[0], offs[1])
    return b.record(res["s"], srv, None, cpu=res["cpu"], refs=res["refs"], files=res["files"],
                    note=res.get("note"))


class RefsRow:
    """What the tools of this section need of a server row (or of the local copy)."""

    def __init__(self, key, title, delay_ms, log, source, h5m_args, fs_kind, fs_url, endpoint,
                 prefix_source, fs_prefix):
        self.key, self.title, self.delay_ms, self.log = key, title, delay_ms, log
        self.source, self.h5m_args = source, h5m_args
        self.fs_kind, self.fs_url, self.endpoint = fs_kind, fs_url, endpoint
        self.prefix_source, self.fs_prefix = prefix_source, fs_prefix


def refs_rows(b, ctx, rows, data_dir):
    """The local copy first, then the run's server rows."""
    out = [RefsRow("local", f"local file ({ctx.plain}; no requests)", 0, None, ctx.plain, [], "local",
                   ctx.plain, None, os.path.join(data_dir, "prefix"), os.path.join(data_dir, "prefix"))]
    for r in rows:
        if r.fs_kind == "s3":
            out.append(RefsRow(r.key, r.title, r.delay_ms, r.log, r.source, r.h5m_args, "s3", r.source,
                               r.endpoint, r.prefix_source, f"{b.BUCKET}/prefix/"))
        else:
            out.append(RefsRow(r.key, r.title, r.delay_ms, r.log, r.source, r.h5m_args, "http", r.source,
                               None, None, None))
    return out


def one_round(b, ctx, row, peers, work):
    """Every tool once on `row`: {tool: {op: record}}."""
    res = {}
    ops = ["file"] + (["prefix"] if row.prefix_source else [])
    for op in ops:
        for tool in TOOLS if peers else TOOLS[:2]:
            if tool == "h5mount --merge-gap" and (op != "file" or row.fs_kind != "s3"):
                continue  # only where the server answers one range per GET
            out = os.path.join(work, f"{row.key}-{tool.split()[-1].strip('-')}-{op}" + (".json" if op == "file" else ""))
            if op == "prefix":
                shutil.rmtree(out, ignore_errors=True)
            if tool == "h5mount refs":
                r = h5mount_refs(b, ctx, row, op, out)
            elif tool == "h5mount --merge-gap":
                r = h5mount_refs(b, ctx, row, op, out, MERGE_GAP_ARGS)
            else:
                r = peer_refs(b, ctx, row, tool, op, out)
            res.setdefault(tool, {})[op] = r
            b.log(f"  {row.key} {op} {tool}: {b.short(r)}")
            if op == "prefix":
                shutil.rmtree(out, ignore_errors=True)
    return res


def fmt_row(b, label, tool, rounds, base):
    errs = [r["err"] for r in rounds if "err" in r]
    ok = [r for r in rounds if "err" not in r]
    if not ok:
        return f"{label:<22}{tool:<20}  n/a: {errs[-1]}"
    secs = b.cell([r["s"] for r in ok], b.secs_decimals)
    cpu = b.cell([r.get("cpu") for r in ok], lambda x: 2)
    req = b.fmt_count([r.get("req") for r in ok])
    mb = b.cell([r["bytes"] / 1e6 if r.get("bytes") is not None else None for r in ok], lambda x: 2) or "n/a"
    med = statistics.median(r["s"] for r in ok)
    note = f"{ok[-1]['refs']:,} chunk refs"
    if ok[-1]["files"] > 1:
        note += f" in {ok[-1]['files']:,} manifests"
    if tool == "h5mount --merge-gap":
        note += f"; {' '.join(MERGE_GAP_ARGS)}"
    if base and tool != "h5mount refs":
        note += f"; {med / base:.1f}x h5mount's time"
    if ok[-1].get("note"):
        note += f"; {ok[-1]['note']}"
    if errs:
        note += f" ({len(errs)} round(s) failed: {errs[-1][:120]})"
    return f"{label:<22}{tool:<20}{secs:>17}{cpu:>13}{req:>10}{mb:>10}  {note}"


def print_table(b, row, res):
    print(f"\nrefs: {row.title}")
    hdr = f"{'manifests of':<22}{'tool':<20}{'seconds':>17}{'CPU s':>13}{'requests':>10}{'MB moved':>10}  notes"
    print(hdr)
    print("-" * len(hdr))
    for op, label in (("file", "remote.h5 (100 ds)"), ("prefix", "prefix (1,000 files)")):
        base = None
        h = [r["h5mount refs"][op] for r in res if op in r.get("h5mount refs", {})]
        if h and all("err" not in x for x in h):
            base = statistics.median(x["s"] for x in h)
        first = True
        for tool in TOOLS:
            rounds = [r[tool][op] for r in res if op in r.get(tool, {})]
            if rounds:
                print(fmt_row(b, label if first else "", tool, rounds, base))
                first = False
        if op != "file" or not row.delay_ms:
            continue
        for tool in TOOLS[:2]:
            h = [r[tool][op] for r in res if op in r.get(tool, {})]
            if not h or any("err" in x for x in h):
                continue
            secs = statistics.median(x["s"] for x in h)
            n = statistics.median(x["req"] for x in h) if all(x.get("req") is not None for x in h) else None
            ok = secs <= GOAL_S and n is not None and n <= GOAL_REQ
            print(f"{'':<22}goal (issue 31): {tool} <= {GOAL_S:g} s and <= {GOAL_REQ} requests: "
                  f"{'met' if ok else 'MISSED'} ({secs:.3f} s, {'?' if n is None else f'{n:g}'} requests)")


def run(b, ctx, rows, data_dir, reps, peers):
    """The refs section: rounds on every row, then one table per row."""
    rrows = refs_rows(b, ctx, rows, data_dir)
    work = tempfile.mkdtemp(prefix="refs-", dir=ctx.rundir)
    results = {r.key: [] for r in rrows}
    load = [b.loadavg()]
    for rep in range(reps):
        for row in rrows:
            b.log(f"refs round {rep + 1}/{reps}: {row.key}")
            results[row.key].append(one_round(b, ctx, row, peers, work))
    load.append(b.loadavg())
    vers = []
    for m in ("kerchunk", "virtualizarr", "fsspec", "h5py", "zarr"):
        try:
            vers.append(f"{m} {__import__(m).__version__}")
        except Exception:  # noqa: BLE001
            vers.append(f"{m} not installed")
    print(f"\nrefs section: {reps} round(s), median ±half-range; {', '.join(vers)}; Python {sys.version.split()[0]}")
    print(f"load average (1 min) {load[0]} at the start, {load[1]} at the end, on {os.cpu_count()} CPUs "
          f"(a shared machine: compare the tools by their ratios)")
    for row in rrows:
        print_table(b, row, results[row.key])
    shutil.rmtree(work, ignore_errors=True)
