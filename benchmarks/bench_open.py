"""Opening a big combined reference set: what ``info``, an open and a first small read cost.

For each set (kerchunk JSON or Parquet) and each reader, in a fresh Python process:

- ``refzarr``: ``refzarr.open_dataset(SET)``, then one chunk (``VAR`` at the first index
  of its first dimension: one source file);
- ``xarray engine``: ``xr.open_dataset(SET, engine="refzarr")``, then the same chunk;
- ``read``: ``refzarr.read(SET)`` (the group alone: what every command starts with);
- ``info``: ``refzarr info SET`` run in the process (its output discarded);
- ``fsspec+zarr``: ``xr.open_dataset("reference://", engine="zarr")`` over fsspec's
  ``ReferenceFileSystem`` (``LazyReferenceMapper`` for Parquet), then the same chunk;
- ``virtualizarr``: VirtualiZarr's kerchunk parsers building the virtual dataset (open
  only: it reads no data), where it is installed and opens the set.

Columns: ``import`` (the reader's modules; xarray, zarr, fsspec and dask.array, which
xarray imports at its first variable whatever the backend, are imported first), ``open``
and ``first`` (wall and CPU time of the process, all threads: steadier on a shared
machine), ``peak MB`` (the process's ``ru_maxrss``); medians of ``--repeat``
runs, taking turns. ``x fsspec``: the reader's open + first wall time over fsspec + zarr's.
The load average is printed: the machine may be shared.

``--src LABEL=DIR`` (repeatable) runs the refzarr readers with another source tree on
``PYTHONPATH`` (before/after a change; default: this repository's ``src``). ``--files N``
builds, into ``--cache``, a set of N daily files in seconds: N hard links to one netCDF4
file of ``bench_scale.py``, each referenced as its own day, combined and written as JSON and
Parquet (its record of sources names the N links, as a scan of N files would); real scans of
N files are ``bench_scale.py``'s.

Usage::

    python benchmarks/bench_open.py --files 20000 --repeat 5
    python benchmarks/bench_open.py --sets a.parq,a.json --readers refzarr,info,fsspec+zarr
    python benchmarks/bench_open.py --sets old.parq --src before=/old/src --src after=src
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "open"
READERS = ("refzarr", "xarray engine", "read", "info", "fsspec+zarr", "virtualizarr")
OURS = frozenset({"refzarr", "xarray engine", "read", "info"})

# -- the child: one measurement ----------------------------------------------------------------

CHILD = r"""
import json, os, resource, sys, time
reader, path, var, out = sys.argv[1:5]
clock, cpu = time.perf_counter, time.process_time
import xarray as xr, zarr, fsspec  # every reader's, before the clock
try:
    import dask.array  # xarray imports it at its first Variable, whichever the backend
except ImportError:
    pass
marks = [(clock(), cpu())]

def mark():
    marks.append((clock(), cpu()))

def first(ds):
    dim = ds[var].dims[0]
    return ds[var].isel({dim: 0}).values

if reader in ("refzarr", "xarray engine", "read"):
    import refzarr
    import refzarr.reader.xarray_backend
    mark()
    if reader == "refzarr":
        ds = refzarr.open_dataset(path)
    elif reader == "xarray engine":
        ds = xr.open_dataset(path, engine="refzarr")
    else:
        ds = refzarr.read(path)
    mark()
    if reader != "read":
        first(ds)
        mark()
elif reader == "info":
    import contextlib, io
    from refzarr.cli import main
    mark()
    with contextlib.redirect_stdout(io.StringIO()):
        main(["info", path])
    mark()
elif reader == "fsspec+zarr":
    mark()
    ds = xr.open_dataset(
        "reference://",
        engine="zarr",
        backend_kwargs={
            "consolidated": False,
            "storage_options": {"fo": path, "remote_protocol": "file", "skip_instance_cache": True},
        },
    )
    mark()
    first(ds)
    mark()
elif reader == "virtualizarr":
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import KerchunkJSONParser, KerchunkParquetParser
    from obstore.store import LocalStore
    try:
        from obspec_utils.registry import ObjectStoreRegistry
    except ImportError:
        from virtualizarr.registry import ObjectStoreRegistry
    mark()
    parser = KerchunkParquetParser() if os.path.isdir(path) else KerchunkJSONParser()
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    ds = open_virtual_dataset(f"file://{os.path.abspath(path)}", parser=parser, registry=registry)
    mark()
else:
    raise SystemExit(f"unknown reader {reader}")
phases = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(marks, marks[1:])]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
with open(out, "w") as f:
    json.dump({"phases": phases, "peak": peak}, f)
"""


def measure(reader: str, path: Path, var: str, src: Path | None) -> dict[str, Any]:
    """One run of ``reader`` on ``path`` in a fresh process: its phases and peak memory."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    with tempfile.NamedTemporaryFile(suffix=".json", prefix="bench-open-") as out:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, reader, str(path), var, out.name],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
        found: dict[str, Any] = json.loads(Path(out.name).read_text())
    return found


# -- a big set in seconds -------------------------------------------------------------------


