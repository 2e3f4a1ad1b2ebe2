#!/usr/bin/env python3
"""Read a Zarr store served by h5mount with tensorstore, against h5py.

Usage: tensorstore_check.py MOUNT FILE.h5 FORMAT DECODED
   or: tensorstore_check.py --corpus MOUNT DATA_DIR FORMAT (a directory mount of the corpus
       served with --zarr-decoded; see `corpus`)

MOUNT serves FILE.h5 with --zarr (FORMAT 3) or --zarr=2 (FORMAT 2), every chunk decoded
when DECODED is 1. Every numeric dataset of the file's root group is opened with
tensorstore's zarr (v2) or zarr3 driver and read whole. An array read with other values
than h5py's is always a failure. With DECODED 1 every array must open; otherwise an array
whose codecs tensorstore does not know may be refused (it names numcodecs' codecs, or v2
filters, which tensorstore lacks). Prints `N equal, M refused, K wrong`; exit status 1 on a
failure.
"""

import sys
import warnings

import h5py
import hdf5plugin  # noqa: F401  (the plugin filters of the fixtures)
import numpy as np
import tensorstore as ts


# Corpus files whose arrays a --zarr-decoded store may fail: SZ and SZ3 (this build decodes
# neither: EIO), nbit (libhdf5 converts its values on read), names over 255 bytes (no file
# name can hold them).
MAY_FAIL = ("filters_sz_", "filters_nbit_", "names_")


def corpus(mnt, data, fmt):
    """Every numeric dataset of every file of the corpus directory `data`, mounted at `mnt`
    with --zarr --zarr-decoded (FORMAT `fmt`): equal to h5py, or refused only where
    MAY_FAIL allows."""
    import os
    equal = refused = wrong = 0
    for fn in sorted(os.listdir(data)):
        if not fn.endswith(".h5") or fn.startswith(("chunked_huge", "chunked_many")):
            continue
        try:
            h = h5py.File(os.path.join(data, fn), "r")
            names = []
            h.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        except Exception:  # noqa: BLE001  (h5py cannot read it: nothing to compare)
            continue
        for n in names:
            try:
                d = h[n]
                if d.shape is None or d.dtype.kind not in "iufcb" or d.dtype.names:
                    continue
                want = d[()]
            except Exception:  # noqa: BLE001
                continue
            spec = {"driver": "zarr" if fmt == 2 else "zarr3",
                    "kvstore": {"driver": "file", "path": "%s/%s/%s/" % (mnt, fn, n)}}
            try:
                got = ts.open(spec, read=True).result().read().result()
            except Exception as e:  # noqa: BLE001
                if fn.startswith(MAY_FAIL):
                    refused += 1
                else:
                    wrong += 1
                    print("REFUSED", fn, n, str(e).splitlines()[0][:160])
                continue
            if got.shape != want.shape and got.size == want.size:
                got = got.reshape(want.shape)
            if np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"):
                equal += 1
            else:
                wrong += 1
                print("WRONG", fn, n)
    print("%d equal, %d refused, %d wrong" % (equal, refused, wrong))
    sys.exit(1 if wrong or equal < 1000 else 0)


def main():
    warnings.simplefilter("ignore")
    if sys.argv[1] == "--corpus":
        corpus(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    mnt, src, fmt, decoded = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    h = h5py.File(src, "r")
    equal = refused = wrong = 0
    for name, d in h.items():
        if not isinstance(d, h5py.Dataset) or d.shape is None or d.dtype.kind not in "iufcb":
            continue
        spec = {"driver": "zarr" if fmt == 2 else "zarr3",
                "kvstore": {"driver": "file", "path": "%s/%s/" % (mnt, name)}}
        try:
            got = ts.open(spec, read=True).result().read().result()
        except Exception as e:  # noqa: BLE001  (a codec tensorstore lacks)
            refused += 1
            print("refused", name, str(e).splitlines()[0][:160])
            continue
        want = d[()]
        if np.array_equal(got, want, equal_nan=want.dtype.kind in "fc"):
            equal += 1
        else:
            wrong += 1
            print("WRONG", name)
    print("%d equal, %d refused, %d wrong" % (equal, refused, wrong))
    sys.exit(1 if wrong or (decoded and refused) or equal == 0 else 0)


if __name__ == "__main__":
    main()
