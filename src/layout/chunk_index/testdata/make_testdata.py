#!/usr/bin/env python3
"""Write small HDF5 files exercising every chunk index type, each with a JSON description.

Usage: make_testdata.py OUTDIR [--large]

Each file holds one chunked dataset "d". The JSON next to it (same stem) records what the
Rust tests need: the index spec (parsed ad hoc from the layout message, or for the v1 B-tree
the root node found by scanning for "TREE"), the dataset shape, and every written chunk as
reported by libhdf5 (`get_chunk_info`). The Rust test walks the whole chunk grid and expects
exactly those chunks, and None elsewhere.

Without --large only the small cases (committed under testdata/) are written; --large adds
the big ones (FA paging with filters, EA super blocks and paging, 140,000 chunks), which stay
dev-only.
"""

import hashlib
import json
import os
import struct
import sys

import h5py
import numpy as np

UNLIMITED = None


def scan_tree_root(raw):
    """Address of the type-1 v1 B-tree node with the highest level (the root)."""
    best = None
    pos = raw.find(b"TREE")
    while pos >= 0:
        ntype, level = raw[pos + 4], raw[pos + 5]
        if ntype == 1 and (best is None or level > best[1]):
            best = (pos, level)
        pos = raw.find(b"TREE", pos + 1)
    return best[0]


def find_layout_v4(raw):
    """Find the chunked layout message (v4/v5) in the one dataset's OHDR. Returns a dict."""
    pos = raw.find(b"OHDR")
    while pos >= 0:
        p = pos + 4
        version, flags = raw[p], raw[p + 1]
        p += 2
        if flags & 0x20:
            p += 16
        if flags & 0x10:
            p += 4
        w = 1 << (flags & 3)
        size = int.from_bytes(raw[p:p + w], "little")
        p += w
        end = p + size
        while p + 4 <= end:
            mtype = raw[p]
            msize = struct.unpack_from("<H", raw, p + 1)[0]
            p += 4
            if flags & 0x04:
                p += 2
            if mtype == 8 and raw[p + 1] == 2:
                return parse_layout(raw, p)
            p += msize
        pos = raw.find(b"OHDR", pos + 1)
    raise RuntimeError("no chunked layout message found")


def parse_layout(raw, p):
    version, _cls, flags, ndims, enc = raw[p], raw[p + 1], raw[p + 2], raw[p + 3], raw[p + 4]
    p += 5
    dims = []
    for _ in range(ndims):
        dims.append(int.from_bytes(raw[p:p + enc], "little"))
        p += enc
    itype = raw[p]
    p += 1
    spec = {"version": version, "flags": flags}
    if itype == 1:
        spec["type"] = "single"
        if flags & 2:
            spec["filtered_size"] = int.from_bytes(raw[p:p + 8], "little")
            spec["filter_mask"] = struct.unpack_from("<I", raw, p + 8)[0]
            p += 12
        else:
            spec["filtered_size"] = None
            spec["filter_mask"] = 0
    elif itype == 2:
        spec["type"] = "implicit"
    elif itype == 3:
        spec["type"] = "fa"
        spec["page_bits"] = raw[p]
        p += 1
    elif itype == 4:
        spec["type"] = "ea"
        keys = ["max_bits", "index_elements", "min_pointers", "min_elements", "page_bits"]
        for i, k in enumerate(keys):
            spec[k] = raw[p + i]
        p += 5
    elif itype == 5:
        spec["type"] = "bt2"
        spec["node_size"] = struct.unpack_from("<I", raw, p)[0]
        spec["split_percent"], spec["merge_percent"] = raw[p + 4], raw[p + 5]
        p += 6
    spec["addr"] = int.from_bytes(raw[p:p + 8], "little")
    return spec


