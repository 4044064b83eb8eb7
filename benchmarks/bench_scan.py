"""Scanning HDF5 / netCDF4 files: refzarr against kerchunk, VirtualiZarr and a bare h5py loop.

Two workloads, measured in one run:

- one HDF5 file per size, a float32 ``(T, 256, 256)`` array in ``(1, 16, 16)`` zlib chunks
  (T = 40, 391, 3907 gives 10k, 100k, 1M chunks): time and peak memory of scanning it;
- many small netCDF4 files written by netCDF4-python (one day of a climate variable each:
  ``air`` float32 ``(1, 128, 128)`` in ``(1, 64, 64)`` zlib + shuffle chunks, ``time``, ``lat``,
  ``lon`` coordinates, CF attributes): milliseconds per file, every file scanned in turn in one
  process.

The tools, each called as its documentation shows:

- refzarr: ``refzarr.scan(path)``;
- kerchunk: ``SingleHdf5ToZarr(path).translate()``, its defaults (arrays under 500 bytes are
  read and inlined: here the one-element ``time`` of each small file);
- VirtualiZarr: ``HDFParser()(url, registry)``, a ``ManifestStore``, with an obstore
  ``LocalStore`` in an ``ObjectStoreRegistry``;
- h5py: a bare loop, ``DatasetID.chunk_iter`` over every chunked dataset, appending each
  chunk's offset and size to two lists: the floor for anything built on h5py.

Every measurement runs in a fresh Python process. Before the clock starts, the process imports
the tool and scans a tiny netCDF4 file once (lazy imports, first-call caches). ``peak MB`` is
the process's peak resident memory (``ru_maxrss``) after the timed scans, with the results
still held; ``+MB`` is that minus the peak before the clock started (interpreter, imports,
warm-up): what the scans themselves needed. ``cpu`` is the process's CPU time, steadier than
wall time on a busy machine. The files are read once before measuring, so every tool reads
them from the page cache. Test files are generated once and kept in ``benchmarks/.cache/scan/``
(``--cache DIR`` to put them elsewhere; delete them to regenerate).

The other input formats have their own workloads and rivals, one script each
(``bench_<format>.py``: netcdf3, tiff, grib, fits, hdf4, dmrpp); ``--format NAME`` runs one of
them in a fresh process with the options that follow, ``--format all`` runs this HDF5 run and
every format's with their defaults, one after the other.

Usage::

    python benchmarks/bench_scan.py                               # the issue's full run
    python benchmarks/bench_scan.py --format grib                 # GRIB: ERA5, GEFS + .idx
    python benchmarks/bench_scan.py --format fits --repeat 5      # options go to bench_fits.py
    python benchmarks/bench_scan.py --format all                  # every format in turn
    python benchmarks/bench_scan.py --sizes 10k --small 50 --repeat 1     # a quick run
    python benchmarks/bench_scan.py --tools refzarr,h5py --sizes 100k
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

CACHE = Path(__file__).resolve().parent / ".cache" / "scan"
SUFFIXES = {"k": 1_000, "M": 1_000_000}
FRAME = (256, 256)  # one time step of the big array
CHUNK = (1, 16, 16)  # 256 chunks per time step, 1 KiB raw each
PER_STEP = (FRAME[0] // CHUNK[1]) * (FRAME[1] // CHUNK[2])
SMALL_GRID = (128, 128)
SMALL_CHUNK = (1, 64, 64)
TOOLS = ("refzarr", "kerchunk", "virtualizarr", "h5py")
TOOL_NAMES = {
    "refzarr": "refzarr.scan",
    "kerchunk": "kerchunk SingleHdf5ToZarr",
    "virtualizarr": "VirtualiZarr HDFParser",
    "h5py": "h5py chunk_iter loop",
}


# -- sizes ------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """``"10k"`` -> 10,000, ``"1M"`` -> 1,000,000 (a number of chunks, at least one step)."""
    text = text.strip()
    scale = SUFFIXES.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in SUFFIXES else text
    try:
        n = int(float(number) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 10k, 1M)") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"size {text!r} must be positive")
    return n


def size_label(n: int) -> str:
    """The short form of a size: 10000 -> ``"10k"``."""
    for suffix, scale in sorted(SUFFIXES.items(), key=lambda item: -item[1]):
        if n % scale == 0:
            return f"{n // scale}{suffix}"
    return str(n)


def steps(n: int) -> int:
    """Time steps giving at least ``n`` chunks: 10k -> 40, 100k -> 391, 1M -> 3907."""
    return math.ceil(n / PER_STEP)


# -- test files (generated once, in a worker process) -----------------------------------------


def big_file(cache: Path, n: int) -> Path:
    """The HDF5 file of ``n`` (rounded up to whole time steps) chunks."""
    return cache / f"chunks_{size_label(n)}.h5"


def small_folder(cache: Path, count: int) -> Path:
    """A folder of at least ``count`` small netCDF4 files: the smallest one generated, or (if
    none is large enough) the one to generate."""
    sizes = [int(p.name[6:]) for p in cache.glob("small_*") if p.name[6:].isdigit()]
    enough = [n for n in sizes if n >= count]
    return cache / f"small_{min(enough) if enough else count}"


def warmup_file(cache: Path) -> Path:
    """A tiny netCDF4 file every worker scans once before the clock starts."""
    return cache / "warmup.nc"


def small_files(cache: Path, count: int) -> list[Path]:
    """The paths of the small netCDF4 files, in order."""
    return [small_folder(cache, count) / f"air_{i:05d}.nc" for i in range(count)]


def write_big(path: Path, n: int) -> None:
    """Write the big HDF5 file: whole blocks of time steps per write, one pattern per block."""
    import h5py
    import numpy as np

    total = steps(n)
    block = 64
    rng = np.random.default_rng(0)
    y, x = np.meshgrid(np.linspace(0, 6, FRAME[0]), np.linspace(0, 6, FRAME[1]), indexing="ij")
    base = (280 + 10 * np.sin(y) * np.cos(x)).astype(np.float32)
    noise = rng.normal(0, 0.5, (block, *FRAME)).astype(np.float32)
    partial = path.with_suffix(".partial")
    with h5py.File(partial, "w") as f:
        ds = f.create_dataset(
            "data", (total, *FRAME), dtype="<f4", chunks=CHUNK, compression="gzip"
        )
        ds.attrs["units"] = "K"
        for start in range(0, total, block):
            stop = min(start + block, total)
            values = base + noise[: stop - start] + np.float32(0.01 * start)
            ds[start:stop] = np.round(values, 2)
    partial.rename(path)


def write_small(folder: Path, count: int) -> None:
    """Write ``count`` one-day netCDF4 files (netCDF4-python, as a model's output would be)."""
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for day in range(count):
        write_one_day(partial / f"air_{day:05d}.nc", day)
    partial.rename(folder)


def write_one_day(path: Path, day: int) -> None:
    """One daily file: ``air(time, lat, lon)`` with CF coordinates and attributes."""
    import netCDF4
    import numpy as np

    ny, nx = SMALL_GRID
    rng = np.random.default_rng(day)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.setncatts(
            {
                "Conventions": "CF-1.8",
                "title": "daily mean air temperature (synthetic)",
                "institution": "refzarr benchmarks",
                "history": "written by benchmarks/bench_scan.py",
            }
        )
        nc.createDimension("time", None)
        nc.createDimension("lat", ny)
        nc.createDimension("lon", nx)
        t = nc.createVariable("time", "f8", ("time",))
        t.setncatts({"units": "days since 2000-01-01", "calendar": "standard", "axis": "T"})
        t.standard_name = "time"
        t[:] = [day]
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat.setncatts({"units": "degrees_north", "standard_name": "latitude", "axis": "Y"})
        lat[:] = np.linspace(-89.5, 89.5, ny)
        lon = nc.createVariable("lon", "f4", ("lon",))
        lon.setncatts({"units": "degrees_east", "standard_name": "longitude", "axis": "X"})
        lon[:] = np.linspace(0, 357.5, nx)
        air = nc.createVariable(
            "air", "f4", ("time", "lat", "lon"), zlib=True, chunksizes=SMALL_CHUNK, fill_value=-9e33
        )
        air.setncatts(
            {
                "units": "K",
                "long_name": "mean daily air temperature at 2 m",
                "standard_name": "air_temperature",
                "cell_methods": "time: mean",
            }
        )
        air[0] = np.round(280 + 20 * rng.random(SMALL_GRID, dtype=np.float32), 2)


def ensure_files(cache: Path, sizes: list[int], small: int) -> None:
    """Generate what the cache lacks (each kind in a worker: netCDF4 and h5py bundle their own
    HDF5 libraries, so they never share a process here)."""
    cache.mkdir(parents=True, exist_ok=True)
    if not warmup_file(cache).exists():
        _generate("warmup", cache, 0)
    if small and not small_folder(cache, small).exists():
        progress(f"writing {small:,} small netCDF4 files (once)")
        _generate("small", cache, small)
    for n in sizes:
        if not big_file(cache, n).exists():
            progress(f"writing {big_file(cache, n).name}: {steps(n) * PER_STEP:,} chunks (once)")
            _generate("big", cache, n)


def _generate(kind: str, cache: Path, n: int) -> None:
    command = [sys.executable, __file__, "--generate", kind, "--cache", str(cache), "--n", str(n)]
    subprocess.run(command, check=True)


def run_generate(kind: str, cache: Path, n: int) -> None:
    """Worker side of `ensure_files`."""
    if kind == "big":
        write_big(big_file(cache, n), n)
    elif kind == "small":
        write_small(small_folder(cache, n), n)
    else:
        write_one_day(warmup_file(cache), 0)


def warm_page_cache(paths: list[Path]) -> None:
    """Read files once, so that no tool pays for the disk."""
    for path in paths:
        with open(path, "rb") as f:
            while f.read(16 * 2**20):
                pass


# -- worker side: the tools -------------------------------------------------------------------
#
# A tool's factory imports what it needs and returns a function scanning one local path.

Scan = Callable[[Path], object]


def tool_refzarr() -> Scan:
    """refzarr.scan of a local path."""
    import refzarr

    return lambda path: refzarr.scan(str(path))


def tool_kerchunk() -> Scan:
    """kerchunk's SingleHdf5ToZarr(path).translate(), defaults."""
    from kerchunk.hdf import SingleHdf5ToZarr  # type: ignore[import-untyped]

    return lambda path: SingleHdf5ToZarr(str(path)).translate()


def tool_virtualizarr() -> Scan:
    """VirtualiZarr's HDFParser: a ManifestStore, through an obstore registry of local files."""
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr.parsers import HDFParser

    registry = ObjectStoreRegistry({"file://": LocalStore()})
    parser = HDFParser()
    return lambda path: parser(Path(path).resolve().as_uri(), registry)


def tool_h5py() -> Scan:
    """The bare loop: chunk_iter over every chunked dataset, (offset, size) into two lists."""
    import h5py

    def scan(path: Path) -> object:
        offsets: list[int] = []
        sizes: list[int] = []

        def add(info: Any) -> None:
            offsets.append(info.byte_offset)
            sizes.append(info.size)

        def visit(_name: str, obj: Any) -> None:
            if isinstance(obj, h5py.Dataset) and obj.chunks is not None:
                obj.id.chunk_iter(add)

        with h5py.File(path, "r") as f:
            f.visititems(visit)
        return offsets, sizes

    return scan


FACTORIES: dict[str, Callable[[], Scan]] = {
    "refzarr": tool_refzarr,
    "kerchunk": tool_kerchunk,
    "virtualizarr": tool_virtualizarr,
    "h5py": tool_h5py,
}


def run_worker(tool: str, paths: list[Path], warmup: Path) -> None:
    """Scan every path once, timed; print one JSON line: seconds, peak and base memory."""
    try:
        scan = FACTORIES[tool]()
        scan(warmup)
        base_mb = _peak_mb()
        start, cpu = time.perf_counter(), time.process_time()
        results = [scan(path) for path in paths]
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        report: dict[str, Any] = {
            "seconds": seconds,
            "cpu": cpu,
            "peak_mb": _peak_mb(),
            "base_mb": base_mb,
        }
        del results
    except Exception as exc:  # report it in the table, go on with the others
        report = {"error": _describe(exc)}
    print(json.dumps(report))


def _describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:80] if text else type(exc).__name__


