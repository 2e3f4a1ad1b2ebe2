#!/usr/bin/env python3
"""Write HDF5 files with h5py and a manifest that lets the layout engine be checked against them.

Usage: make_fixtures.py OUTDIR
Then:  H5MOUNT_LAYOUT_FIXTURES=OUTDIR/manifest.json cargo test --lib layout::tests::real_files

For every dataset the manifest gives what the model layer would hand the layout engine
(dims, element size, fill value, layout class with its address/size, external segments) and,
for chunked datasets, the chunk list libhdf5 reports through H5Dget_chunk_info, which the
test feeds to the engine as an in-memory chunk index. `expect` is h5py's ds[()].tobytes().
"""
import json
import os
import sys

import h5py
import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
entries = []


def fill_bytes(ds):
    dcpl = ds.id.get_create_plist()
    if dcpl.fill_value_defined() == h5py.h5d.FILL_VALUE_UNDEFINED:
        return None
    buf = np.zeros(1, dtype=ds.dtype)
    dcpl.get_fill_value(buf)
    return buf.tobytes().hex()


def record(path, ds, kind, userblock=0, **extra):
    name = ds.name.strip("/").replace("/", "_")
    exp = os.path.join(out, f"{os.path.basename(path)}.{name}.bin")
    with open(exp, "wb") as f:
        f.write(ds[()].tobytes())
    e = dict(file=path, name=ds.name, kind=kind, dims=list(ds.shape),
             max_dims=[(2**64 - 1) if m is None else m for m in (ds.maxshape or ds.shape)],
             element_size=ds.dtype.itemsize, fill=fill_bytes(ds), expect=exp,
             userblock=userblock)
    e.update(extra)
    entries.append(e)


def contiguous(path, ds, userblock=0):
    off = ds.id.get_offset()
    record(path, ds, "contiguous", userblock,
           addr=(2**64 - 1) if off is None else off - userblock,
           size=ds.id.get_storage_size())


def filters_of(ds):
    dcpl = ds.id.get_create_plist()
    out = []
    for i in range(dcpl.get_nfilters()):
        code, flags, values, _name = dcpl.get_filter(i)
        out.append([code, flags, list(values)])
    return out


