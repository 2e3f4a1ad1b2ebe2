#!/usr/bin/env python3
"""Beyond one machine: a dask.distributed LocalCluster of two worker processes reads a
reference manifest of an object on an S3 store (anonymous, at ENDPOINT) with xarray, each
worker fetching the chunks it computes on straight from the store, and reduces an array;
the sum must equal h5py's over the local copy.

Usage: refs_dask.py MANIFEST ENDPOINT FILE.h5 VARIABLE
Prints `sum equal: X` and exits 0, or says what differs and exits 1.
"""

import sys
import warnings

import h5py
import hdf5plugin  # noqa: F401
import numpy as np
import xarray as xr
from dask.distributed import Client, LocalCluster


def main():
    warnings.simplefilter("ignore")
    manifest, endpoint, src, var = sys.argv[1:5]
    opts = {"fo": manifest, "remote_protocol": "s3",
            "remote_options": {"anon": True, "asynchronous": True,
                               "client_kwargs": {"endpoint_url": endpoint}}}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, \
            Client(cluster) as client:
        # Both worker processes must be up before the work is handed out; counted then (the
        # scheduler's view after the work can lag, and a busy machine showed 0 there).
        client.wait_for_workers(2, timeout=300)
        workers = len(client.nthreads())
        ds = xr.open_dataset("reference://", engine="zarr", chunks={},
                             backend_kwargs={"storage_options": opts, "consolidated": True})
        arr = ds[var]
        assert arr.chunks is not None, "not a dask array"
        got = float(client.compute(arr.astype("f8").sum()).result())
    want = float(np.asarray(h5py.File(src, "r")[var][()], dtype="f8").sum())
    if workers != 2 or not np.isclose(got, want, rtol=1e-12, atol=0):
        print("differ: %r != %r (workers %d)" % (got, want, workers))
        sys.exit(1)
    print("sum equal: %r" % got)


if __name__ == "__main__":
    main()
