#!/usr/bin/env python3
"""Write filter test vectors from real HDF5 files (h5py + hdf5plugin).

For each case: create a chunked dataset with the filter pipeline, read one stored chunk
with read_direct_chunk, and write
  <name>.chunk     the stored bytes
  <name>.expected  the decoded bytes (ds[chunk region].tobytes())
  <name>.json      {"filters": [{"id", "flags", "cd"}], "mask", "expected_len"}
Run from this folder: python3 make_vectors.py
"""
import json
import os
import sys

import ctypes
import glob

import h5py
import hdf5plugin
import numpy as np

OUT = os.path.dirname(os.path.abspath(__file__))
TMP = "/tmp/filters/vectors.h5"
rng = np.random.default_rng(20261122)


def smooth_f32(n):
    x = np.linspace(0, 20, n)
    return (np.sin(x) * 100 + rng.normal(0, 0.5, n)).astype("<f4")


def smooth_i16(n):
    x = np.linspace(0, 30, n)
    return (np.cos(x) * 1200 + rng.integers(-20, 20, n)).astype("<i2")


def smooth_u8(n):
    x = np.linspace(0, 10, n)
    return (np.abs(np.sin(x)) * 200 + rng.integers(0, 2, n)).astype("u1")


def steps_f32(n):
    # Runs of repeated values: compressible by LZF, which finds no matches in noisy floats.
    return np.repeat(rng.normal(0, 100, n // 16), 16).astype("<f4")


def pipeline(ds):
    dcpl = ds.id.get_create_plist()
    out = []
    for i in range(dcpl.get_nfilters()):
        code, flags, cd, _name = dcpl.get_filter(i)
        out.append({"id": int(code), "flags": int(flags), "cd": [int(v) for v in cd]})
    return out


def compound_data(n):
    mem = np.dtype([("a", "<i4"), ("b", ">u2", (3,)), ("c", "S3")])
    data = np.zeros(n, mem)
    data["a"] = rng.integers(-(2**19), 2**19, n)
    data["b"] = rng.integers(0, 512, (n, 3))
    data["c"] = [b"x%02d" % (i % 100) for i in range(n)]
    return data


def nbit_compound(f, name, data, nbit=True):
    """Compound {a: int32 with 20 bits at offset 4, b: 3 x uint16 with 9 bits, c: 3-byte
    string}, nbit-filtered; returns the dataset."""
    a = h5py.h5t.STD_I32LE.copy()
    a.set_precision(20)
    a.set_offset(4)
    base = h5py.h5t.STD_U16BE.copy()
    base.set_precision(9)
    b = h5py.h5t.array_create(base, (3,))
    c = h5py.h5t.C_S1.copy()
    c.set_size(3)
    tid = h5py.h5t.create(h5py.h5t.COMPOUND, 4 + 6 + 3)
    tid.insert(b"a", 0, a)
    tid.insert(b"b", 4, b)
    tid.insert(b"c", 10, c)
    n = len(data)
    space = h5py.h5s.create_simple((n,))
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((n // 2,))
    if nbit:
        set_nbit(dcpl)
    dsid = h5py.h5d.create(f.id, name.encode(), tid, space, dcpl)
    dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, data, mtype=h5py.h5t.py_create(data.dtype))
    return f[name]


def set_nbit(dcpl):
    # h5py has no wrapper for H5Pset_nbit: call h5py's bundled libhdf5 directly.
    libdir = os.path.join(os.path.dirname(h5py.__file__), "..", "h5py.libs")
    lib = ctypes.CDLL(glob.glob(os.path.join(libdir, "libhdf5-*.so*"))[0])
    lib.H5Pset_nbit.argtypes = [ctypes.c_int64]
    assert lib.H5Pset_nbit(dcpl.id) >= 0


def dump_raw_expected(name, twin, offset):
    """Replace <name>.expected by the stored chunk of an unfiltered twin dataset: ds[...]
    would convert reduced-precision types to native ones."""
    with open(os.path.join(OUT, name + ".expected"), "wb") as out:
        out.write(twin.id.read_direct_chunk((offset,))[1])


def dump(name, ds, chunk_index=1):
    """Write the vector of the chunk_index-th chunk (1-D datasets, full chunks)."""
    (clen,) = ds.chunks
    off = chunk_index * clen
    mask, raw = ds.id.read_direct_chunk((off,))
    expected = ds[off : off + clen].tobytes()
    with open(os.path.join(OUT, name + ".chunk"), "wb") as f:
        f.write(raw)
    with open(os.path.join(OUT, name + ".expected"), "wb") as f:
        f.write(expected)
    meta = {"filters": pipeline(ds), "mask": int(mask), "expected_len": len(expected)}
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(meta, f)
        f.write("\n")
    print(f"{name:28s} stored {len(raw):6d} decoded {len(expected):6d} mask {mask} {meta['filters']}")


def nbit_dataset(f, name, data, precision, offset, nbit=True):
    """int16 stored with `precision` significant bits at bit `offset`, nbit-filtered."""
    tid = h5py.h5t.STD_I16LE.copy()
    tid.set_precision(precision)
    tid.set_offset(offset)
    space = h5py.h5s.create_simple(data.shape)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((2048,))
    if not nbit:
        dsid = h5py.h5d.create(f.id, name.encode(), tid, space, dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, data)
        return f[name]
    set_nbit(dcpl)
    dsid = h5py.h5d.create(f.id, name.encode(), tid, space, dcpl)
    dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, data)
    return f[name]


def main():
    n = 2048 * 3
    f32, i16, u8, steps = smooth_f32(n), smooth_i16(n), smooth_u8(n), steps_f32(n)
    noise = rng.integers(0, 256, n, dtype=np.uint8)
    with h5py.File(TMP, "w") as f:
        c = (2048,)
        cases = [
            ("deflate_f32", f32, dict(compression="gzip", compression_opts=4)),
            ("shuffle_deflate_f32", f32, dict(shuffle=True, compression="gzip", compression_opts=4)),
            ("fletcher32_i16", i16, dict(fletcher32=True)),
            ("shuffle_deflate_fletcher32_i16", i16, dict(shuffle=True, compression="gzip", fletcher32=True)),
            ("szip_i16", i16, dict(compression="szip")),
            ("scaleoffset_i16", i16, dict(scaleoffset=0)),
            ("scaleoffset_u8", u8, dict(scaleoffset=0)),
            ("scaleoffset_f32", f32, dict(scaleoffset=2)),
            ("lzf_steps_f32", steps, dict(compression="lzf")),
            ("lzf_i16", i16, dict(compression="lzf")),
            ("lzf_random_u8", noise, dict(compression="lzf")),
            ("bzip2_i16", i16, dict(**hdf5plugin.BZip2(blocksize=9))),
            ("lz4_f32", f32, dict(**hdf5plugin.LZ4(nbytes=0))),
            ("lz4_small_blocks_u8", u8, dict(**hdf5plugin.LZ4(nbytes=512))),
            ("zstd_f32", f32, dict(**hdf5plugin.Zstd(clevel=3))),
            ("bitshuffle_f32", f32, dict(**hdf5plugin.Bitshuffle(cname="none"))),
            ("bitshuffle_lz4_i16", i16, dict(**hdf5plugin.Bitshuffle(cname="lz4"))),
            ("bitshuffle_zstd_f32", f32, dict(**hdf5plugin.Bitshuffle(cname="zstd"))),
            ("blosc_blosclz_shuffle_f32", f32, dict(**hdf5plugin.Blosc(cname="blosclz", shuffle=hdf5plugin.Blosc.SHUFFLE))),
            ("blosc_blosclz_noshuffle_u8", np.repeat(u8[::8], 8), dict(**hdf5plugin.Blosc(cname="blosclz", shuffle=hdf5plugin.Blosc.NOSHUFFLE))),
            ("blosc_lz4_bitshuffle_i16", i16, dict(**hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.BITSHUFFLE))),
            ("blosc_lz4hc_shuffle_f32", f32, dict(**hdf5plugin.Blosc(cname="lz4hc", shuffle=hdf5plugin.Blosc.SHUFFLE))),
            ("blosc_zlib_shuffle_i16", i16, dict(**hdf5plugin.Blosc(cname="zlib", shuffle=hdf5plugin.Blosc.SHUFFLE))),
            ("blosc_zstd_shuffle_f32", f32, dict(**hdf5plugin.Blosc(cname="zstd", shuffle=hdf5plugin.Blosc.SHUFFLE))),
            ("blosc_random_u8", noise, dict(**hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.NOSHUFFLE))),
            ("blosc2_lz4_f32", f32, dict(**hdf5plugin.Blosc2(cname="lz4"))),
            ("zfp_f32", f32, dict(**hdf5plugin.Zfp(rate=16))),
        ]
        for name, data, kw in cases:
            ds = f.create_dataset(name, data=data, chunks=c, **kw)
            dump(name, ds)
        # Blosc with a chunk larger than its internal block size: several blocks per frame.
        # The 1 MiB decoded chunk is not stored: the test rebuilds it (arange % 1000 as f32).
        big = (np.arange(262144 * 2) % 1000).astype("<f4")
        ds = f.create_dataset("blosc_blosclz_multiblock_f32", data=big, chunks=(262144,),
                              **hdf5plugin.Blosc(cname="blosclz", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE))
        dump("blosc_blosclz_multiblock_f32", ds)
        os.remove(os.path.join(OUT, "blosc_blosclz_multiblock_f32.expected"))
        # ds[...] converts the 12-bit type to native int16 (sign extension): the expected
        # bytes are the raw stored chunk of an unfiltered twin dataset instead.
        ds = nbit_dataset(f, "nbit_i16", (i16 // 4).astype("<i2"), 12, 2)
        dump("nbit_i16", ds)
        twin = nbit_dataset(f, "nbit_i16_raw", (i16 // 4).astype("<i2"), 12, 2, nbit=False)
        dump_raw_expected("nbit_i16", twin, 2048)
        cdata = compound_data(600)
        ds = nbit_compound(f, "nbit_compound", cdata)
        dump("nbit_compound", ds)
        twin = nbit_compound(f, "nbit_compound_raw", cdata, nbit=False)
        dump_raw_expected("nbit_compound", twin, 300)

        # Scale-offset: big-endian with fill values present, float64, full-range integers.
        be = (i16.astype("<i4") * 1000).astype(">i4")
        be[::50] = -7
        ds = f.create_dataset("scaleoffset_fill_be_i32", data=be, chunks=c, scaleoffset=0, fillvalue=-7)
        dump("scaleoffset_fill_be_i32", ds)
        f64 = f32.astype("<f8") * 1.5
        f64[::40] = 99.5
        ds = f.create_dataset("scaleoffset_fill_f64", data=f64, chunks=c, scaleoffset=3, fillvalue=99.5)
        dump("scaleoffset_fill_f64", ds)
        full = rng.integers(0, 65536, n).astype("<u2")
        full[::100] = 0
        full[1::100] = 65535
        ds = f.create_dataset("scaleoffset_full_u16", data=full, chunks=c, scaleoffset=0)
        dump("scaleoffset_full_u16", ds)

        # SZIP: entropy coding only, 32-bit pixels (coded as shuffled bytes), 8-bit pixels,
        # big-endian samples, and scanlines that are not a whole number of blocks.
        szip_cases = [
            ("szip_ec_i16", i16, c, ("ec", 16)),
            ("szip_nn_f32", f32, c, ("nn", 32)),
            ("szip_nn_u8", u8, c, ("nn", 8)),
            ("szip_nn_be_i32", (i16.astype("<i4") * 300).astype(">i4"), c, ("nn", 32)),
            ("szip_nn_f64", f32.astype("<f8"), c, ("nn", 8)),
            ("szip_nn_pad_i16", i16[: 2 * 1001], (1001,), ("nn", 16)),
        ]
        for name, data, chunks, opts in szip_cases:
            ds = f.create_dataset(name, data=data, chunks=chunks, compression="szip", compression_opts=opts)
            dump(name, ds)

        # Bitshuffle with a short last block and a tail of n % 8 elements (chunk of 1003).
        odd = np.concatenate([i16[:1003], i16[:1003]])
        for cname in ("none", "lz4"):
            name = f"bitshuffle_{cname}_tail_i16"
            ds = f.create_dataset(name, data=odd, chunks=(1003,), **hdf5plugin.Bitshuffle(nelems=256, cname=cname))
            dump(name, ds)

        # Blosc frames with a full 64 KiB block and a short leftover block (chunk of 40003 i16).
        left = np.concatenate([smooth_i16(40003), smooth_i16(40003)])
        for cname, shuf in (("blosclz", hdf5plugin.Blosc.SHUFFLE), ("lz4", hdf5plugin.Blosc.BITSHUFFLE)):
            name = f"blosc_{cname}_leftover_i16"
            ds = f.create_dataset(name, data=left, chunks=(40003,), **hdf5plugin.Blosc(cname=cname, clevel=1, shuffle=shuf))
            dump(name, ds)

        blosc2_vectors(f)
        zfp_vectors(f)
    lzo_vectors()


# ---------------------------------------------------------------------------------------
# Blosc2 (32026) vectors, added by the "filters2" work: b2nd frames of 2-D chunks padded to
# whole blocks, special-value chunks, several codecs, and explicit block sizes and the delta
# filter, only reachable through raw cd values.

def dump2d(name, ds, index):
    """Vector of chunk `index` along axis 0 of a 2-D dataset (full chunks)."""
    r, c = ds.chunks
    mask, raw = ds.id.read_direct_chunk((index * r, 0))
    expected = ds[index * r : (index + 1) * r, 0:c].tobytes()
    with open(os.path.join(OUT, name + ".chunk"), "wb") as f:
        f.write(raw)
    with open(os.path.join(OUT, name + ".expected"), "wb") as f:
        f.write(expected)
    meta = {"filters": pipeline(ds), "mask": int(mask), "expected_len": len(expected)}
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(meta, f)
        f.write("\n")
    print(f"{name:28s} stored {len(raw):6d} decoded {len(expected):6d} mask {mask} {meta['filters']}")


def blosc2_raw(f, name, data, chunks, cd):
    """Dataset with the Blosc2 filter given by raw client data (set_local fills 0-3)."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk(chunks)
    dcpl.set_filter(32026, h5py.h5z.FLAG_OPTIONAL, cd)
    space = h5py.h5s.create_simple(data.shape)
    tid = h5py.h5t.py_create(data.dtype)
    dsid = h5py.h5d.create(f.id, name.encode(), tid, space, dcpl)
    dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, data)
    return f[name]


def blosc2_vectors(f):
    # A 300 x 300 float32 chunk is split into 256 x 256 blocks over a 512 x 512 padded
    # chunk. The 360 KB decoded chunk is not stored: it is arange % 1000 (see tests.rs).
    big = (np.arange(600 * 300) % 1000).astype("<f4").reshape(600, 300)
    ds = f.create_dataset("blosc2_b2nd_padded_f32", data=big, chunks=(300, 300),
                          **hdf5plugin.Blosc2(cname="zstd", filters=hdf5plugin.Blosc2.SHUFFLE))
    dump2d("blosc2_b2nd_padded_f32", ds, 1)
    os.remove(os.path.join(OUT, "blosc2_b2nd_padded_f32.expected"))
    # Small 2-D chunk in one block, bit-shuffled doubles.
    ds = f.create_dataset("blosc2_b2nd_bitshuffle_f64", data=smooth_f32(40 * 30).astype("<f8").reshape(40, 30),
                          chunks=(20, 30), **hdf5plugin.Blosc2(cname="lz4", filters=hdf5plugin.Blosc2.BITSHUFFLE))
    dump2d("blosc2_b2nd_bitshuffle_f64", ds, 1)
    # 1-D frames: blosclz with several blocks and a short last one, zlib without shuffle.
    odd = np.concatenate([smooth_i16(20003), smooth_i16(20003)])
    ds = blosc2_raw(f, "blosc2_blosclz_leftover_i16", odd, (20003,), (1, 8192, 2, 40006, 9, 1, 0))
    dump("blosc2_blosclz_leftover_i16", ds)
    ds = f.create_dataset("blosc2_zlib_noshuffle_u8", data=smooth_u8(4096), chunks=(2048,),
                          **hdf5plugin.Blosc2(cname="zlib", filters=hdf5plugin.Blosc2.NOFILTER))
    dump("blosc2_zlib_noshuffle_u8", ds)
    # Special values: a chunk of zeros (a flagged offset, no chunk stored), a run of NaNs and
    # a run of one value (runs of repeated bytes per shuffled stream).
    sp = np.zeros(768, "<f4")
    sp[256:512] = np.nan
    sp[512:] = 7.5
    ds = f.create_dataset("blosc2_special", data=sp, chunks=(256,), **hdf5plugin.Blosc2())
    for i, kind in enumerate(("zeros", "nan", "value")):
        dump(f"blosc2_special_{kind}_f32", ds, i)
    # Delta (3) in the filter slot (truncate precision, 4, fails with meta 0 and stores raw); cd = [rev, blocksize, typesize,
    # chunk bytes, clevel, filter, codec], codec 5 = zstd, 0 = blosclz.
    ramp = (np.arange(8192) * 3 + rng.integers(0, 4, 8192)).astype("<i4")
    ds = blosc2_raw(f, "blosc2_delta_i32", ramp, (4096,), (1, 2048, 4, 16384, 5, 3, 5))
    dump("blosc2_delta_i32", ds)


# ---------------------------------------------------------------------------------------
# ZFP (32013) vectors, added by the "filters2" work: each mode in 2-D and 3-D chunks with
# partial edge blocks (chunk sides not multiples of 4).

def zfp_vectors(f):
    x = np.linspace(0, 6, 30 * 22)
    smooth = (np.sin(x) * 50 + rng.normal(0, 0.5, x.size)).reshape(30, 22)
    cases = [
        ("zfp_rate_2d_f32", smooth.astype("<f4"), (15, 22), hdf5plugin.Zfp(rate=12)),
        ("zfp_precision_2d_f64", smooth.astype("<f8"), (15, 22), hdf5plugin.Zfp(precision=24)),
        ("zfp_accuracy_2d_f32", smooth.astype("<f4"), (15, 22), hdf5plugin.Zfp(accuracy=0.01)),
        ("zfp_reversible_2d_f64", smooth.astype("<f8"), (15, 22), hdf5plugin.Zfp(reversible=True)),
        ("zfp_reversible_2d_f32", smooth.astype("<f4"), (15, 22), hdf5plugin.Zfp(reversible=True)),
    ]
    for name, data, chunks, flt in cases:
        ds = f.create_dataset(name, data=data, chunks=chunks, **flt)
        dump2d(name, ds, 1)
    cube = (np.sin(np.linspace(0, 4, 2 * 5 * 6 * 7)) * 9).astype("<f8").reshape(10, 6, 7)
    ds = f.create_dataset("zfp_reversible_3d_f64", data=cube, chunks=(5, 6, 7), **hdf5plugin.Zfp(reversible=True))
    mask, raw = ds.id.read_direct_chunk((5, 0, 0))
    expected = ds[5:10].tobytes()
    with open(os.path.join(OUT, "zfp_reversible_3d_f64.chunk"), "wb") as out:
        out.write(raw)
    with open(os.path.join(OUT, "zfp_reversible_3d_f64.expected"), "wb") as out:
        out.write(expected)
    with open(os.path.join(OUT, "zfp_reversible_3d_f64.json"), "w") as out:
        json.dump({"filters": pipeline(ds), "mask": int(mask), "expected_len": len(expected)}, out)
        out.write("\n")


# ---------------------------------------------------------------------------------------
# LZO (305) vectors, added by the "filters2" work. hdf5plugin has no LZO filter, so these
# are built by hand in PyTables' layout: an LZO1X stream (from the `lzokay` package, run
# with PYTHONPATH pointing at it) + Adler-32 of the decoded bytes + their length (u32 LE);
# PyTables tables older than version 20 have no trailer.

def lzo_vectors():
    try:
        import lzokay
    except ImportError:
        print("lzokay not importable: LZO vectors left as they are")
        return
    import zlib
    mixed = np.concatenate([smooth_i16(3000), rng.integers(-30000, 30000, 500).astype("<i2"),
                            np.repeat(smooth_i16(300), 7)]).astype("<i2").tobytes()
    short = bytes([7, 7, 7])
    for name, data, cd, trailer in (("lzo_mixed_i16", mixed, [1, 20, 2], True),
                                    ("lzo_old_table_u8", mixed[:2000] * 2, [1, 10, 0], False),
                                    ("lzo_short_u8", short, [1, 20, 4], True)):
        raw = lzokay.compress(data)
        if trailer:
            raw += (zlib.adler32(data) & 0xffffffff).to_bytes(4, "little") + len(data).to_bytes(4, "little")
        with open(os.path.join(OUT, name + ".chunk"), "wb") as f:
            f.write(raw)
        with open(os.path.join(OUT, name + ".expected"), "wb") as f:
            f.write(data)
        meta = {"filters": [{"id": 305, "flags": 1, "cd": cd}], "mask": 0, "expected_len": len(data)}
        with open(os.path.join(OUT, name + ".json"), "w") as f:
            json.dump(meta, f)
            f.write("\n")
        print(f"{name:28s} stored {len(raw):6d} decoded {len(data):6d}")


if __name__ == "__main__":
    sys.exit(main())
