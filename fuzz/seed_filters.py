#!/usr/bin/env python3
"""Seeds for the filters target: the first stored chunk of each filtered dataset of the
filters_* fixtures, with its pipeline (ids and client data from the manifest) encoded the way
fuzz_targets/filters.rs decodes it."""

import json
import os
import struct

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "mount-tests", "fixtures")
OUT = os.path.join(HERE, "corpus", "filters")
IDS = [1, 2, 3, 4, 5, 6, 307, 32000, 32001, 32004, 32008, 32013, 32015, 32017, 32026, 40000]
os.makedirs(OUT, exist_ok=True)
manifest = json.load(open(os.path.join(FIX, "manifest.json")))
for fname, entry in sorted(manifest["files"].items()):
    if not (fname.startswith("filters_") or fname.startswith("chunked_")):
        continue
    with h5py.File(os.path.join(FIX, "data", fname), "r") as f:
        for path, o in entry["objects"].items():
            flt = o.get("filters") or []
            if o.get("kind") != "dataset" or not flt or len(flt) > 3:
                continue
            if any(x["id"] not in IDS for x in flt):
                continue
            ds = f[path]
            if ds.id.get_num_chunks() == 0:
                continue
            info = ds.id.get_chunk_info(0)
            expected = int(np.prod(o["chunks"])) * o["itemsize"]
            if expected >= 1 << 20 or info.size > 1 << 16:
                continue
            raw = open(os.path.join(FIX, "data", fname), "rb").read()
            chunk = raw[info.byte_offset:info.byte_offset + info.size]
            b = bytes([len(flt) - 1])
            for x in flt:
                cd = [int(v) & 0xFFFFFFFF for v in (x.get("cd") or [])][:8]
                b += bytes([IDS.index(x["id"]), 0, len(cd)]) + struct.pack(f"<{len(cd)}I", *cd)
            b += struct.pack("<IB", expected, info.filter_mask & 0xFF) + chunk
            name = f"{fname[:-3]}_{path.strip('/').replace('/', '_')}"
            open(os.path.join(OUT, name), "wb").write(b)