def _peak_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


# -- parent side: run workers, collect, report ------------------------------------------------


@dataclass
class Result:
    """Medians over the runs of one tool on one workload (per file for the small files).

    ``seconds`` is wall-clock time, ``cpu`` the process's CPU time (user + system, all threads).
    """

    seconds: float | None = None
    cpu: float | None = None
    peak_mb: float | None = None
    base_mb: float | None = None
    error: str | None = None

    @property
    def extra_mb(self) -> float | None:
        """What the scan added to the peak."""
        if self.peak_mb is None or self.base_mb is None:
            return None
        return self.peak_mb - self.base_mb


Results = dict[tuple[str, str], Result]  # (workload, tool) -> result


def spawn(tool: str, listing: Path, warmup: Path) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter and return its parsed report."""
    command = [sys.executable, __file__, "--worker", tool, "--paths", str(listing)]
    command += ["--warmup", str(warmup)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return {"error": lines[-1][:80]}
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def measure(
    workload: str, paths: list[Path], tools: list[str], repeat: int, cache: Path, out: Results
) -> None:
    """Each run a fresh process per tool, tools interleaved; medians of time and memory."""
    warm_page_cache(paths)
    listing = cache / f"paths_{workload.replace(',', '')}.txt"
    listing.write_text("\n".join(str(p) for p in paths))
    reports: dict[str, list[dict[str, Any]]] = {tool: [] for tool in tools}
    for run in range(repeat):
        for tool in tools:  # interleaved, so that drift in the machine hits every tool alike
            progress(f"{workload}: {tool} ({run + 1}/{repeat})")
            reports[tool].append(spawn(tool, listing, warmup_file(cache)))
    for tool, runs in reports.items():
        out[(workload, tool)] = _merge(runs, len(paths))


def _merge(runs: list[dict[str, Any]], count: int) -> Result:
    errors = [run["error"] for run in runs if "error" in run]
    if errors:
        return Result(error=errors[0])
    return Result(
        statistics.median(run["seconds"] for run in runs) / count,
        statistics.median(run["cpu"] for run in runs) / count,
        statistics.median(run["peak_mb"] for run in runs),
        statistics.median(run["base_mb"] for run in runs),
    )


def progress(text: str) -> None:
    """A progress line on stderr (the tables go to stdout)."""
    print(f"  ... {text}", file=sys.stderr, flush=True)


# -- the report -------------------------------------------------------------------------------

BIG_COLUMNS = ("chunks", "tool", "time s", "cpu s", "peak MB", "+MB", "time x", "peak x", "+MB x")
MB_FLOOR = 5.0  # +MB below this on both sides is noise: no ratio shown
SMALL_COLUMNS = (
    "files",
    "tool",
    "ms/file",
    "cpu ms",
    "peak MB",
    "+MB",
    "time x",
    "peak x",
    "+MB x",
)


def table(workloads: list[str], tools: list[str], results: Results, small: bool) -> str:
    """One row per workload and tool; the ``x`` columns are tool / refzarr."""
    rows = []
    for workload in workloads:
        base = results.get((workload, "refzarr"))
        for i, tool in enumerate(tools):
            found = results.get((workload, tool))
            if found is not None:
                label = workload if i == 0 else ""
                rows.append([label, TOOL_NAMES[tool], *_cells(found, base, small)])
    return _align([list(SMALL_COLUMNS if small else BIG_COLUMNS), *rows])


def _cells(found: Result, base: Result | None, small: bool) -> list[str]:
    if found.error is not None or found.seconds is None:
        return [f"n/a: {found.error}", "", "", "", "", "", ""]
    ratios = base is not None and base is not found and base.seconds is not None
    return [
        _seconds(found.seconds, small),
        _seconds(found.cpu, small),
        _mb(found.peak_mb),
        _mb(found.extra_mb),
        _ratio(found.seconds, base.seconds) if ratios and base else "",
        _ratio(found.peak_mb, base.peak_mb) if ratios and base else "",
        _ratio(found.extra_mb, base.extra_mb, floor=MB_FLOOR) if ratios and base else "",
    ]


def _seconds(value: float | None, small: bool) -> str:
    if value is None:
        return ""
    return f"{value * 1e3:.2f}" if small else f"{value:.3f}"


def _mb(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def _ratio(value: float | None, reference: float | None, floor: float = 0) -> str:
    if value is None or reference is None or max(value, reference) < floor or reference <= 0:
        return ""
    return f"{value / reference:.2f}x"


def _align(rows: list[list[str]]) -> str:
    widths = [
        max(len(row[i]) for row in rows if not row[i].startswith("n/a"))
        for i in range(len(rows[0]))
    ]
    lines = []
    for row in rows:
        cells = [
            text.rjust(width) if i >= 2 and not text.startswith("n/a") else text.ljust(width)
            for i, (text, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


# -- targets (the bar, for a 2-core machine) ------------------------------------------


@dataclass(frozen=True)
class Target:
    """A goal on one measurement: ``value`` computes it from the results, ``goal`` judges it."""

    text: str
    workload: str
    value: Callable[[Results, str], float | None]
    goal: Callable[[float], bool]
    unit: str


def _speedup(tool: str) -> Callable[[Results, str], float | None]:
    """How many times faster refzarr is than ``tool``."""

    def value(results: Results, workload: str) -> float | None:
        a, b = results.get((workload, tool)), results.get((workload, "refzarr"))
        x, y = getattr(a, "seconds", None), getattr(b, "seconds", None)
        return x / y if x and y else None

    return value


def _refzarr(field: str, scale: float = 1) -> Callable[[Results, str], float | None]:
    def value(results: Results, workload: str) -> float | None:
        found = getattr(results.get((workload, "refzarr")), field, None)
        return None if found is None else found * scale

    return value


def targets(small: int) -> list[Target]:
    """The issue's bar: 1M chunks against each tool, and the small files (when run)."""
    found = [
        Target("1M: >= 8x faster than kerchunk", "1M", _speedup("kerchunk"), lambda x: x >= 8, "x"),
        Target(
            "1M: >= 4x faster than VirtualiZarr",
            "1M",
            _speedup("virtualizarr"),
            lambda x: x >= 4,
            "x",
        ),
        Target(
            "1M: within 1.5x of the bare h5py loop",
            "1M",
            lambda r, w: 1 / x if (x := _speedup("h5py")(r, w)) else None,
            lambda x: x <= 1.5,
            "x its time",
        ),
        Target("1M: peak < 250 MB", "1M", _refzarr("peak_mb"), lambda x: x < 250, " MB"),
        Target(
            f"{small:,} small files: < 4 ms per file",
            f"{small:,}",
            _refzarr("seconds", 1e3),
            lambda x: x < 4,
            " ms",
        ),
    ]
    return found if small else found[:-1]