def synthetic_set(count: int, cache: Path) -> list[Path]:
    """A JSON and a Parquet set of ``count`` daily files (hard links to one file)."""
    sys.path.insert(0, str(HERE))
    import numpy as np

    import refzarr
    from bench_scale import write_day
    from refzarr.model import ChunkManifest, RefArray, RefGroup

    out = [cache / f"days{count}.json", cache / f"days{count}.parq"]
    if all(p.exists() for p in out):
        return out
    links = cache / "links"
    links.mkdir(parents=True, exist_ok=True)
    day = cache / "day.nc"
    if not day.exists():
        write_day(day, 0)
    template = refzarr.scan(str(day))
    state = dict(template.sources["scans"][0]["files"][str(day)])  # type: ignore[index]
    groups = []
    for k in range(count):
        link = links / f"day_{k:05d}.nc"
        if not link.exists():
            os.link(day, link)
        members = {}
        for name, array in template.members.items():
            assert isinstance(array, RefArray)
            manifest = array.manifest
            if name == "time":
                manifest = ChunkManifest.one_inlined(np.array([float(k)], "<f8").tobytes())
            elif manifest.paths:
                manifest = ChunkManifest.from_arrays(
                    [str(link)], manifest.path_id, manifest.offset, manifest.length
                )
            members[name] = RefArray(array.meta, manifest)
        scan = {"url": str(link), "format": "hdf5", "options": {}, "files": {str(link): state}}
        sources = {"version": 1, "scans": [scan]}
        groups.append(RefGroup(template.attributes, members, sources=sources))
    combined = refzarr.combine(groups, concat_dims="time")
    for path in out:
        refzarr.write(combined, path)
    return out


# -- the run --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sets = list(args.sets)
    if args.files:
        progress(f"building a set of {args.files:,} files in {args.cache}")
        sets += synthetic_set(args.files, args.cache)
    rows = [["set", "reader", "import s", "open s", "open cpu", "first s", "first cpu", "peak MB"]]
    rows[0].append("x fsspec")
    for path in sets:
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        plan = [(r, label, src) for r in args.readers for label, src in _sources(r, args.src)]
        for _ in range(args.repeat):
            for reader, label, src in plan:  # taking turns: load changes alike for all
                runs.setdefault((reader, label), []).append(measure(reader, path, args.var, src))
        base = _total(runs.get(("fsspec+zarr", ""), []))
        for (reader, label), found in runs.items():
            name = f"{reader} ({label})" if label else reader
            rows.append([path.name, name, *_cells(found, base)])
            progress(f"{path.name}, {name}: {' '.join(rows[-1][2:])}")
    print(table(rows))
    print(f"load average {os.getloadavg()[0]:.1f}; medians of {args.repeat} runs")
    return 0


def _sources(reader: str, sources: list[tuple[str, Path]]) -> list[tuple[str, Path | None]]:
    if reader not in OURS or not sources:
        return [("", HERE.parent / "src" if reader in OURS else None)]
    return list(sources)


def _median(found: list[dict[str, Any]], phase: int, index: int) -> float | None:
    values = [r["phases"][phase][index] for r in found if len(r.get("phases", ())) > phase]
    return statistics.median(values) if values else None


def _total(found: list[dict[str, Any]]) -> float | None:
    ok = [r for r in found if "phases" in r]
    if not ok:
        return None
    return statistics.median(sum(p[0] for p in r["phases"][1:]) for r in ok)


def _cells(found: list[dict[str, Any]], base: float | None) -> list[str]:
    errors = [r["error"] for r in found if "error" in r]
    if errors and len(errors) == len(found):
        return ["failed: " + errors[0][:60], "", "", "", "", "", ""]

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    peak = statistics.median(r["peak"] for r in found if "peak" in r)
    total = _total(found)
    ratio = "-" if base is None or total is None or not base else f"{total / base:.2f}"
    return [
        cell(_median(found, 0, 0)),
        cell(_median(found, 1, 0)),
        cell(_median(found, 1, 1)),
        cell(_median(found, 2, 0)),
        cell(_median(found, 2, 1)),
        f"{peak:.0f}",
        ratio,
    ]


def table(rows: list[list[str]]) -> str:
    """Rows as aligned columns (`bench_scale.table`)."""
    sys.path.insert(0, str(HERE))
    from bench_scale import table as aligned

    return aligned(rows)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="", help="comma-separated JSON / Parquet sets")
    parser.add_argument("--files", type=int, default=0, help="build a set of N files")
    parser.add_argument("--readers", default=",".join(READERS), help=f"from {','.join(READERS)}")
    parser.add_argument("--var", default="tas", help="the variable read (default tas)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per reader (median)")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where --files sets are kept")
    parser.add_argument(
        "--src", action="append", default=[], help="LABEL=DIR: refzarr's source tree to run"
    )
    args = parser.parse_args(argv)
    args.sets = [Path(p) for p in args.sets.split(",") if p.strip()]
    args.readers = [r.strip() for r in args.readers.split(",") if r.strip()]
    unknown = sorted(set(args.readers) - set(READERS))
    if unknown:
        parser.error(f"unknown readers {unknown}; choose from {','.join(READERS)}")
    if not args.sets and not args.files:
        parser.error("give --sets or --files")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    sources = []
    for spec in args.src:
        label, _, folder = spec.partition("=")
        if not folder:
            parser.error(f"--src: expected LABEL=DIR, got {spec!r}")
        sources.append((label, Path(folder).resolve()))
    args.src = sources
    args.cache = args.cache.resolve()
    return args


if __name__ == "__main__":
    start = time.perf_counter()
    code = main()
    progress(f"{time.perf_counter() - start:.0f} s in all")
    sys.exit(code)
