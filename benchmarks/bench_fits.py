"""Scanning and reading tile-compressed FITS images: refzarr against kerchunk and astropy.

The workload of issue 16: an 8,000 x 8,000 int16 image, RICE_1-compressed by astropy, once in
row tiles (8,000 tiles of one row) and once in 256 x 256 tiles (1,024 tiles, edge tiles
included). Measured in one run, in this process, each after one warm-up call:

- scan: ``refzarr.scan(path)``; kerchunk's ``kerchunk.fits.process_file(path)`` (its
  documented entry point); astropy opening the file and reading the tile table
  (``fits.open(path)[1].compressed_data``), the floor for anything built on astropy;
- read: every pixel through refzarr, by xarray (``refzarr.open_dataset(group)[name].values``)
  and by refzarr's array reader alone (``ArrayReader(array, ...).read()``), against astropy's
  ``fits.open(path)[1].data``.

Wall-clock medians of ``--repeat`` rounds, each round running astropy, refzarr and kerchunk
once in turn (so that a change of load touches them alike), and the ratio to astropy; the
load average before each file is printed (figures from a loaded 2-core machine are noisy). kerchunk
"succeeds" on these files but references the compressed table's bytes as the image (wrong
values): its time is shown for comparison only. Files are generated once into
``benchmarks/.cache/fits/``.

Usage::

    python benchmarks/bench_fits.py               # the issue's run
    python benchmarks/bench_fits.py --size 2000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from astropy.io import fits

import refzarr
from refzarr.io import RangeReader
from refzarr.reader.array import ArrayReader

CACHE = Path(__file__).resolve().parent / ".cache" / "fits"


def make_file(size: int, tile: tuple[int, int]) -> Path:
    """The int16 RICE_1 image of ``size`` x ``size`` pixels in tiles of ``tile``."""
    path = CACHE / f"rice_{size}_{tile[0]}x{tile[1]}.fits"
    if path.exists():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:size, 0:size]
    image = (1000 + 200 * np.sin(x / 150) * np.cos(y / 90)).astype("i2")
    image += rng.poisson(20, size=image.shape).astype("i2")
    hdu = fits.CompImageHDU(image, compression_type="RICE_1", tile_shape=tile)
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    return path


def interleaved(calls: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float | None]:
    """Median seconds of each call over ``repeat`` rounds, after one warm-up round; each round
    runs every call once, so a change of load touches them all alike. A call that raises
    the first time is left out of the rounds (None)."""
    timed: dict[str, list[float]] = {}
    for label, call in calls.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                call()
        except Exception as exc:  # kerchunk cannot reference some files
            print(f"  {label} failed: {type(exc).__name__}: {exc}"[:160])
        else:
            timed[label] = []
    for _ in range(repeat):
        for label in timed:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                calls[label]()
                timed[label].append(time.perf_counter() - start)
    return {label: statistics.median(timed[label]) if label in timed else None for label in calls}


def astropy_table(path: Path) -> None:
    with fits.open(path) as hdul:
        np.asarray(hdul[1].compressed_data)


def astropy_data(path: Path) -> None:
    with fits.open(path) as hdul:
        np.asarray(hdul[1].data)


def kerchunk_scan(path: Path) -> Any:
    from kerchunk.fits import process_file  # type: ignore[import-untyped]

    return process_file(str(path))


def refzarr_read(group: refzarr.RefGroup) -> None:
    with refzarr.open_dataset(group) as ds:
        np.asarray(ds["COMPRESSED_IMAGE"].values)


def refzarr_reader(group: refzarr.RefGroup) -> None:
    array = group["COMPRESSED_IMAGE"]
    assert isinstance(array, refzarr.RefArray)
    ArrayReader(array, "COMPRESSED_IMAGE", RangeReader()).read()


def row(label: str, seconds: float | None, floor: float) -> str:
    if seconds is None:
        return f"  {label:<36} {'failed':>10}"
    return f"  {label:<36} {seconds * 1000:>8.1f} ms  {seconds / floor:>6.2f}x astropy"


def run(size: int, repeat: int) -> None:
    for tile in ((1, size), (256, 256)):
        path = make_file(size, tile)
        nbytes = path.stat().st_size
        load = os.getloadavg()[0]
        print(
            f"{size} x {size} int16 RICE_1, tiles {tile[0]} x {tile[1]} ({nbytes:,} bytes), "
            f"load {load:.1f}, medians of {repeat}"
        )
        scans = interleaved(
            {
                "astropy open + tile table": partial(astropy_table, path),
                "refzarr.scan": partial(refzarr.scan, path),
                "kerchunk.fits.process_file": partial(kerchunk_scan, path),
            },
            repeat,
        )
        report(scans)
        group = refzarr.scan(path)
        reads = interleaved(
            {
                "astropy .data (decode all)": partial(astropy_data, path),
                "refzarr read (decode all, xarray)": partial(refzarr_read, group),
                "refzarr ArrayReader (decode all)": partial(refzarr_reader, group),
            },
            repeat,
        )
        report(reads)


def report(times: dict[str, float | None]) -> None:
    """One row per call, with its ratio to the first (astropy's)."""
    floor = next(iter(times.values()))
    for label, seconds in times.items():
        print(row(label, seconds, floor or float("nan")))


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark (``argv``: command-line arguments, default ``sys.argv[1:]``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8000, help="image side in pixels")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per measurement")
    args = parser.parse_args(argv)
    run(args.size, args.repeat)


if __name__ == "__main__":
    main()