def chunked(path, ds, userblock=0, layout_flags=0):
    chunks = []
    for i in range(ds.id.get_num_chunks()):
        info = ds.id.get_chunk_info(i)
        coords = [o // c for o, c in zip(info.chunk_offset, ds.chunks)]
        chunks.append(dict(coords=coords, addr=info.byte_offset - userblock,
                           size=info.size, mask=info.filter_mask))
    record(path, ds, "chunked", userblock, chunk_dims=list(ds.chunks), chunks=chunks,
           filters=filters_of(ds), layout_flags=layout_flags)


def partial_edge_raw(dcpl):
    """H5Pset_chunk_opts(dcpl, H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS): h5py has no wrapper."""
    import ctypes
    import glob
    libdir = os.path.join(os.path.dirname(h5py.__file__), os.pardir, "h5py.libs")
    libs = glob.glob(os.path.join(libdir, "libhdf5-*.so*"))
    lib = ctypes.CDLL(libs[0]) if libs else ctypes.CDLL("libhdf5.so")
    lib.H5Pset_chunk_opts.argtypes = [ctypes.c_int64, ctypes.c_uint]
    assert lib.H5Pset_chunk_opts(dcpl.id, 0x0002) >= 0


for libver in ["earliest", "latest"]:
    p = os.path.join(out, f"layout_{libver}.h5")
    with h5py.File(p, "w", libver=libver) as f:
        f["c1"] = rng.standard_normal(1000)
        f["c3"] = rng.integers(-30000, 30000, (7, 5, 3), dtype="i2")
        f["cbe"] = rng.standard_normal((13, 4)).astype(">f8")
        f.create_dataset("cfill", (11, 3), dtype="i4", fillvalue=-7)
        f.create_dataset("k1", data=np.arange(100, dtype="u1"), chunks=(7,))
        k2 = f.create_dataset("k2", (37, 23), dtype="f4", chunks=(8, 5), fillvalue=2.5)
        k2[3:20, 4:9] = rng.standard_normal((17, 5))
        k2[30:, 20:] = 1.0
        k3 = f.create_dataset("k3", (9, 10, 11), dtype="i8", chunks=(4, 10, 3))
        k3[...] = rng.integers(0, 1 << 40, (9, 10, 11))
        k3b = f.create_dataset("k3sparse", (9, 10, 11), dtype="i2", chunks=(2, 3, 11), fillvalue=-1)
        k3b[5:7, 2:8, :] = 9
        f.create_dataset("kbig", data=np.arange(5, dtype="i4"), chunks=(16,), maxshape=(None,))
        kr = f.create_dataset("kresized", (10, 10), dtype="u2", chunks=(4, 4), maxshape=(None, None))
        kr[...] = np.arange(100, dtype="u2").reshape(10, 10)
        kr.resize((20, 13))
        kr[15:, 11:] = 77
        ku = f.create_dataset("kunlim1", (50, 6), dtype="u4", chunks=(7, 6), maxshape=(None, 6))
        ku[...] = np.arange(300, dtype="u4").reshape(50, 6)
        # Compact, via the low-level API.
        space = h5py.h5s.create_simple((6, 5))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        h5py.h5d.create(f.id, b"compact", h5py.h5t.STD_I16LE, space, dcpl=dcpl)
        f["compact"][...] = np.arange(30, dtype="i2").reshape(6, 5) * 3
    with h5py.File(p, "r") as f:
        for n in ["c1", "c3", "cbe", "cfill"]:
            contiguous(p, f[n])
        for n in ["k1", "k2", "k3", "k3sparse", "kbig", "kresized", "kunlim1"]:
            chunked(p, f[n])
        record(p, f["compact"], "compact", data=f["compact"][()].tobytes().hex())

# Filtered chunks: deflate + shuffle (+ fletcher32), LZF on random bytes (chunks it cannot
# shrink are stored raw with filter-mask bit 0 set), and partial edge chunks left unfiltered.
p = os.path.join(out, "layout_filtered.h5")
with h5py.File(p, "w", libver=("v114", "v114")) as f:
    f.create_dataset("deflate", data=np.arange(2000, dtype="i4").reshape(40, 50) % 97,
                     chunks=(16, 16), compression="gzip", shuffle=True, fletcher32=True)
    noise = np.concatenate([rng.integers(0, 256, 3000, dtype="u1"), np.zeros(3000, "u1")])
    f.create_dataset("lzf", data=noise, chunks=(700,), compression="lzf")
    for name, raw_edges in [("edges_raw", True), ("edges_filtered", False)]:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((8, 6))
        dcpl.set_shuffle()
        dcpl.set_deflate(6)
        if raw_edges:
            partial_edge_raw(dcpl)
        space = h5py.h5s.create_simple((21, 17), (21, 17))
        h5py.h5d.create(f.id, name.encode(), h5py.h5t.STD_U16LE, space, dcpl=dcpl)
        f[name][...] = (np.arange(21 * 17, dtype="u2").reshape(21, 17) % 50)
with h5py.File(p, "r") as f:
    chunked(p, f["deflate"])
    chunked(p, f["lzf"])
    chunked(p, f["edges_raw"], layout_flags=1)
    chunked(p, f["edges_filtered"])

# User block: addresses from libhdf5 are absolute; the engine takes relative ones.
p = os.path.join(out, "layout_userblock.h5")
with h5py.File(p, "w", userblock_size=512) as f:
    f["c"] = np.arange(77, dtype="f8")
    f.create_dataset("k", data=np.arange(77, dtype="f8"), chunks=(10,))
with h5py.File(p, "r") as f:
    contiguous(p, f["c"], 512)
    chunked(p, f["k"], 512)

# External storage, with a short second file (the tail reads as zeros).
p = os.path.join(out, "layout_external.h5")
e1, e2 = os.path.join(out, "ext1.bin"), os.path.join(out, "ext2.bin")
with open(e1, "wb") as f:
    f.write(bytes(range(256)) * 2)
with open(e2, "wb") as f:
    f.write(b"\xaa" * 50)
with h5py.File(p, "w") as f:
    f.create_dataset("x", (100,), dtype="<u4", external=[(e1, 16, 300), (e2, 10, 200)])
with h5py.File(p, "r") as f:
    record(p, f["x"], "external", external=[[e1, 16, 300], [e2, 10, 200]])

with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(entries, f, indent=1)
print(len(entries), "datasets")
