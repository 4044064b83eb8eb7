"""Scanning HDF4 files: refzarr against kerchunk's HDF4 reader, on the corpus's HDF4 files.

Each tool is called as its documentation shows: ``refzarr.scan(path)`` and
``kerchunk.hdf4.HDF4ToZarr(path).translate()``. Both are imported and run once on a small
file before the clock starts; each file is then scanned ``--repeat`` times per tool, in turn,
in one process, and the median wall time is reported (files come from the page cache).
kerchunk's reader fails on some files (it expects every SDS to hold data): the failure is
printed in place of a time.

Usage::

    python benchmarks/bench_hdf4.py               # every HDF4 file of the corpus
    python benchmarks/bench_hdf4.py --repeat 3 path/to/file.hdf
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "files" / "hdf4"


def _refzarr() -> Callable[[Path], object]:
    import refzarr

    return lambda path: refzarr.scan(path)


def _kerchunk() -> Callable[[Path], object]:
    from kerchunk.hdf4 import HDF4ToZarr

    return lambda path: HDF4ToZarr(str(path)).translate()


def _time(scan: Callable[[Path], object], path: Path, repeat: int) -> float | str:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            scan(path)
        except Exception as exc:  # report kerchunk's failures instead of timing them
            return f"fails ({type(exc).__name__}: {exc})"[:60]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    files = args.files or sorted(CORPUS.glob("*"), key=lambda p: -p.stat().st_size)
    tools = {"refzarr": _refzarr(), "kerchunk": _kerchunk()}
    smallest = min(files, key=lambda p: p.stat().st_size)
    for scan in tools.values():
        with contextlib.suppress(Exception):  # warm-up only: failures are reported below
            scan(smallest)
    print(f"{'file':<48} {'MB':>6} {'refzarr s':>10} {'kerchunk s':>12} {'x':>6}")
    for path in files:
        ours = _time(tools["refzarr"], path, args.repeat)
        theirs = _time(tools["kerchunk"], path, args.repeat)
        ratio = (
            f"{theirs / ours:6.1f}"
            if isinstance(ours, float) and isinstance(theirs, float)
            else "-"
        )
        cells = [f"{v:.4f}" if isinstance(v, float) else v for v in (ours, theirs)]
        size = path.stat().st_size / 1e6
        print(f"{path.name[:48]:<48} {size:6.2f} {cells[0]:>10} {cells[1]:>12} {ratio:>6}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
