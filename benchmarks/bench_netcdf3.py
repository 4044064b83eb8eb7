"""Scanning netCDF3 files: refzarr against kerchunk's NetCDF3ToZarr and netCDF4-python.

Two workloads, measured in one run:

- one CDF-2 (64-bit offset) file of 200 record variables (float32 ``(time, 16)``) and 5,000
  records, plus its ``time`` coordinate: 1,000,000 record chunks;
- 1,000 small classic (CDF-1) files, one day each: ``air`` float32 ``(1, 32, 64)``, ``time``,
  ``lat``, ``lon``, CF attributes: milliseconds per file, every file scanned in turn.

The tools, each called as its documentation shows:

- refzarr: ``refzarr.scan(path)`` (its defaults: dimension coordinates loaded; the format is
  detected from the file's first bytes on every call), and ``NetCDF3Scanner()``, the
  configured scanner called per file as the docs show for many files (no detection);
- kerchunk: ``NetCDF3ToZarr(path).translate()`` (its defaults; needs scipy);
- netCDF4-python (small files only): ``netCDF4.Dataset(path).close()``, the time the C library
  takes to read a header: the floor for anything that reads one.

Each tool is imported and run once on a small file before the clock starts. The files are read
once before measuring, so every tool reads them from the page cache. Medians of ``--repeat``
runs are reported, with CPU time (steadier than wall time on a busy machine); the tools take
turns within each run, so ratios compare times taken under the same load. Files are written
once into ``benchmarks/.cache/netcdf3/`` (``--cache DIR`` elsewhere; delete to regenerate).

Usage::

    python benchmarks/bench_netcdf3.py                       # the issue's full run
    python benchmarks/bench_netcdf3.py --small 100 --repeat 1 --records 500   # a quick run
    python benchmarks/bench_netcdf3.py --records 0 --tools refzarr NetCDF3Scanner netCDF4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

CACHE = Path(__file__).resolve().parent / ".cache" / "netcdf3"
Scan = Callable[[Path], object]


# -- files ------------------------------------------------------------------------------------


def write_big(path: Path, variables: int, records: int) -> None:
    """A CDF-2 file of ``variables`` record variables and ``records`` records."""
    import netCDF4

    tmp = path.with_suffix(".tmp")
    with netCDF4.Dataset(tmp, "w", format="NETCDF3_64BIT_OFFSET") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 16)
        time_var = ds.createVariable("time", "f8", ("time",))
        time_var.units = "hours since 2000-01-01"
        values = np.arange(records * 16, dtype="f4").reshape(records, 16)
        for k in range(variables):
            var = ds.createVariable(f"v{k:03d}", "f4", ("time", "x"))
            var.units = "1"
            var[:] = values
        time_var[:] = np.arange(records, dtype="f8")
    tmp.rename(path)


def write_small(folder: Path, count: int) -> list[Path]:
    """``count`` small classic files, one day each."""
    import netCDF4

    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"day_{k:05d}.nc" for k in range(count)]
    rng = np.random.default_rng(0)
    for k, path in enumerate(paths):
        if path.exists():
            continue
        with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
            ds.title = "one day"
            ds.Conventions = "CF-1.8"
            ds.createDimension("time", None)
            ds.createDimension("lat", 32)
            ds.createDimension("lon", 64)
            t = ds.createVariable("time", "f8", ("time",))
            t.units = "days since 2000-01-01"
            t.calendar = "standard"
            lat = ds.createVariable("lat", "f4", ("lat",))
            lat.units = "degrees_north"
            lon = ds.createVariable("lon", "f4", ("lon",))
            lon.units = "degrees_east"
            air = ds.createVariable("air", "f4", ("time", "lat", "lon"), fill_value=-9999.0)
            air.units = "K"
            air.long_name = "air temperature"
            air.scale_factor = np.float32(1.0)
            lat[:] = np.linspace(-90, 90, 32)
            lon[:] = np.linspace(0, 360, 64, endpoint=False)
            air[0] = rng.random((32, 64), dtype="f4")
            t[0] = k
    return paths


# -- tools ------------------------------------------------------------------------------------


def tool_refzarr() -> Scan:
    import refzarr

    return lambda path: refzarr.scan(str(path))


def tool_scanner() -> Scan:
    from refzarr.scan.netcdf3 import NetCDF3Scanner

    scanner = NetCDF3Scanner()
    return lambda path: scanner(str(path))


def tool_kerchunk() -> Scan:
    from kerchunk.netCDF3 import NetCDF3ToZarr

    return lambda path: NetCDF3ToZarr(str(path)).translate()


def tool_netcdf4() -> Scan:
    import netCDF4

    def header(path: Path) -> None:
        netCDF4.Dataset(path).close()

    return header


TOOLS: dict[str, Callable[[], Scan]] = {
    "refzarr": tool_refzarr,
    "NetCDF3Scanner": tool_scanner,
    "kerchunk": tool_kerchunk,
    "netCDF4": tool_netcdf4,
}


# -- measuring --------------------------------------------------------------------------------


def timed(tools: dict[str, Scan], paths: list[Path], repeat: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds of scanning every one of ``paths``, over ``repeat`` runs
    per tool; the tools take turns within each run, so that a machine whose load changes
    slows them alike (same-run ratios)."""
    walls: dict[str, list[float]] = {name: [] for name in tools}
    cpus: dict[str, list[float]] = {name: [] for name in tools}
    for _ in range(repeat):
        for name, scan in tools.items():
            wall, cpu = time.perf_counter(), time.process_time()
            for path in paths:
                scan(path)
            walls[name].append(time.perf_counter() - wall)
            cpus[name].append(time.process_time() - cpu)
    return {name: (statistics.median(walls[name]), statistics.median(cpus[name])) for name in tools}


