"""Scanning a large COG-like BigTIFF: refzarr against kerchunk and tifffile's own writer, and
combining 1,000 such scans into one datacube.

The file: 20,000 x 20,000 uint16, 256 x 256 deflate tiles (6,241 at full resolution), 4
reduced-resolution levels (SubIFDs), BigTIFF, GeoTIFF tags. Generated once into
``benchmarks/.cache/tiff/`` (``--cache DIR`` elsewhere; delete it to regenerate).

The tools, each as its documentation shows, in one process, median and best of ``--repeat``
runs after one warm-up run (imports, first-call caches; the file is in the page cache):

- refzarr: ``refzarr.scan(path)`` (every level, with coordinates);
- kerchunk: ``kerchunk.tiff.tiff_to_zarr(path)`` (series 0, its levels, no coordinates);
- tifffile: ``TiffFile(path).series[0].aszarr()`` + ``write_fsspec`` to a string.

Then ``refzarr.combine`` of 1,000 copies of refzarr's scan, each referencing its own file
name (``scene_0000.tif`` ...) and passed through pickle as `scan_many` delivers scans,
stacked along a new ``time`` dimension from a regular expression on the name: time of the
combine alone (median and best of at least 3 runs).

Usage::

    python benchmarks/bench_tiff.py                 # the issue's run
    python benchmarks/bench_tiff.py --files 100     # a quicker combine
"""

from __future__ import annotations

import argparse
import io
import pickle
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

CACHE = Path(__file__).resolve().parent / ".cache" / "tiff"
SIZE = 20_000
TILE = 256
LEVELS = 4


def _tiles(size: int) -> Iterator[np.ndarray]:
    """Every tile of a ``size`` x ``size`` image: a gentle ramp (deflate still has work)."""
    tile = (np.add.outer(np.arange(TILE), np.arange(TILE)) % 4096).astype(np.uint16)
    side = -(-size // TILE)
    count = side * side
    for _ in range(count):
        yield tile


def make_file(cache: Path) -> Path:
    """The benchmark BigTIFF (written once)."""
    import tifffile

    path = cache / f"cog_{SIZE}.tif"
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    geokeys = [1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32633]
    extratags = [
        (33550, "d", 3, (10.0, 10.0, 0.0), True),
        (33922, "d", 6, (0.0, 0.0, 0.0, 300_000.0, 5_000_000.0, 0.0), True),
        (34735, "H", len(geokeys), geokeys, True),
    ]
    options: dict[str, Any] = {
        "dtype": np.uint16,
        "tile": (TILE, TILE),
        "compression": "zlib",
        "photometric": "minisblack",
        "metadata": None,  # no shaped ImageDescription: kerchunk fails on tifffile's tuple
    }
    partial = path.with_suffix(".partial")
    with tifffile.TiffWriter(partial, bigtiff=True) as tif:
        tif.write(_tiles(SIZE), shape=(SIZE, SIZE), subifds=LEVELS, extratags=extratags, **options)
        for level in range(1, LEVELS + 1):
            size = -(-SIZE // 2**level)
            tif.write(_tiles(size), shape=(size, size), subfiletype=1, **options)
    partial.rename(path)
    return path


def timings(run: Callable[[], Any], repeat: int) -> list[float]:
    """Seconds of ``repeat`` runs after one warm-up run."""
    run()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def scan_refzarr(path: Path) -> Any:
    import refzarr

    return refzarr.scan(path)


def scan_kerchunk(path: Path) -> Any:
    from kerchunk.tiff import tiff_to_zarr

    return tiff_to_zarr(str(path))


def scan_tifffile(path: Path) -> Any:
    import tifffile

    with tifffile.TiffFile(path) as tif, tif.series[0].aszarr() as store:
        out = io.StringIO()
        store.write_fsspec(out, url=str(path.parent))
        return out.getvalue()


def renamed(group: Any, url: str) -> Any:
    """``group`` with every reference pointing at ``url`` (a stand-in for another file)."""
    from refzarr import ChunkManifest, RefArray, RefGroup

    members: dict[str, Any] = {}
    for name, member in group.members.items():
        if isinstance(member, RefGroup):
            members[name] = renamed(member, url)
            continue
        manifest = member.manifest
        if manifest.paths:
            manifest = ChunkManifest.from_arrays(
                [url], manifest.path_id, manifest.offset, manifest.length
            )
        members[name] = RefArray(member.meta, manifest)
    return RefGroup(group.attributes, members)


def bench_combine(group: Any, files: int, repeat: int) -> list[float]:
    import refzarr

    urls = [f"/data/scene_{k:04d}.tif" for k in range(files)]
    # through pickle, as scan_many's worker processes deliver them: no object shared
    groups = [pickle.loads(pickle.dumps(renamed(group, url))) for url in urls]
    spec = refzarr.FromRegex(r"scene_(\d+)\.tif")

    def run() -> Any:
        return refzarr.combine(
            groups,
            concat_dims="time",
            coords={"time": spec},
            identical_dims=["spatial_ref"],
            urls=urls,
        )

    return timings(run, repeat)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--files", type=int, default=1000)
    args = parser.parse_args(argv)
    path = make_file(args.cache)
    print(f"file: {path.name}, {path.stat().st_size / 2**20:.1f} MiB")
    rows = {
        "refzarr": timings(lambda: scan_refzarr(path), args.repeat),
        "kerchunk": timings(lambda: scan_kerchunk(path), args.repeat),
        "tifffile": timings(lambda: scan_tifffile(path), args.repeat),
    }
    ours = statistics.median(rows["refzarr"])
    print("| tool | scan, median (s) | best (s) | refzarr faster by (medians) |")
    print("|---|---|---|---|")
    for tool, times in rows.items():
        median = statistics.median(times)
        print(f"| {tool} | {median:.4f} | {min(times):.4f} | {median / ours:.2f}x |")
    times = bench_combine(scan_refzarr(path), args.files, max(3, args.repeat // 2))
    print(
        f"combine {args.files} scans along time: median {statistics.median(times):.3f} s, "
        f"best {min(times):.3f} s of {len(times)}"
    )


if __name__ == "__main__":
    main()
