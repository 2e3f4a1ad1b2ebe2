#!/usr/bin/env python3
"""Check `h5mount refs --format parquet` (kerchunk's Parquet layout) with two readers.

For each file, at inline threshold 0 (small records, so that arrays span several files and
end in a partial one) and at 64 MiB (the default record size):
1. pyarrow reads every `refs.<i>.parq` and its rows equal the JSON manifest of the same
   file, key by key in C order over the chunk grid: `path`, `offset`, `size` for a
   reference, `raw` for inline bytes, nulls (and 0) for a missing chunk; a file is absent
   only where all its rows are missing; `.zmetadata` holds the JSON manifest's documents
   (as the JSON manifest's own `.zmetadata` does: numbers exactly), `record_size` and what
   was left out.
2. fsspec's `ReferenceFileSystem` over the directory (its `LazyReferenceMapper`, with
   fastparquet) under zarr-python (Zarr format 2): every array equals h5py's values, as
   `refs_check.py` checks the JSON manifest.

fsspec (to 2026.9 at least) takes a missing chunk for a reference when pandas 3 reads the
null `path` as NaN, which it does once fastparquet uses Arrow strings: the check turns
pandas' `future.infer_string` off before fastparquet loads, as a reader must today.

`python3 mount-tests/refs_parquet_check.py H5MOUNT_BINARY [FILE.h5 ...]`. Needs what
refs_check.py needs, fastparquet and pyarrow. Prints `N passed, M failed, K left out`.
"""

import warnings

warnings.simplefilter("ignore")
import pandas as pd  # noqa: E402

pd.options.future.infer_string = False

import base64  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from refs_check import check_manifest, report  # noqa: E402
from zarr_check import DEFAULT, FIX  # noqa: E402

MANY = [FIX / "data" / "chunked_many_latest.h5", FIX / "data" / "chunked_many_earliest.h5"]


def refs(binary, src, out, threshold, extra=()):
    subprocess.run([str(binary), "refs", str(src), "-o", str(out),
                    "--inline-threshold", str(threshold), *extra],
                   check=True, stderr=subprocess.DEVNULL)


def expected_row(v):
    """A JSON manifest value as the Parquet row of its key."""
    if v is None:
        return (None, 0, 0, None)
    if isinstance(v, list):
        return (v[0], v[1], v[2], None)
    raw = base64.b64decode(v[7:]) if v.startswith("base64:") else v.encode()
    if raw.startswith(b"base64:"):  # the reader would decode it: written encoded
        raw = b"base64:" + base64.b64encode(raw)
    return (None, 0, 0, raw)


def check_rows(manifest_json, parq, what, counts, failures):
    """Rows of every Parquet file of `parq` against the JSON manifest."""
    refs = json.loads(Path(manifest_json).read_text())
    zmeta = json.loads((parq / ".zmetadata").read_text())
    size = zmeta["record_size"]
    docs = {k: json.loads(v) for k, v in refs["refs"].items()
            if k.rsplit("/", 1)[-1] in (".zgroup", ".zattrs", ".zarray")}
    bad = []
    if zmeta["metadata"] != docs:
        bad.append(".zmetadata documents differ")
    if json.loads(refs["refs"][".zmetadata"])["metadata"] != docs:
        bad.append("the JSON manifest's .zmetadata documents differ from its own")
    if zmeta["h5mount"] != refs["h5mount"]:
        bad.append(".zmetadata left_out differs")
    for key, za in docs.items():
        if not key.endswith("/.zarray"):
            continue
        field = key[: -len("/.zarray")]
        grid = [math.ceil(s / c) for s, c in zip(za["shape"], za["chunks"])] or [1]
        total = math.prod(grid)
        keys = [".".join(map(str, idx)) for idx in _c_order(grid)] if za["shape"] else ["0"]
        for rec in range(math.ceil(total / size)):
            want = [expected_row(refs["refs"].get("%s/%s" % (field, k)))
                    for k in keys[rec * size:(rec + 1) * size]]
            f = parq / field / ("refs.%d.parq" % rec)
            if not f.exists():
                if any(w != (None, 0, 0, None) for w in want):
                    bad.append("%s missing" % f.relative_to(parq))
                continue
            t = pq.read_table(f).to_pydict()
            got = list(zip(t["path"], t["offset"], t["size"], t["raw"]))
            if got != want:
                bad.append("%s: rows differ" % f.relative_to(parq))
            counts["passed" if got == want else "failed"] += 1
    for b in bad:
        failures.append("%s: %s" % (what, b))
    counts["failed"] += len(bad)


def _c_order(grid):
    idx = [0] * len(grid)
    for _ in range(math.prod(grid)):
        yield tuple(idx)
        for d in reversed(range(len(grid))):
            idx[d] += 1
            if idx[d] < grid[d]:
                break
            idx[d] = 0


def main():
    binary = Path(sys.argv[1])
    files = [Path(f) for f in sys.argv[2:]] or DEFAULT + MANY
    counts = {"passed": 0, "failed": 0, "left out": 0}
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for src in files:
            many = src in MANY
            for threshold, record in ((0, 300 if many else 3), (64 << 20, None)):
                base = Path(tmp) / ("%s_%d" % (src.stem, threshold))
                js, parq = base.with_suffix(".json"), base.with_suffix(".parq")
                refs(binary, src, js, threshold)
                refs(binary, src, parq, threshold,
                     ["--record-size", str(record)] if record else [])
                what = "%s (threshold %d, record %s)" % (src.name, threshold, record)
                check_rows(js, parq, what, counts, failures)
                check_manifest(parq, "file", src, "threshold %d" % threshold, counts,
                               failures)
    report(counts, failures)


if __name__ == "__main__":
    main()
