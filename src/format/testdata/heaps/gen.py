#!/usr/bin/env python3
"""Generate the small HDF5 fixtures for the heap, symbol-table and v2 B-tree tests, and
expected.json with what h5py (libhdf5) reports about them.

Run from this directory: python3 gen.py  (h5py 3.16 with HDF5 2.0 wrote the committed files).
"""
import ctypes
import glob
import json
import os

import h5py
import numpy as np

expected = {}

# Dense links (fractal heap + v2 B-tree type 5, and type 6 with track_order), two names long
# enough (> 4 KiB) to become huge heap objects found through a type-1 v2 B-tree.
with h5py.File('dense_links.h5', 'w', libver='latest') as f:
    g = f.create_group('g', track_order=True)
    for i in range(60):
        g.create_group(f'link_{i:03d}_' + 'x' * (i % 23))
    g.create_group('H' + 'y' * 5000)
    g.create_group('I' + 'z' * 4500)
    expected['dense_links.h5'] = {'links': list(g.keys())}

# Dense attributes (v2 B-tree type 8 and 9), one larger than the maximum managed object size.
with h5py.File('dense_attrs.h5', 'w', libver='latest') as f:
    d = f.create_dataset('d', data=np.arange(4), track_order=True)
    for i in range(20):
        d.attrs[f'attr{i:03d}'] = np.arange(i + 1, dtype='i8')
    d.attrs['big'] = np.full(6000, 7, dtype='u1')
    expected['dense_attrs.h5'] = {'attrs': list(d.attrs.keys())}

# An old-style group (symbol table, local heap) with a soft link, and vlen strings (global heap).
with h5py.File('old_style.h5', 'w', libver='earliest') as f:
    g = f.create_group('g')
    for i in range(20):
        g.create_group(f'n{i:03d}')
    g['soft'] = h5py.SoftLink('/g/n001')
    s = [('str%d' % i) * (i % 5 + 1) for i in range(50)]
    f.create_dataset('s', data=s, dtype=h5py.string_dtype())
    expected['old_style.h5'] = {'links': list(g.keys()), 'vlen': s}

def chunk_info(f):
    """Every chunk of every chunked dataset of `f`, as h5py reports it."""
    info = {}
    for k, ds in f.items():
        if not isinstance(ds, h5py.Dataset):
            continue
        recs = []
        for i in range(ds.id.get_num_chunks()):
            ci = ds.id.get_chunk_info(i)
            recs.append([[o // c for o, c in zip(ci.chunk_offset, ds.chunks)],
                         ci.byte_offset, ci.size, ci.filter_mask])
        info[k] = {'dims': list(ds.shape), 'chunks': list(ds.chunks),
                   'esize': ds.dtype.itemsize, 'filtered': ds.compression is not None,
                   'records': recs}
    return info


# v2 B-tree chunk indexes: two unlimited dimensions, layout v4 (v114) and v5 (latest).
rng = np.random.default_rng(1)
for name, lv in (('chunks_v114.h5', ('v114', 'v114')), ('chunks_latest.h5', 'latest')):
    with h5py.File(name, 'w', libver=lv) as f:
        a = np.arange(24 * 24, dtype='u1').reshape(24, 24)
        f.create_dataset('plain', data=a, chunks=(2, 2), maxshape=(None, None))
        f.create_dataset('gz', data=a, chunks=(2, 2), maxshape=(None, None), compression='gzip')
        f.create_dataset('lzf', data=rng.integers(0, 256, size=(12, 12)).astype('u1'),
                         chunks=(3, 4), maxshape=(None, None), compression='lzf')
        d = f.create_dataset('sparse', shape=(100, 100), chunks=(10, 10),
                             maxshape=(None, None), dtype='u1')
        d[0:20, 0:20] = 1
        d[50:60, 90:100] = 2
        expected[name] = {'datasets': chunk_info(f)}

# A link heap with an I/O filter (deflate on the group creation property list), only reachable
# through the C API: h5py's bundled libhdf5 via ctypes.
libdir = os.path.join(os.path.dirname(h5py.__file__), '..', 'h5py.libs')
libhdf5 = ctypes.CDLL(glob.glob(os.path.join(libdir, 'libhdf5-*'))[0])
with h5py.File('filtered_heap.h5', 'w', libver='latest') as f:
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    assert libhdf5.H5Pset_deflate(ctypes.c_int64(gcpl.id), ctypes.c_uint(6)) >= 0
    h5py.h5g.create(f.id, b'g', gcpl=gcpl)
    for i in range(50):
        f['g'].create_group(f'n{i:03d}' + 'q' * 30)

# 4-byte addresses and lengths (file creation property), latest format: dense links with a huge
# name, and v2 B-tree chunk indexes whose filtered sizes take "Size of Lengths" = 4 bytes.
fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
fcpl.set_sizes(4, 4)
fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
fapl.set_libver_bounds(h5py.h5f.LIBVER_LATEST, h5py.h5f.LIBVER_LATEST)
with h5py.File(h5py.h5f.create(b'small_sizes.h5', h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)) as f:
    g = f.create_group('g')
    for i in range(60):
        g.create_group(f'link_{i:03d}')
    g.create_group('H' + 'h' * 5000)
    a = np.arange(30 * 30, dtype='u1').reshape(30, 30)
    f.create_dataset('plain', data=a, chunks=(2, 2), maxshape=(None, None))
    f.create_dataset('gz', data=a, chunks=(2, 2), maxshape=(None, None), compression='gzip')
    expected['small_sizes.h5'] = {'links': list(g.keys()), 'datasets': chunk_info(f)}

with open('expected.json', 'w') as out:
    json.dump(expected, out, separators=(",", ":"))
