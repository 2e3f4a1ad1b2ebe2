#!/usr/bin/env python3
"""Write examples/sample.h5: a small file shaped like an instrument pipeline's
output, written with default h5py settings, for trying h5mount by hand.

    python3 examples/make_sample.py [output.h5]

    /                      attrs: title, facility, created (fixed ISO time)
    /detector/             attrs: model, serial, pixel_size_um
    /detector/frames       (40, 64, 64) uint16, chunked (1, 64, 64), gzip
    /detector/timestamps   (40,) float64, attrs units='s'
    /detector/exposure     scalar float32, attrs units='ms'
    /calibration/gain      (64, 64) float32, attrs units='ADU/photon'
    /calibration/dark      (64, 64) uint16
    /calibration/bad_pixels (N, 2) int32 pixel coordinates
    /analysis/mean_intensity (40,) float64
    /analysis/notes        variable-length strings
    /latest -> /detector/frames   (soft link)
"""

import os
import sys

import h5py
import numpy as np

N_FRAMES, H, W = 40, 64, 64


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "sample.h5")
    r = np.random.default_rng(20260101)
    yy, xx = np.mgrid[0:H, 0:W]
    gain = (1.0 + 0.05 * np.sin(xx / 9.0) * np.cos(yy / 7.0)).astype("f4")
    dark = (100 + r.normal(0, 2, size=(H, W))).round().astype("u2")
    frames = np.empty((N_FRAMES, H, W), dtype="u2")
    for t in range(N_FRAMES):
        cx, cy = 10 + t, 32 + 8 * np.sin(t / 3.0)
        spot = 800.0 * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * 4.0 ** 2))
        frames[t] = np.clip(r.poisson(spot * gain + 5) + dark, 0, 65535)
    with h5py.File(out, "w") as f:
        f.attrs["title"] = "h5mount sample: simulated detector run"
        f.attrs["facility"] = "Example Beamline 7"
        f.attrs["created"] = "2026-01-01T12:00:00Z"
        det = f.create_group("detector")
        det.attrs["model"] = "SimCam 64"
        det.attrs["serial"] = np.int32(4711)
        det.attrs["pixel_size_um"] = np.float32(55.0)
        fr = det.create_dataset("frames", data=frames, chunks=(1, H, W), compression="gzip")
        fr.attrs["units"] = "ADU"
        fr.attrs["axes"] = np.array([b"time", b"y", b"x"])
        ts = det.create_dataset("timestamps", data=np.arange(N_FRAMES) * 0.05 + 1.0)
        ts.attrs["units"] = "s"
        ex = det.create_dataset("exposure", data=np.float32(45.0))
        ex.attrs["units"] = "ms"
        cal = f.create_group("calibration")
        g = cal.create_dataset("gain", data=gain)
        g.attrs["units"] = "ADU/photon"
        cal.create_dataset("dark", data=dark)
        bad = np.argwhere(r.random((H, W)) < 0.002).astype("i4")
        cal.create_dataset("bad_pixels", data=bad)
        an = f.create_group("analysis")
        mean = frames.reshape(N_FRAMES, -1).mean(axis=1)
        m = an.create_dataset("mean_intensity", data=mean)
        m.attrs["units"] = "ADU"
        an.create_dataset("notes", data=["run started", "beam stable", "spot drifts in x"],
                          dtype=h5py.string_dtype())
        f["latest"] = h5py.SoftLink("/detector/frames")
    print("wrote %s (%d bytes)" % (out, os.path.getsize(out)))


if __name__ == "__main__":
    main()
