"""Scanning HDF5 objects with tens of thousands of attributes (dense storage), against h5py.

One dataset per file holds ``count`` scalar attributes (numbers, or variable-length strings
with ``--strings``) in dense storage (a fractal heap with indirect blocks below its root past
~10,000). Measured in one run, the tools taking turns:

- refzarr: ``refzarr.scan(path)``; the report says whether refzarr read the attributes itself
  or left an object to h5py (``ObjectHeaders.attributes`` gave None: the fallback);
- h5py: ``dict(f["x"].attrs.items())``, what a user reading the attributes would run.

Medians of ``--repeat`` runs, wall and CPU time. Files are written once into
``benchmarks/.cache/hdf5_attrs/`` (``--cache DIR`` elsewhere; delete to regenerate).

Usage::

    python benchmarks/bench_hdf5_attrs.py                     # 12,000 and 50,000 numbers
    python benchmarks/bench_hdf5_attrs.py --counts 20000 --strings --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np

CACHE = Path(__file__).resolve().parent / ".cache" / "hdf5_attrs"


def write(path: Path, count: int, strings: bool) -> None:
    """A file whose dataset ``x`` has ``count`` attributes."""
    tmp = path.with_suffix(".tmp")
    with h5py.File(tmp, "w", libver="latest") as f:
        attrs = f.create_dataset("x", data=np.arange(4.0)).attrs
        for k in range(count):
            attrs[f"attr{k:06d}"] = f"value {k}" if strings else np.float64(k)
    tmp.rename(path)


def fallbacks() -> list[bool]:
    """Records, for each object whose attributes refzarr looks up, whether it left them to
    h5py (patches `ObjectHeaders.attributes`)."""
    from refzarr.scan.hdf5 import headers

    seen: list[bool] = []
    real = headers.ObjectHeaders.attributes

    def spy(self: Any, oid: Any, address: int | None = None) -> Any:
        found = real(self, oid, address)
        seen.append(found is None)
        return found

    headers.ObjectHeaders.attributes = spy  # type: ignore[method-assign]
    return seen


def timed(run: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``repeat`` calls."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def h5py_attrs(path: Path) -> None:
    with h5py.File(path, "r") as f:
        dict(f["x"].attrs.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[12_000, 50_000])
    parser.add_argument("--strings", action="store_true", help="string attributes")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args(argv)

    import refzarr

    args.cache.mkdir(parents=True, exist_ok=True)
    seen = fallbacks()
    kind = "strings" if args.strings else "numbers"
    print(
        f"{'attributes':>11} {'kind':>8} {'refzarr s':>10} {'cpu':>6} {'h5py s':>8}"
        f" {'cpu':>6} {'ratio':>6}  attributes read by"
    )
    for count in args.counts:
        path = args.cache / f"{kind}_{count}.h5"
        if not path.exists():
            write(path, count, args.strings)
        refzarr.scan(str(path))  # warm: imports, page cache
        seen.clear()
        ours = timed(lambda path=path: refzarr.scan(str(path)), args.repeat)
        left = any(seen)
        theirs = timed(lambda path=path: h5py_attrs(path), args.repeat)
        who = "h5py (fallback)" if left else "refzarr"
        print(
            f"{count:>11,} {kind:>8} {ours[0]:>10.3f} {ours[1]:>6.2f} {theirs[0]:>8.3f}"
            f" {theirs[1]:>6.2f} {theirs[0] / ours[0]:>6.1f}  {who}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
