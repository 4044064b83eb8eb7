"""A dashboard's small reads: the fixed cost of reading one value (or a small window) many times.

A netCDF4 file ``air(time=100, lat=180, lon=360)`` float32, zlib + shuffle, chunks (1, 30, 30)
(about 3.6 KB decoded per chunk: decoding is a small part of a read), is read ``--reads``
times one point (and one 4 x 4 window inside a chunk) at a time, each read a different chunk,
through:

- refzarr's array reader (``refzarr.open_dataset(refs)`` variable's backend array),
- ``refzarr.open_dataset(refs)["air"].isel(...).values`` (xarray's indexing included),
- `refzarr.ReferenceStore` + ``zarr.open_array``,
- kerchunk's references through fsspec's ``ReferenceFileSystem`` + ``zarr.open_array``
  (what a user would otherwise use).

Printed per read: CPU microseconds (the process's CPU time, all threads; steadier than wall
clock on a shared machine) as the minimum and median of ``--repeat`` loops, and wall-clock
microseconds (median), with ratios against the fsspec + zarr row. Files live in
``benchmarks/.cache/small_reads/`` and are reused.

Usage::

    python benchmarks/bench_small_reads.py
    python benchmarks/bench_small_reads.py --reads 200 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "small_reads"
STEPS = 100


def generate() -> tuple[Path, Path, Path]:
    """The file, refzarr's JSON references and kerchunk's (made once)."""
    import netCDF4
    import numpy as np

    import refzarr

    CACHE.mkdir(parents=True, exist_ok=True)
    source, ours, theirs = CACHE / "air.nc", CACHE / "refzarr.json", CACHE / "kerchunk.json"
    if not source.exists():
        partial = source.with_suffix(".part")
        with netCDF4.Dataset(partial, "w") as nc:
            nc.createDimension("time", STEPS)
            nc.createDimension("lat", 180)
            nc.createDimension("lon", 360)
            air = nc.createVariable(
                "air", "f4", ("time", "lat", "lon"), zlib=True, shuffle=True, chunksizes=(1, 30, 30)
            )
            rng = np.random.default_rng(0)
            air[:] = np.round(250 + 50 * rng.random((STEPS, 180, 360), dtype=np.float32), 2)
        partial.rename(source)
    if not ours.exists():
        refzarr.write(refzarr.scan(str(source)), ours)
    if not theirs.exists():
        from kerchunk.hdf import SingleHdf5ToZarr

        with open(source, "rb") as f:
            theirs.write_text(json.dumps(SingleHdf5ToZarr(f, url=str(source)).translate()))
    return source, ours, theirs


def readers(ours: Path, theirs: Path) -> dict[str, Callable[[int, bool], object]]:
    """Per tool: ``read(k, window)``, the k-th read (a different chunk each time)."""
    import zarr

    import refzarr

    ds = refzarr.open_dataset(ours)
    backend: Any = ds["air"].variable._data
    while not hasattr(backend, "reader"):  # xarray's lazy wrappers around the backend array
        backend = backend.array
    array = backend.reader
    store = zarr.open_array(refzarr.ReferenceStore(ours), path="air", mode="r", zarr_format=2)
    options = {"fo": str(theirs)}
    kerchunk = zarr.open_group("reference://", mode="r", zarr_format=2, storage_options=options)
    theirs_array: Any = kerchunk["air"]

    def where(k: int, window: bool) -> tuple[Any, ...]:
        t, i, j = k % STEPS, 30 * (k // STEPS % 6) + 5, 30 * (k // 600 % 12) + 7
        return (t, slice(i, i + 4), slice(j, j + 4)) if window else (t, i, j)

    def engine(k: int, window: bool) -> object:
        t, i, j = where(k, window)
        return ds["air"].isel(time=t, lat=i, lon=j).values

    return {
        "refzarr array reader": lambda k, w: array[where(k, w)],
        "refzarr open_dataset isel": engine,
        "refzarr ReferenceStore+zarr": lambda k, w: store[where(k, w)],
        "fsspec+zarr (kerchunk)": lambda k, w: theirs_array[where(k, w)],
    }


def measure(call: Callable[[int, bool], object], reads: int, repeat: int, window: bool) -> Any:
    for k in range(10):  # warm: first reads open files, build caches
        call(k, window)
    cpu, wall = [], []
    for _ in range(repeat):
        start, started = time.perf_counter(), time.process_time()
        for k in range(reads):
            call(k, window)
        wall.append((time.perf_counter() - start) / reads * 1e6)
        cpu.append((time.process_time() - started) / reads * 1e6)
    return min(cpu), statistics.median(cpu), statistics.median(wall)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    _, ours, theirs = generate()
    tools = readers(ours, theirs)
    print(f"bench_small_reads: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"{args.reads} reads x {args.repeat}; microseconds per read")
    columns = ("cpu min", "cpu med", "wall med", "vs fsspec")
    print(f"{'read':<8} {'tool':<28} " + " ".join(f"{c:>9}" for c in columns))
    for window in (False, True):
        found = {
            name: measure(call, args.reads, args.repeat, window) for name, call in tools.items()
        }
        base = found["fsspec+zarr (kerchunk)"][0]
        for name, (low, mid, wall) in found.items():
            kind = "4x4" if window else "point"
            print(f"{kind:<8} {name:<28} {low:9.0f} {mid:9.0f} {wall:9.0f} {low / base:8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
