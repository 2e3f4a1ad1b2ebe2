#!/usr/bin/env python3
"""Memory-map a dataset file of a mounted HDF5 file with numpy and sum it.

    h5mount examples/sample.h5 /tmp/h5 && python3 examples/memmap_sum.py /tmp/h5/calibration/gain '<f4'

The dtype and shape are also in the file's xattrs (user.h5.dtype, user.h5.shape).
"""
import os
import sys

import numpy as np

path, dtype = sys.argv[1], np.dtype(sys.argv[2] if len(sys.argv) > 2 else os.getxattr(sys.argv[1], "user.h5.dtype").decode())
a = np.memmap(path, dtype=dtype, mode="r")
print(f"{path}: {a.size} elements of {a.dtype}, sum = {a.sum(dtype=np.float64)}")
