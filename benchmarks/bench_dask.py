"""A climate scientist's time mean under dask: refzarr against h5netcdf, netCDF4 and kerchunk.

``--files`` (365) daily netCDF4 files, ``air(time=1, lat, lon)`` float32 zlib, one chunk per
file (``--grid``, default 180 x 360), are averaged over time with the same dask scheduler
(``--scheduler``: threads, processes or sync) through:

- ``refzarr``: a Parquet reference set combining them (written before the clock),
  ``xr.open_dataset(refs, engine="refzarr", chunks={})``;
- ``h5netcdf`` / ``netcdf4``: ``xr.open_mfdataset(files, engine=..., combine="by_coords")``
  (``parallel=True`` under the processes scheduler, as users do);
- ``kerchunk``: kerchunk's ``SingleHdf5ToZarr`` + ``MultiZarrToZarr`` JSON (made before the
  clock), ``xr.open_dataset("reference://", engine="zarr", chunks={})`` through fsspec.

Every measurement runs in a fresh Python process (xarray's backends imported before the
clock, each tool's own modules on the clock); "open" is the
time to a lazy dataset, "mean" the compute, "peak" the child's ``ru_maxrss``. Medians of
``--repeat`` runs, tools taking turns; "cpu" is the measuring process's CPU time, all its
threads (steadier than wall clock on a shared machine; worker processes of the processes
scheduler not included). Files live in ``benchmarks/.cache/dask/`` and are reused.

Usage::

    python benchmarks/bench_dask.py                          # 365 files, threads, 3 runs
    python benchmarks/bench_dask.py --scheduler processes --files 100
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "dask"
TOOLS = ("refzarr", "h5netcdf", "netcdf4", "kerchunk")


def _folder(files: int, grid: tuple[int, int]) -> Path:
    return CACHE / f"days{files}-{grid[0]}x{grid[1]}"


def generate(files: int, grid: tuple[int, int]) -> Path:
    """The daily files, their refzarr Parquet set and kerchunk's JSON (made once)."""
    import netCDF4
    import numpy as np

    folder = _folder(files, grid)
    done = folder / "kerchunk.json"
    if done.exists():
        return folder
    (folder / "files").mkdir(parents=True, exist_ok=True)
    paths = []
    for day in range(files):
        path = folder / "files" / f"air_{day:04d}.nc"
        with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
            nc.createDimension("time", None)
            nc.createDimension("lat", grid[0])
            nc.createDimension("lon", grid[1])
            time_ = nc.createVariable("time", "f8", ("time",))
            time_.units = "days since 2020-01-01"
            time_[:] = [day]
            nc.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-89.5, 89.5, grid[0])
            nc.createVariable("lon", "f4", ("lon",))[:] = np.linspace(0, 359, grid[1])
            air = nc.createVariable("air", "f4", ("time", "lat", "lon"), zlib=True)
            rng = np.random.default_rng(day)
            air[0] = np.round(250 + 50 * rng.random(grid, dtype=np.float32), 2)
        paths.append(str(path))
    _refzarr_set(paths, folder)
    _kerchunk_set(paths, done)
    return folder


def _refzarr_set(paths: list[str], folder: Path) -> None:
    import refzarr

    group = refzarr.combine(list(refzarr.scan_many(paths)), concat_dims="time")
    refzarr.write(group, str(folder / "refs.parq"))


def _kerchunk_set(paths: list[str], target: Path) -> None:
    from kerchunk.combine import MultiZarrToZarr
    from kerchunk.hdf import SingleHdf5ToZarr

    singles = []
    for path in paths:
        with open(path, "rb") as f:
            singles.append(SingleHdf5ToZarr(f, path).translate())
    combined = MultiZarrToZarr(singles, concat_dims=["time"], identical_dims=["lat", "lon"])
    target.write_text(json.dumps(combined.translate()))


def _open(tool: str, folder: Path, scheduler: str) -> Any:
    import xarray as xr

    if tool == "refzarr":
        return xr.open_dataset(folder / "refs.parq", engine="refzarr", chunks={})
    if tool == "kerchunk":
        return xr.open_dataset(
            "reference://",
            engine="zarr",
            chunks={},
            backend_kwargs={
                "consolidated": False,
                "zarr_format": 2,
                "storage_options": {"fo": str(folder / "kerchunk.json")},
            },
        )
    files = sorted(str(p) for p in (folder / "files").glob("*.nc"))
    return xr.open_mfdataset(
        files, engine=tool, combine="by_coords", parallel=scheduler == "processes"
    )


def run_worker(tool: str, folder: str, scheduler: str) -> None:
    """One measurement in this (fresh) process; prints a JSON line."""
    import dask
    import numpy as np
    import xarray as xr

    xr.backends.list_engines()  # every backend's import (cfgrib, rioxarray, ...) before the clock
    with dask.config.set(scheduler=scheduler):
        start, cpu = time.perf_counter(), time.process_time()
        ds = _open(tool, Path(folder), scheduler)
        opened = time.perf_counter()
        mean = ds.air.mean("time").values
        done = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(
        json.dumps(
            {
                "open": opened - start,
                "mean": done - opened,
                "cpu": time.process_time() - cpu,
                "peak": max(peak, children),
                "check": float(np.nansum(mean, dtype=np.float64)),
            }
        )
    )


def measure(tool: str, folder: Path, scheduler: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run(
        [sys.executable, __file__, "--worker", tool, str(folder), scheduler],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=365)
    parser.add_argument("--grid", type=int, nargs=2, default=(180, 360))
    parser.add_argument("--scheduler", default="threads", choices=["threads", "processes", "sync"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(*args.worker)
        return 0
    grid = (args.grid[0], args.grid[1])
    folder = generate(args.files, grid)
    tools = args.tools.split(",")
    runs: dict[str, list[dict[str, float]]] = {tool: [] for tool in tools}
    for _ in range(args.repeat):
        for tool in tools:
            runs[tool].append(measure(tool, folder, args.scheduler))
    load = os.getloadavg()[0]
    print(
        f"bench_dask: {args.files} files {grid[0]}x{grid[1]}, scheduler {args.scheduler}, "
        f"{os.cpu_count()} CPUs, load {load:.1f}, medians of {args.repeat}"
    )
    header = ("open s", "mean s", "total s", "cpu s", "peak MB", "x refzarr")
    print(f"{'tool':<10} " + " ".join(f"{h:>8}" for h in header))
    base = statistics.median(r["open"] + r["mean"] for r in runs.get("refzarr", runs[tools[0]]))
    for tool in tools:
        got = runs[tool]
        total = statistics.median(r["open"] + r["mean"] for r in got)
        print(
            f"{tool:<10} {statistics.median(r['open'] for r in got):8.2f} "
            f"{statistics.median(r['mean'] for r in got):8.2f} {total:8.2f} "
            f"{statistics.median(r['cpu'] for r in got):8.2f} "
            f"{statistics.median(r['peak'] for r in got) / 2**20:8.0f} {total / base:9.2f}"
        )
    checks = {tool: runs[tool][0]["check"] for tool in tools}
    if len({round(v, 3) for v in checks.values()}) != 1:
        print(f"results differ: {checks}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
