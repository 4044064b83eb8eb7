"""Scanning HDF5 groups of tens of thousands of links, against h5py.

Each file has one group ``/g`` of ``count`` links, of one kind per file:

- ``hard``: hard links to one dataset (the object is scanned once: the cost is the links);
- ``groups``: empty subgroups;
- ``soft-groups``: soft links to one group of 20 datasets (built once, however many links);
- ``datasets``: as many small contiguous datasets (the common case: each costs far more than
  its link);
- ``nc-variables``: a netCDF4 file (netCDF4-python) whose root group holds ``count`` variables
  over one dimension, each with its ``DIMENSION_LIST`` (netCDF-C always writes new-style
  groups: ``--libver`` does not apply).

``--libver latest`` (default): the links are in dense storage (a fractal heap indexed by v2
B-trees), read by refzarr. ``--libver earliest``: ``/g`` is an old-style group (a symbol
table: a v1 B-tree, a local heap, symbol table nodes), h5py's default, listed through h5py.

Measured in one run, the tools taking turns:

- refzarr: ``refzarr.scan(path)``;
- h5py: every member of ``/g`` opened (``for name in g: g[name]``), what a user walking the
  group would run (it reads neither attributes nor chunk indexes: a floor, not a rival).

Medians of ``--repeat`` runs, wall and CPU time. Files are written once into
``benchmarks/.cache/hdf5_links/`` (``--cache DIR`` elsewhere; delete to regenerate).

Usage::

    python benchmarks/bench_hdf5_links.py                          # 20,000 of each kind
    python benchmarks/bench_hdf5_links.py --kinds hard --counts 5000 20000 --repeat 7
    python benchmarks/bench_hdf5_links.py --libver earliest --kinds hard datasets --counts 5000
"""

from __future__ import annotations

import argparse
from pathlib import Path

import h5py
import numpy as np

from bench_hdf5_attrs import timed  # median wall and CPU seconds of repeated calls

CACHE = Path(__file__).resolve().parent / ".cache" / "hdf5_links"
KINDS = ("hard", "groups", "soft-groups", "datasets", "nc-variables")


def write(path: Path, kind: str, count: int, libver: str = "latest") -> None:
    """A file whose group ``g`` holds ``count`` links of ``kind``."""
    tmp = path.with_suffix(".tmp")
    if kind == "nc-variables":
        write_netcdf(tmp, count)
        tmp.rename(path)
        return
    with h5py.File(tmp, "w", libver=libver) as f:
        x = f.create_dataset("x", data=np.arange(4.0))
        target = f.create_group("target")
        for k in range(20):
            target.create_dataset(f"d{k}", data=np.arange(k + 1))
        g = f.create_group("g")
        for k in range(count):
            name = f"m{k:06d}"
            if kind == "hard":
                g[name] = x
            elif kind == "groups":
                g.create_group(name)
            elif kind == "datasets":
                g.create_dataset(name, data=np.arange(4.0))
            else:
                g[name] = h5py.SoftLink("/target")
    tmp.rename(path)


def write_netcdf(path: Path, count: int) -> None:
    """A netCDF4 file of ``count`` variables over one dimension."""
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 4)
        nc.createVariable("x", "f8", ("x",))[:] = np.arange(4.0)
        for k in range(count):
            nc.createVariable(f"v{k:06d}", "f4", ("x",))[:] = np.arange(4.0)


def h5py_walk(path: Path) -> None:
    with h5py.File(path, "r") as f:
        g = f.get("g", f)
        for name in g:
            g[name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--counts", type=int, nargs="+", default=[20_000])
    parser.add_argument("--libver", choices=("latest", "earliest"), default="latest")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args(argv)

    import refzarr

    args.cache.mkdir(parents=True, exist_ok=True)
    print(f"libver={args.libver}")
    print(f"{'links':>8} {'kind':>12} {'refzarr s':>10} {'cpu':>6} {'h5py s':>8} {'cpu':>6}")
    for kind in args.kinds:
        for count in args.counts:
            old = "" if args.libver == "latest" else "_earliest"
            path = args.cache / f"{kind}_{count}{old}.h5"
            if not path.exists():
                write(path, kind, count, args.libver)
            refzarr.scan(str(path))  # warm: imports, page cache
            ours = timed(lambda path=path: refzarr.scan(str(path)), args.repeat)
            theirs = timed(lambda path=path: h5py_walk(path), args.repeat)
            print(
                f"{count:>8,} {kind:>12} {ours[0]:>10.3f} {ours[1]:>6.2f} {theirs[0]:>8.3f}"
                f" {theirs[1]:>6.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
