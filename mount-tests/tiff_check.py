#!/usr/bin/env python3
"""Check the `.tif` view of a live h5mount mount with real TIFF readers (run by tiff.rs).

Usage: tiff_check.py MOUNTPOINT FILE.h5 FORM, the mount being of FILE.h5 with `--tiff`, FORM
`classic` (every .tif classic TIFF except those past 4 GiB) or `bigtiff` (mounted with the test
hook that makes every .tif BigTIFF). For every dataset of FILE.h5 (h5py's view):
  - NAME.tif exists exactly when the dataset is 2-D or 3-D with no zero extent, of integers of
    1-8 bytes or floats of 2/4/8 bytes (enums as their base, h5py booleans excluded), and no
    real link is named NAME.tif;
  - tifffile: the form (classic/BigTIFF), byte order (`>` for big-endian types of 2+ bytes),
    page count (first axis of a 3-D dataset), the series shape, and every page equal byte for
    byte to h5py's plane (for the never-written /huge, 4.4 GB, three pages against its fill;
    for /many, a million pages, the first page);
  - Pillow (the types it reads, the datasets under /pil): opens, `n_frames`, seeks every page,
    values equal h5py's (big-endian BigTIFF excepted: Pillow refuses every such file);
  - GDAL (Debian's /usr/bin/python3 with python3-gdal; skipped, saying so, when absent): every
    2-D .tif and the pages of 3-D ones (GTIFF_DIR:N:) read with h5py's values.
Prints one JSON line (counts, failures, skipped parts); exits 1 on any failure.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np
import tifffile
from PIL import Image, UnidentifiedImageError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import views_check  # noqa: E402

GDAL_PY = "/usr/bin/python3"
# Never-written stacks too large to compare whole, and their fill values: /huge (4.4 GB) is
# BigTIFF without the hook; /many has a million pages, so tifffile is not asked to walk all its
# IFDs (len(pages), series): only its first page is checked.
HUGE = {"huge": 7, "many": 3}

# Run under Debian's python3: each argument is SRC=DST; read raster SRC (a .tif, or a
# GTIFF_DIR:N:path page) with GDAL and save band 1 to DST. One JSON line of results.
GDAL_READER = r"""
import json, sys
import numpy as np
from osgeo import gdal
gdal.UseExceptions()
out = {}
for arg in sys.argv[1:]:
    src, dst = arg.split("=", 1)
    try:
        ds = gdal.Open(src)
        if ds.GetDriver().ShortName != "GTiff":
            raise RuntimeError("driver " + ds.GetDriver().ShortName)
        np.save(dst, ds.GetRasterBand(1).ReadAsArray())
        out[src] = "ok"
    except Exception as e:
        out[src] = "error: %s" % e
print(json.dumps(out))
"""


class Checker(views_check.Checker):
    """The view checks' tally, with the cases a reader could not be asked about."""

    def __init__(self):
        super().__init__()
        self.skipped = []


def gets_tif(ds):
    """Whether the view offers NAME.tif for dataset ds (the rule of src/views/tiff.rs)."""
    if ds.shape is None or ds.ndim not in (2, 3) or 0 in ds.shape:
        return False
    dt = ds.dtype  # enums read as their base integer; h5py booleans are kind "b"
    if dt.kind in "iu":
        return dt.itemsize in (1, 2, 4, 8)
    return dt.kind == "f" and dt.itemsize in (2, 4, 8)


def same(a, want):
    """a (read by a client) holds want's values: equal bytes after a cast to want's dtype."""
    if a.shape != want.shape:
        return f"shape {a.shape} != {want.shape}"
    got = np.ascontiguousarray(a.astype(want.dtype, copy=False))
    if got.tobytes() != np.ascontiguousarray(want).tobytes():
        return f"values differ ({a.dtype} vs {want.dtype})"
    return None


def same_values(a, want):
    """Equal values (NaN equal to NaN) after a cast: for readers that widen (GDAL: f2 -> f4)."""
    if a.shape != want.shape:
        return f"shape {a.shape} != {want.shape}"
    native = want.dtype.newbyteorder("=")
    if not np.array_equal(a.astype(native), want.astype(native), equal_nan=want.dtype.kind == "f"):
        return f"values differ ({a.dtype} vs {want.dtype})"
    return None


