"""The combine step alone: N synthetic scanned groups (built from the model, no files) into one.

Each group looks like a scanned small netCDF4 file: ``air`` (1, 128, 128) float32 in chunks
(1, 64, 64) referenced in its file, ``time`` (1,) int64 with CF units, ``lat`` / ``lon``
(128,) float32, all three inlined (as ``scan(..., inline_threshold=...)`` gives them). Prints
the time of ``refzarr.combine(groups, concat_dims="time")`` for each N (best of a few runs).

Run by hand: ``.venv/bin/python benchmarks/bench_combine_step.py [N ...]``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import refzarr
from refzarr.model import INLINED, ArrayMeta, ChunkManifest, RefArray, RefGroup


def _inlined(values: np.ndarray, dim: str, attributes: dict[str, object]) -> RefArray:
    meta = ArrayMeta(values.shape, values.shape, values.dtype, None, (), attributes, (dim,))
    zero = np.zeros(1, np.uint64)
    manifest = ChunkManifest.from_arrays(
        [], np.full(1, INLINED, np.int32), zero, zero, {(0,): values.tobytes()}
    )
    return RefArray(meta, manifest)


def synthetic_group(k: int) -> RefGroup:
    """One file's group: day ``k``, its ``air`` chunks referenced in ``data/file{k}.nc``."""
    air_meta = ArrayMeta(
        (1, 128, 128),
        (1, 64, 64),
        np.dtype("float32"),
        None,
        (),
        {"units": "K"},
        ("time", "lat", "lon"),
    )
    offsets = 4096 + np.arange(4, dtype=np.uint64).reshape(1, 2, 2) * 16384
    air = RefArray(
        air_meta,
        ChunkManifest.from_arrays(
            [f"data/file{k:05d}.nc"],
            np.zeros((1, 2, 2), np.int32),
            offsets,
            np.full((1, 2, 2), 16384, np.uint64),
        ),
    )
    axis = np.linspace(-90, 90, 128, dtype="float32")
    return RefGroup(
        {"title": "synthetic"},
        {
            "air": air,
            "time": _inlined(np.array([k], "int64"), "time", {"units": "days since 2000-01-01"}),
            "lat": _inlined(axis, "lat", {"units": "degrees_north"}),
            "lon": _inlined(axis * 2, "lon", {"units": "degrees_east"}),
        },
    )


def main(counts: list[int]) -> None:
    for n in counts:
        groups = [synthetic_group(k) for k in range(n)][::-1]  # reversed: combine must sort
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            out = refzarr.combine(groups, concat_dims="time")
            best = min(best, time.perf_counter() - start)
        assert out["air"].shape == (n, 128, 128)
        print(f"combine {n:>6} groups: {best:.3f} s ({best / n * 1e6:.1f} us per group)")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1_000, 10_000])