def load_tools(names: list[str], warmup: Path) -> dict[str, Scan]:
    found = {}
    for name in names:
        try:
            scan = TOOLS[name]()
            scan(warmup)
        except ImportError as exc:
            print(f"# {name}: not available ({exc}); skipped", flush=True)
            continue
        found[name] = scan
    return found


def warm_page_cache(paths: list[Path]) -> None:
    for path in paths:
        path.read_bytes()


def report(title: str, rows: dict[str, tuple[float, float]], per: int, unit: str) -> None:
    print(f"\n## {title}\n")
    print(f"| tool | wall {unit} | cpu {unit} | refzarr faster (cpu) |")
    print("|---|---:|---:|---:|")
    scale = 1000 / per
    base = rows.get("refzarr")
    for name, (wall, cpu) in rows.items():
        ratio = f"{cpu / base[1]:.1f}x" if base and name != "refzarr" else ""
        print(f"| {name} | {wall * scale:.2f} | {cpu * scale:.2f} | {ratio} |")


def print_scan_many(paths: list[Path], repeat: int, netcdf4: tuple[float, float] | None) -> None:
    """``refzarr.scan_many(paths)`` with its default executor (a process pool of one worker
    per CPU): wall milliseconds per file (the workers' CPU time is not this process's)."""
    import os

    import refzarr

    walls = []
    for _ in range(repeat):
        wall = time.perf_counter()
        refzarr.scan_many([str(p) for p in paths], progress=False)
        walls.append(time.perf_counter() - wall)
    per_file = statistics.median(walls) * 1000 / len(paths)
    ratio = f", {per_file / (netcdf4[0] * 1000 / len(paths)):.2f}x" if netcdf4 else ""
    print(
        f"\nscan_many ({len(os.sched_getaffinity(0))} workers): {per_file:.2f} ms/file wall"
        f"{ratio} netCDF4's serial header read (wall)"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variables", type=int, default=200)
    parser.add_argument("--records", type=int, default=5000, help="(0: no big file)")
    parser.add_argument("--small", type=int, default=1000, help="small files (0: none)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument(
        "--scan-many", action="store_true", help="also time refzarr.scan_many on the small files"
    )
    parser.add_argument(
        "--tools", nargs="+", default=list(TOOLS), choices=list(TOOLS), help="tools to run"
    )

    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    big = args.cache / f"big_{args.variables}x{args.records}.nc"
    if args.records and not big.exists():
        write_big(big, args.variables, args.records)
    small = write_small(args.cache / "small", args.small) if args.small else []
    warmup = write_small(args.cache / "warmup", 1)[0]
    warm_page_cache([big, *small] if args.records else small)
    import platform

    print(f"# netCDF3 scan benchmark, python {platform.python_version()}, {sys.platform}")
    tools = load_tools(args.tools, warmup)
    if args.records:
        big_tools = {name: scan for name, scan in tools.items() if name != "netCDF4"}
        big_rows = timed(big_tools, [big], args.repeat)
        chunks = args.variables * args.records
        report(
            f"one CDF-2 file: {args.variables} variables x {args.records} records "
            f"({chunks:,} chunks, {big.stat().st_size / 2**20:.0f} MiB)",
            big_rows,
            1000,
            "s",
        )
    if small:
        rows = timed(tools, small, args.repeat)
        report(f"{len(small)} small classic files (per file)", rows, len(small), "ms")
        if args.scan_many:
            print_scan_many(small, args.repeat, rows.get("netCDF4"))
        for name in ("refzarr", "NetCDF3Scanner"):
            if "netCDF4" in rows and name in rows:
                cpu = rows[name][1] / rows["netCDF4"][1]
                wall = rows[name][0] / rows["netCDF4"][0]
                print(
                    f"\n{name} per small file / netCDF4 header read: {cpu:.2f} (cpu), "
                    f"{wall:.2f} (wall)"
                )


if __name__ == "__main__":
    main()