def check_tifffile(c, where, tif, ds, name, form):
    pages = ds.shape[0] if ds.ndim == 3 else 1
    big_endian = ds.dtype.byteorder == ">" and ds.dtype.itemsize > 1
    with tifffile.TiffFile(tif) as t:
        want_big = form == "bigtiff" or name == "huge"
        if t.is_bigtiff != want_big:
            return c.fail(where, f"is_bigtiff {t.is_bigtiff}, expected {want_big}")
        if t.byteorder != (">" if big_endian else "<"):
            return c.fail(where, f"byte order {t.byteorder!r}")
        if name == "many":
            a = t.pages.first.asarray()
            if a.shape != ds.shape[1:] or not (a == HUGE[name]).all():
                return c.fail(where, "page 0 is not the fill value")
            return c.ok("tifffile million-page stack (first page)")
        if len(t.pages) != pages:
            return c.fail(where, f"{len(t.pages)} pages, expected {pages}")
        if tuple(t.series[0].shape) != tuple(ds.shape):
            return c.fail(where, f"series shape {t.series[0].shape} != {ds.shape}")
        if name in HUGE:
            for i in (0, pages // 2, pages - 1):
                a = t.pages[i].asarray()
                if a.shape != ds.shape[1:] or not (a == HUGE[name]).all():
                    return c.fail(where, f"page {i} is not the fill value")
                c.ok("tifffile page (fill)")
            return c.ok("tifffile BigTIFF past 4 GiB")
        h = ds[()]
        for i in range(pages):
            plane = h[i] if ds.ndim == 3 else h
            err = same(t.pages[i].asarray(), plane)
            if err:
                return c.fail(where, f"tifffile page {i}: {err}")
            c.ok("tifffile page")
        err = same(t.asarray(), h)
        if err:
            return c.fail(where, f"tifffile whole series: {err}")
    c.ok("tifffile " + ("BigTIFF" if want_big else "classic") + (" MM" if big_endian else " II"))


def check_pillow(c, where, tif, ds, form):
    h = ds[()]
    pages = ds.shape[0] if ds.ndim == 3 else 1
    try:
        im = Image.open(tif)
    except UnidentifiedImageError:
        if form == "bigtiff" and ds.dtype.byteorder == ">":
            # Pillow (13.0) looks for BigTIFF's 43 at byte 2 only, where MM files have 0: it
            # refuses every big-endian BigTIFF, tifffile's own included.
            return c.ok("Pillow refuses MM BigTIFF (known Pillow limitation)")
        raise
    with im:
        if getattr(im, "n_frames", 1) != pages:
            return c.fail(where, f"Pillow n_frames {getattr(im, 'n_frames', 1)} != {pages}")
        for i in reversed(range(pages)):  # seek backwards too
            im.seek(i)
            plane = h[i] if ds.ndim == 3 else h
            err = same_values(np.array(im), plane)
            if err:
                return c.fail(where, f"Pillow page {i} ({im.mode}): {err}")
            c.ok("Pillow page")
    c.ok("Pillow file")


def gdal_available(c):
    if not os.path.exists(GDAL_PY) or subprocess.run(
            [GDAL_PY, "-c", "from osgeo import gdal; import numpy"],
            capture_output=True).returncode != 0:
        c.skipped.append(f"GDAL: {GDAL_PY} with osgeo.gdal and numpy not available")
        return False
    return True


def check_gdal(c, rasters, tmp):
    """rasters: (GDAL name, where, expected 2-D array)."""
    args = [f"{src}={tmp}/{i}.npy" for i, (src, _, _) in enumerate(rasters)]
    r = subprocess.run([GDAL_PY, "-c", GDAL_READER, *args], capture_output=True, text=True)
    if r.returncode != 0:
        return c.fail("gdal", r.stderr.strip()[-500:])
    results = json.loads(r.stdout.strip().splitlines()[-1])
    for i, (src, where, want) in enumerate(rasters):
        res = results.get(src)
        if res != "ok":
            c.fail(where, f"GDAL {src}: {res}")
            continue
        err = same_values(np.load(f"{tmp}/{i}.npy"), want)
        if err:
            c.fail(where, f"GDAL {src}: {err}")
        else:
            c.ok("GDAL raster")


def main():
    mount, fname, form = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    assert form in ("classic", "bigtiff"), form
    c = Checker()
    rasters = []
    with h5py.File(fname, "r") as f:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        real = set(names)
        for name in names:
            ds = f[name]
            where = f"{os.path.basename(fname)}:/{name}"
            tif = mount / (name + ".tif")
            if name + ".tif" in real:
                if tif.stat().st_size != f[name + ".tif"].nbytes:
                    c.fail(where, "a real link named like the sidecar is not shown")
                c.ok("real link wins")
                continue
            if tif.exists() != gets_tif(ds):
                c.fail(where, f".tif exists: {tif.exists()}, expected {gets_tif(ds)}")
                continue
            if not gets_tif(ds):
                c.ok("no .tif (as expected)")
                continue
            check_tifffile(c, where, tif, ds, name, form)
            if name.startswith("pil/"):
                check_pillow(c, where, tif, ds, form)
            if name in HUGE:
                continue
            if ds.ndim == 2:
                rasters.append((str(tif), where, ds[()]))
            else:
                for i in range(ds.shape[0]):
                    rasters.append((f"GTIFF_DIR:{i + 1}:{tif}", where, ds[i]))
    if rasters and gdal_available(c):
        with tempfile.TemporaryDirectory(prefix="h5mount-tiff-gdal-") as tmp:
            check_gdal(c, rasters, tmp)
    print(json.dumps({"file": os.path.basename(fname), "form": form, "ok": c.counts,
                      "skipped": c.skipped, "failures": c.failures[:20]}))
    sys.exit(1 if c.failures else 0)


if __name__ == "__main__":
    main()
