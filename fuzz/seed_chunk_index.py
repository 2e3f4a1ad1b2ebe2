#!/usr/bin/env python3
"""Seeds for the chunk_index target: each real index of src/layout/chunk_index/testdata,
prefixed with the parameter header the target decodes (see fuzz_targets/chunk_index.rs).
The index address is where its signature is (TREE, FAHD, EAHD, BTHD), or the first chunk for
single-chunk and implicit indexes; the array parameters are read from the index headers."""

import glob
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src", "layout", "chunk_index", "testdata")
OUT = os.path.join(HERE, "corpus", "chunk_index")
os.makedirs(OUT, exist_ok=True)

for js in sorted(glob.glob(os.path.join(SRC, "*.json"))):
    name = os.path.basename(js)[:-5]
    meta = json.load(open(js))
    data = open(js[:-5] + ".h5", "rb").read()
    dims, maxd, chunk = meta["dims"], meta["max_dims"], meta["chunk_dims"]
    if max(dims + chunk + [m for m in maxd if m >= 0]) >= 0xFFFF:
        continue  # the target's dimensions are u16
    kinds = [("bt1", 0, b"TREE"), ("single", 1, None), ("implicit", 2, None),
             ("fa", 3, b"FAHD"), ("ea", 4, b"EAHD")]
    kind, sig = next(((k, s) for p, k, s in kinds if name.startswith(p)), (5, b"BTHD"))
    p = [0] * 5
    node = 0
    if sig is not None:
        addr = data.find(sig)
        if addr < 0:
            continue
        if sig == b"FAHD":
            p[0] = data[addr + 7]
        elif sig == b"EAHD":
            p = [data[addr + 7], data[addr + 8], data[addr + 10], data[addr + 9], data[addr + 11]]
        elif sig == b"BTHD":
            node = struct.unpack_from("<I", data, addr + 6)[0]
            p[0], p[1] = data[addr + 14], data[addr + 15]
    else:
        addr = meta["addrs"][0]
    version = 3 if kind == 0 else (5 if "latest" in name else 4)
    filtered = bool(meta["filtered"])
    rank = len(dims)
    hdr = struct.pack("<BB", kind, rank - 1)
    hdr += struct.pack(f"<{rank}H", *dims)
    hdr += struct.pack(f"<{rank}H", *[0xFFFF if m < 0 else m for m in maxd])
    hdr += struct.pack(f"<{rank}H", *chunk)
    hdr += struct.pack("<HBBBQB", meta["element_size"], int(filtered), version - 3, 0, addr, 3)
    hdr += bytes(p) + struct.pack("<I", node)
    if filtered:
        hdr += struct.pack("<Q", meta["chunks"][0]["size"])
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(hdr + data)