def describe(path):
    """Expected chunks, from libhdf5.

    `get_chunk_info` / `chunk_iter` give correct addresses, sizes and masks, but with libhdf5 2.0 its
    `chunk_offset` is wrong for extensible arrays whose unlimited dimension is not the first
    (and `get_chunk_info_by_coord` misses chunks there). So each grid position is asked with
    `read_direct_chunk` (which takes the normal read path), and the record notes the stored
    bytes' SHA-256 prefix; the address is the `get_chunk_info` entry holding exactly those
    bytes when that is unambiguous, else null (the Rust test then checks the bytes and that
    the address starts some chunk).
    """
    with open(path, "rb") as f:
        raw = f.read()
    with h5py.File(path, "r") as f:
        ds = f["d"]
        dcpl = ds.id.get_create_plist()
        filtered = dcpl.get_nfilters() > 0
        by_bytes = {}
        addrs = []

        def visit(ci):
            addrs.append(ci.byte_offset)
            key = (raw[ci.byte_offset:ci.byte_offset + ci.size], ci.filter_mask)
            by_bytes.setdefault(key, []).append(ci.byte_offset)

        # chunk_iter visits each chunk once; get_chunk_info(i) is linear per call.
        ds.id.chunk_iter(visit)
        grid = [-(-d // c) for d, c in zip(ds.shape, ds.chunks)]
        chunks = []
        for coords in np.ndindex(*grid):
            offs = tuple(int(c) * k for c, k in zip(coords, ds.chunks))
            try:
                mask, data = ds.id.read_direct_chunk(offs)
            except Exception:
                continue
            cand = by_bytes.get((data, mask), [])
            chunks.append({"coords": [int(c) for c in coords],
                           "addr": cand[0] if len(cand) == 1 else None,
                           "size": len(data), "mask": mask,
                           "sha": hashlib.sha256(data).hexdigest()[:16]})
        assert len(chunks) == len(addrs), (len(chunks), len(addrs))
        out = {
            "dims": list(ds.shape),
            "max_dims": [-1 if m is None else m for m in ds.maxshape],
            "chunk_dims": list(ds.chunks),
            "element_size": ds.dtype.itemsize,
            "filtered": filtered,
            "addrs": sorted(addrs),
            "chunks": chunks,
        }
    if raw.find(b"OHDR") >= 0:
        out["index"] = find_layout_v4(raw)
    else:
        out["index"] = {"type": "btree_v1", "addr": scan_tree_root(raw), "version": 3,
                        "flags": 0}
    return out


def make(outdir, name, libver, shape, chunks, maxshape=None, dtype="u1", compression=None,
         writes=None, early=False, random=False):
    path = os.path.join(outdir, name + ".h5")
    rng = np.random.default_rng(len(name))
    with h5py.File(path, "w", libver=libver) as f:
        if early:
            space = h5py.h5s.create_simple(shape, maxshape)
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_chunk(chunks)
            dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
            h5py.h5d.create(f.id, b"d", h5py.h5t.NATIVE_UINT8, space, dcpl=dcpl)
            ds = f["d"]
        else:
            ds = f.create_dataset("d", shape=shape, chunks=chunks, maxshape=maxshape,
                                  dtype=dtype, compression=compression)
        for sel in writes if writes is not None else [tuple(slice(None) for _ in shape)]:
            block = ds[sel]
            if random:
                vals = rng.integers(0, 256, size=block.shape, dtype="u1").astype(dtype)
            else:
                vals = (np.arange(block.size) % 251 + 1).astype(dtype).reshape(block.shape)
            ds[sel] = vals
    desc = describe(path)
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(desc, f, indent=None, separators=(",", ":"))
    print(name, desc["index"]["type"], len(desc["chunks"]), "chunks", os.path.getsize(path),
          "bytes")


V114 = ("v114", "v114")
U = None


def small(outdir):
    # v1 B-tree (libver earliest): 2-D sparse, 3-D filtered multi-level tree (250 chunks).
    make(outdir, "bt1_2d_sparse", "earliest", (20, 25), (4, 5),
         writes=[(slice(0, 4), slice(0, 5)), (slice(8, 20), slice(10, 25)), (slice(4, 8), 0)])
    make(outdir, "bt1_3d_lzf", "earliest", (10, 5, 20), (2, 1, 4), compression="lzf",
         random=True, writes=[(slice(None), slice(None), slice(0, 12)),
                              (slice(0, 10), slice(0, 5), slice(12, 20))])
    make(outdir, "bt1_1d", "earliest", (40,), (2,), maxshape=(U,))
    # single chunk
    make(outdir, "single_v114", V114, (6, 7), (6, 7))
    make(outdir, "single_latest_gzip", "latest", (6, 7), (6, 7), compression="gzip")
    # implicit (early allocation, no filter)
    make(outdir, "implicit_2d", V114, (10, 9), (3, 4), early=True,
         writes=[(slice(0, 3), slice(0, 4))])
    make(outdir, "implicit_maxdims", "latest", (5, 7), (2, 3), maxshape=(9, 14), early=True)
    # fixed array
    make(outdir, "fa_2d_20", V114, (8, 25), (2, 5))
    make(outdir, "fa_3d_sparse_lzf", "latest", (10, 5, 10), (1, 1, 2), compression="lzf",
         random=True, writes=[(slice(0, 10, 3), slice(None), slice(0, 10, 2)),
                              (1, 1, slice(None))])
    make(outdir, "fa_maxdims", V114, (5, 7), (2, 3), maxshape=(10, 14))
    make(outdir, "fa_1d_2000_paged", V114, (2000,), (1,),
         writes=[slice(0, 700), slice(1100, 1200), slice(1990, 2000)])
    make(outdir, "fa_1d_2000_paged_gzip_latest", "latest", (2000,), (1,), compression="gzip",
         writes=[slice(0, 300), slice(1500, 1600)])
    make(outdir, "fa_1d_3000_page_gap", V114, (3000,), (1,),
         writes=[slice(0, 10), slice(2500, 2510)])
    # extensible array
    make(outdir, "ea_1d_20", V114, (20,), (1,), maxshape=(U,))
    make(outdir, "ea_2d_dim1_250_gzip", "latest", (10, 25), (1, 1), maxshape=(10, U),
         compression="gzip", writes=[(slice(None), slice(0, 25, 2)), (3, slice(None))])
    make(outdir, "ea_3d_mid_lzf", V114, (3, 30, 4), (2, 2, 2), maxshape=(5, U, 4),
         compression="lzf", random=True,
         writes=[(slice(None), slice(0, 30, 3), slice(None)), (0, slice(None), 0)])
    make(outdir, "ea_1d_700_sparse", "latest", (700,), (1,), maxshape=(U,),
         writes=[slice(0, 10), slice(100, 130), slice(600, 700, 7)])
    # Super block 13 (chunks from 131,060 on) has data blocks of 2,048 elements in two pages;
    # only page 1 of its first data block and the last chunk are written.
    make(outdir, "ea_1d_140000_page_gap", V114, (140000,), (1,), maxshape=(U,),
         writes=[slice(132500, 132501), slice(139999, 140000)])


def large(outdir):
    make(outdir, "fa_1d_2000_lzf", "latest", (2000,), (1,), compression="lzf", random=True)
    make(outdir, "fa_2d_250_gzip", V114, (50, 50), (2, 5), compression="gzip")
    make(outdir, "ea_1d_140000", V114, (140000,), (1,), maxshape=(U,))
    make(outdir, "ea_1d_140000_sparse_gzip", "latest", (140000,), (1,), maxshape=(U,),
         compression="gzip",
         writes=[slice(0, 5000), slice(70000, 70100), slice(131000, 140000, 3)])
    make(outdir, "ea_2d_140000_dim0", V114, (14000, 10), (1, 1), maxshape=(U, 10))
    make(outdir, "ea_2d_140000_dim1", "latest", (10, 14000), (1, 1), maxshape=(10, U))
    make(outdir, "bt1_2d_2000", "earliest", (40, 50), (1, 1))


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    small(out)
    if "--large" in sys.argv:
        large(out)
