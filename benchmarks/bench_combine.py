"""Many small netCDF4 files into one dataset: refzarr against kerchunk and VirtualiZarr.

The workload of issue 5: N daily netCDF4 files (netCDF4-python; each ``air`` float32
``(1, 128, 128)`` in ``(1, 64, 64)`` zlib + shuffle chunks, its own ``time`` value, ``lat``,
``lon``; the files of ``bench_scan.py``) concatenated along ``time`` and written as a Parquet
reference set. Per tool, end to end (scan + combine + write) and each step:

- refzarr: ``scan_many(paths)`` (its default: a process pool, one worker per CPU), then
  ``combine(groups, concat_dims=["time"])``, then ``refzarr.write(group, "out.parq")``;
  ``refzarr (1 process)`` is the same with ``executor="serial"``;
- kerchunk: ``SingleHdf5ToZarr(path).translate()`` per file (in turn: kerchunk has no pool of
  its own), ``MultiZarrToZarr(refs, concat_dims=["time"]).translate()``, then
  ``kerchunk.df.refs_to_dataframe``;
- VirtualiZarr: ``open_virtual_mfdataset(paths, concat_dim="time", combine="nested",
  parser=HDFParser(), registry=...)`` then ``.vz.to_kerchunk(format="parquet")`` (only when
  virtualizarr is installed: ``pip install -e '.[bench]'``).

Every measurement runs in a fresh Python process that first imports the tool and runs it once
on two files (imports, first-call caches). ``peak MB`` is that process's peak resident memory
(``ru_maxrss``); ``workers MB`` the largest peak of its child processes (refzarr's scan
workers). The files are read once first, so every tool reads them from the page cache. They
are generated once into ``benchmarks/.cache/combine/`` (``--cache DIR``; delete to regenerate).

Usage::

    python benchmarks/bench_combine.py                         # 1,000 and 10,000 files, 3 runs
    python benchmarks/bench_combine.py --files 1000            # a quick run
    python benchmarks/bench_combine.py --files 200 --repeat 1 --tools refzarr,kerchunk
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scan import write_one_day

CACHE = Path(__file__).resolve().parent / ".cache" / "combine"
TOOLS = ("refzarr", "refzarr-serial", "kerchunk", "virtualizarr")
TOOL_NAMES = {
    "refzarr": "refzarr",
    "refzarr-serial": "refzarr (1 process)",
    "kerchunk": "kerchunk",
    "virtualizarr": "VirtualiZarr",
}
STEPS = ("scan", "combine", "write")


# -- files ------------------------------------------------------------------------------------


def folder(cache: Path, count: int) -> Path:
    """The folder of ``count`` files."""
    return cache / f"files_{count}"


def files(cache: Path, count: int) -> list[Path]:
    """The ``count`` daily files, in time order."""
    return [folder(cache, count) / f"air_{i:05d}.nc" for i in range(count)]


def ensure_files(cache: Path, count: int) -> None:
    """Write the files once, in a child process (netCDF4 and h5py each bundle an HDF5)."""
    if folder(cache, count).exists():
        return
    progress(f"writing {count:,} netCDF4 files (once)")
    command = [sys.executable, __file__, "--generate", str(count), "--cache", str(cache)]
    subprocess.run(command, check=True)


def generate(cache: Path, count: int) -> None:
    """Worker side of `ensure_files`: write into a partial folder, then rename it."""
    target = folder(cache, count)
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for day in range(count):
        write_one_day(partial / f"air_{day:05d}.nc", day)
    partial.rename(target)


def warm_page_cache(paths: list[Path]) -> None:
    """Read every file once, so that no tool pays for the disk."""
    for path in paths:
        path.read_bytes()


# -- worker side: the tools -------------------------------------------------------------------
#
# A tool is three functions: scan(paths) -> per-file results, combine(results) -> combined,
# write(combined, out). The worker times each.


@dataclass(frozen=True)
class Tool:
    scan: Callable[[list[Path]], Any]
    combine: Callable[[Any], Any]
    write: Callable[[Any, Path], None]


def tool_refzarr(executor: Any = None) -> Tool:
    import refzarr
    from refzarr.combine import combine

    return Tool(
        scan=lambda paths: refzarr.scan_many(paths, executor=executor, progress=False),
        combine=lambda groups: combine(groups, concat_dims=["time"]),
        write=lambda group, out: refzarr.write(group, out),
    )


def tool_kerchunk() -> Tool:
    from kerchunk.combine import MultiZarrToZarr  # type: ignore[import-untyped]
    from kerchunk.df import refs_to_dataframe  # type: ignore[import-untyped]
    from kerchunk.hdf import SingleHdf5ToZarr  # type: ignore[import-untyped]

    return Tool(
        scan=lambda paths: [SingleHdf5ToZarr(str(p)).translate() for p in paths],
        combine=lambda refs: MultiZarrToZarr(refs, concat_dims=["time"]).translate(),
        write=lambda refs, out: refs_to_dataframe(refs, str(out)),
    )


def tool_virtualizarr() -> Tool:
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_mfdataset
    from virtualizarr.parsers import HDFParser

    registry = ObjectStoreRegistry({"file://": LocalStore()})

    def scan_and_combine(paths: list[Path]) -> Any:
        urls = [p.resolve().as_uri() for p in paths]
        return open_virtual_mfdataset(
            urls, concat_dim="time", combine="nested", parser=HDFParser(), registry=registry
        )

    # open_virtual_mfdataset scans and combines in one call: timed as "scan", combine is 0
    return Tool(
        scan=scan_and_combine,
        combine=lambda ds: ds,
        write=lambda ds, out: ds.vz.to_kerchunk(str(out), format="parquet"),
    )


FACTORIES: dict[str, Callable[[], Tool]] = {
    "refzarr": tool_refzarr,
    "refzarr-serial": lambda: tool_refzarr("serial"),
    "kerchunk": tool_kerchunk,
    "virtualizarr": tool_virtualizarr,
}


def run_worker(name: str, paths: list[Path]) -> None:
    """Warm up on two files, then time scan, combine and write; print one JSON line."""
    try:
        tool = FACTORIES[name]()
        with tempfile.TemporaryDirectory() as scratch:
            tool.write(tool.combine(tool.scan(paths[:2])), Path(scratch) / "warm.parq")
            seconds: dict[str, float] = {}
            start = time.perf_counter()
            scanned = tool.scan(paths)
            seconds["scan"] = time.perf_counter() - start
            start = time.perf_counter()
            combined = tool.combine(scanned)
            seconds["combine"] = time.perf_counter() - start
            start = time.perf_counter()
            tool.write(combined, Path(scratch) / "out.parq")
            seconds["write"] = time.perf_counter() - start
        report: dict[str, Any] = {
            **seconds,
            "total": sum(seconds.values()),
            "peak_mb": _peak_mb(resource.RUSAGE_SELF),
            "workers_mb": _peak_mb(resource.RUSAGE_CHILDREN),
        }
    except Exception as exc:  # report it in the table, go on with the others
        text = str(exc).splitlines()[0] if str(exc) else ""
        report = {"error": f"{type(exc).__name__}: {text}"[:90]}
    print(json.dumps(report))


def _peak_mb(who: int) -> float:
    peak = resource.getrusage(who).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


# -- parent side ------------------------------------------------------------------------------


@dataclass
class Result:
    """Medians over the runs of one tool on one file count (seconds per step and in all)."""

    scan: float = 0.0
    combine: float = 0.0
    write: float = 0.0
    total: float = 0.0
    peak_mb: float = 0.0
    workers_mb: float = 0.0
    error: str | None = None


def spawn(tool: str, listing: Path) -> dict[str, Any]:
    """One measurement in a fresh interpreter."""
    command = [sys.executable, __file__, "--worker", tool, "--paths", str(listing)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return {"error": lines[-1][:90]}
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def available(tool: str) -> str | None:
    """Why ``tool`` cannot run here (None when it can)."""
    package = {"kerchunk": "kerchunk", "virtualizarr": "virtualizarr"}.get(tool)
    if package is None:
        return None
    try:
        version(package)
    except PackageNotFoundError:
        return f"not installed (pip install -e '.[bench]' for {package})"
    return None


def measure(count: int, tools: list[str], repeat: int, cache: Path) -> dict[str, Result]:
    """Each run a fresh process per tool, tools interleaved; medians per tool."""
    paths = files(cache, count)
    warm_page_cache(paths)
    listing = cache / f"paths_{count}.txt"
    listing.write_text("\n".join(str(p) for p in paths))
    runs: dict[str, list[dict[str, Any]]] = {tool: [] for tool in tools}
    for run in range(repeat):
        for tool in tools:
            reason = available(tool)
            if reason is not None:
                runs[tool] = [{"error": reason}]
                continue
            progress(f"{count:,} files: {tool} ({run + 1}/{repeat})")
            runs[tool].append(spawn(tool, listing))
    return {tool: _median(reports) for tool, reports in runs.items()}


def _median(reports: list[dict[str, Any]]) -> Result:
    errors = [r["error"] for r in reports if "error" in r]
    if errors:
        return Result(error=errors[0])
    fields = ("scan", "combine", "write", "total", "peak_mb", "workers_mb")
    return Result(**{f: statistics.median(r[f] for r in reports) for f in fields})


def progress(text: str) -> None:
    print(f"  ... {text}", file=sys.stderr, flush=True)


# -- report -----------------------------------------------------------------------------------

COLUMNS = (
    "files",
    "tool",
    "total s",
    "scan s",
    "combine s",
    "write s",
    "peak MB",
    "workers MB",
    "total x",
    "combine x",
    "peak x",
)


def table(results: dict[int, dict[str, Result]], tools: list[str]) -> str:
    """One row per file count and tool; ``x`` columns are tool / refzarr."""
    rows: list[list[str]] = [list(COLUMNS)]
    for count, by_tool in results.items():
        base = by_tool.get("refzarr")
        for i, tool in enumerate(tools):
            found = by_tool[tool]
            label = f"{count:,}" if i == 0 else ""
            if found.error is not None:
                rows.append([label, TOOL_NAMES[tool], f"n/a: {found.error}"])
                continue
            cells = _cells(found, base)
            if tool != "refzarr":  # only refzarr's default runs worker processes
                cells[5] = ""
            if tool == "virtualizarr":  # open_virtual_mfdataset combines while it scans
                cells[2] = cells[7] = "in scan"
            rows.append([label, TOOL_NAMES[tool], *cells])
    return _align(rows)


def _cells(found: Result, base: Result | None) -> list[str]:
    ok = base is not None and base.error is None and base is not found
    return [
        f"{found.total:.2f}",
        f"{found.scan:.2f}",
        f"{found.combine:.3f}",
        f"{found.write:.3f}",
        f"{found.peak_mb:,.0f}",
        f"{found.workers_mb:,.0f}",
        _ratio(found.total, base.total) if ok and base else "",
        _ratio(found.combine, base.combine) if ok and base else "",
        _ratio(found.peak_mb, base.peak_mb) if ok and base else "",
    ]


def _ratio(value: float, reference: float) -> str:
    return f"{value / reference:.1f}x" if reference > 0 and value > 0 else ""


def _align(rows: list[list[str]]) -> str:
    width = len(COLUMNS)
    widths = [max(len(r[i]) for r in rows if len(r) == width) for i in range(width)]
    lines = []
    for row in rows:
        if len(row) < width:  # an error row: the message runs on
            lines.append("  ".join([row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2]]))
            continue
        cells = [
            text.ljust(w) if i < 2 else text.rjust(w)
            for i, (text, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def verdicts(results: dict[int, dict[str, Result]]) -> str:
    """The issue's targets on 2 cores, judged on the largest file count measured."""
    count = max(results)
    by_tool = results[count]
    ours = by_tool.get("refzarr")
    lines = [f"targets (issue 5, 2 cores; judged on {count:,} files):"]
    if ours is None or ours.error is not None:
        return "\n".join([*lines, "  -        refzarr was not measured"])
    for tool in ("kerchunk", "virtualizarr"):
        other = by_tool.get(tool)
        if other is None or other.error is not None:
            lines.append(
                f"  -        end to end >= 8x faster than {TOOL_NAMES[tool]}: not measured"
            )
            continue
        speedup = other.total / ours.total
        lines.append(
            f"  {'met' if speedup >= 8 else 'NOT MET':<8} end to end >= 8x faster than "
            f"{TOOL_NAMES[tool]}: {speedup:.1f}x"
        )
        lower = ours.peak_mb < other.peak_mb
        lines.append(
            f"  {'met' if lower else 'NOT MET':<8} peak memory below {TOOL_NAMES[tool]}: "
            f"{ours.peak_mb:,.0f} MB vs {other.peak_mb:,.0f} MB"
        )
    if count >= 10_000:
        fast = ours.combine < 0.5
        lines.append(
            f"  {'met' if fast else 'NOT MET':<8} combine of {count:,} files < 0.5 s: "
            f"{ours.combine:.3f} s"
        )
    return "\n".join(lines)