def verdicts(results: Results, small: int) -> str:
    """One line per target: met / NOT MET with the measured value, or why it was not judged."""
    lines = ["targets (the issue's bar on a 2-core machine):"]
    for target in targets(small):
        value = target.value(results, target.workload)
        if value is None:
            verdict, shown = "-", "not measured (not run, or a tool failed)"
        else:
            verdict = "met" if target.goal(value) else "NOT MET"
            shown = f"{value:.2f}{target.unit}"
        lines.append(f"  {verdict:<8} {target.text:<40} {shown}")
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------------


def header(tools: list[str], repeat: int) -> str:
    """What was measured, where, with which versions."""
    packages = {"refzarr", "h5py", "kerchunk", "virtualizarr"} & ({"h5py", *tools})
    versions = ", ".join(f"{name} {version(name)}" for name in sorted(packages))
    return (
        f"median of {repeat} runs, each in a fresh process; {os.cpu_count()} CPUs; "
        f"Python {sys.version.split()[0]}\n{versions}\n"
        "peak MB: peak resident memory of the process; +MB: peak minus the peak after imports "
        "and a warm-up scan\ntime: wall clock; cpu: the process's CPU time\n"
        "x columns: tool / refzarr (above 1: refzarr is faster / smaller)\n"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options (--worker, --generate and the options after them are internal)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="10k,100k,1M", help='chunks per file, e.g. 10k,1M ("": none)'
    )
    parser.add_argument("--small", type=int, default=1000, help="small files (0: none)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"from {','.join(TOOLS)}")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where test files are kept")
    parser.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    parser.add_argument("--paths", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--generate", choices=("big", "small", "warmup"), help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        args.sizes = [parse_size(part) for part in args.sizes.split(",") if part.strip()]
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = sorted(set(args.tools) - set(TOOLS))
    if unknown:
        parser.error(f"unknown tools {unknown}; choose from {','.join(TOOLS)}")
    args.tools = [t for t in TOOLS if t in args.tools]  # refzarr first, as the reference
    if args.repeat < 1 or args.small < 0:
        parser.error("--repeat must be at least 1 and --small at least 0")
    return args


FORMAT_BENCHES = ("netcdf3", "tiff", "grib", "fits", "hdf4", "dmrpp")
"""Formats with their own benchmark script, ``bench_<format>.py`` beside this one."""


def run_formats(name: str, argv: list[str]) -> int:
    """Run one format's benchmark script (or all: HDF5 here, then each script) in a fresh
    process each: ecCodes, GDAL and PROJ stay out of each other's way."""
    if name not in (*FORMAT_BENCHES, "hdf5", "all"):
        choices = ", ".join(("hdf5", *FORMAT_BENCHES, "all"))
        print(f"bench_scan.py: unknown format {name!r}; choose from {choices}", file=sys.stderr)
        return 2
    names = ("hdf5", *FORMAT_BENCHES) if name == "all" else (name,)
    here = Path(__file__).resolve().parent
    status = 0
    for each in names:
        script = here / ("bench_scan.py" if each == "hdf5" else f"bench_{each}.py")
        print(f"\n== {each}: {script.name} {' '.join(argv)}".rstrip(), flush=True)
        done = subprocess.run([sys.executable, str(script), *argv], check=False)
        status = status or done.returncode
    return status


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, internally, one measurement or one generation)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--format"] and len(argv) > 1:
        return run_formats(argv[1], argv[2:])
    args = parse_args(argv)
    if args.worker:
        paths = [Path(line) for line in args.paths.read_text().splitlines()]
        run_worker(args.worker, paths, args.warmup)
        return 0
    if args.generate:
        run_generate(args.generate, args.cache, args.n)
        return 0
    cache = args.cache.resolve()
    ensure_files(cache, args.sizes, args.small)
    results: Results = {}
    for n in args.sizes:
        measure(size_label(n), [big_file(cache, n)], args.tools, args.repeat, cache, results)
    if args.small:
        files = small_files(cache, args.small)
        measure(f"{args.small:,}", files, args.tools, args.repeat, cache, results)
    print(report(args, results))
    return 0


def report(args: argparse.Namespace, results: Results) -> str:
    """The header, one table per workload kind, and the targets."""
    parts = [header(args.tools, args.repeat)]
    if args.sizes:
        counts = ", ".join(f"{size_label(n)}: T = {steps(n)}" for n in args.sizes)
        parts += [
            f"one HDF5 file: float32 (T, {FRAME[0]}, {FRAME[1]}), chunks {CHUNK}, zlib; {counts}",
            table([size_label(n) for n in args.sizes], args.tools, results, small=False),
            "",
        ]
    if args.small:
        parts += [
            f"small netCDF4 files: air float32 (1, {SMALL_GRID[0]}, {SMALL_GRID[1]}), chunks "
            f"{SMALL_CHUNK}, zlib + shuffle;\ntime/lat/lon coordinates, CF attributes; "
            "all files scanned in one process",
            table([f"{args.small:,}"], args.tools, results, small=True),
            "",
        ]
    parts.append(verdicts(results, args.small))
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(main())