def header(tools: list[str], repeat: int) -> str:
    names = {"refzarr", "kerchunk", "virtualizarr", "h5py"}
    found = []
    for name in sorted(names):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    return (
        f"median of {repeat} run(s), each in a fresh process; {os.cpu_count()} CPUs; "
        f"Python {sys.version.split()[0]}\n{', '.join(found)}\n"
        "files: air float32 (1, 128, 128), chunks (1, 64, 64), zlib + shuffle, one time "
        "value each; concatenated along time, written as Parquet\n"
        "x columns: tool / refzarr (above 1: refzarr is faster / smaller)\n"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="1000,10000", help="file counts, e.g. 1000,10000")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"from {','.join(TOOLS)}")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where the files are kept")
    parser.add_argument("--worker", choices=TOOLS, help=argparse.SUPPRESS)
    parser.add_argument("--paths", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--generate", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        args.files = [int(part) for part in args.files.split(",") if part.strip()]
    except ValueError:
        parser.error(f"--files: expected comma-separated integers, got {args.files!r}")
    if any(n < 2 for n in args.files) or args.repeat < 1:
        parser.error("--files needs counts of at least 2 and --repeat at least 1")
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = sorted(set(args.tools) - set(TOOLS))
    if unknown:
        parser.error(f"unknown tools {unknown}; choose from {','.join(TOOLS)}")
    args.tools = [t for t in TOOLS if t in args.tools]
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, internally, one measurement or the file generation)."""
    args = parse_args(argv)
    if args.worker:
        run_worker(args.worker, [Path(p) for p in args.paths.read_text().splitlines()])
        return 0
    cache = args.cache.resolve()
    if args.generate:
        generate(cache, args.generate)
        return 0
    results: dict[int, dict[str, Result]] = {}
    for count in args.files:
        ensure_files(cache, count)
        results[count] = measure(count, args.tools, args.repeat, cache)
    print(header(args.tools, args.repeat))
    print(table(results, args.tools))
    print()
    print(verdicts(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
