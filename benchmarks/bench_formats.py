"""Loading and writing reference sets: refzarr against fsspec and kerchunk, in one run.

For each size (number of chunk references of one array spread over 1,000 file URLs) this
prints, side by side:

- load time and peak memory of ``refzarr.read`` against fsspec's ``ReferenceFileSystem``, for
  kerchunk JSON and for the Parquet layout (``LazyReferenceMapper``);
- write time of ``refzarr.write`` against what kerchunk users run: ``json.dump`` / ``ujson.dump``
  of the reference dict and ``kerchunk.df.refs_to_dataframe``.

Every measurement runs in a fresh Python process, so its peak resident memory (``ru_maxrss``)
is its own and no cache carries over; imports happen before the clock starts. The write
measurements leave their outputs in ``benchmarks/.cache/<size>/``, and the load measurements
read them: refzarr loads what refzarr wrote, fsspec loads what kerchunk wrote.

A second section (``--append``) appends 10 files to a Parquet set of 10,000 (issue 18): the
append that writes only the changed record files against the append that rewrites the whole
set (what every append did before) and against writing the whole 10,010-file set from memory;
medians of fresh processes, each starting from a copy of the same set (the fast append: three
appends of 10 files in a row to that copy, as a daily job makes them).

A third section (``--icechunk``) writes 1M virtual references into Icechunk (issue 18):
refzarr against VirtualiZarr's ``to_icechunk`` and Icechunk's bulk API called directly;
it is ``bench_icechunk.py``, run from here with its defaults.

Usage::

    python benchmarks/bench_formats.py                      # 1M and 10M, as the issue asks
    python benchmarks/bench_formats.py --sizes 10k,100k     # a quick run
    python benchmarks/bench_formats.py --skip-competitors   # refzarr only
    python benchmarks/bench_formats.py --append             # the append section only
    python benchmarks/bench_formats.py --icechunk           # the Icechunk section only
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

from refzarr import to_kerchunk

CACHE = Path(__file__).resolve().parent / ".cache"
NFILES = 1_000
ARRAY = "data"
CHUNKS = (10, 100)  # 1,000 float32 per chunk: 4 KB raw, 2-4 KB compressed
FIRST_KEY = f"{ARRAY}/0.0"
SUFFIXES = {"k": 1_000, "M": 1_000_000}


# -- sizes ------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """``"10k"`` -> 10,000, ``"1M"`` -> 1,000,000; a multiple of the number of files."""
    text = text.strip()
    scale = SUFFIXES.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in SUFFIXES else text
    try:
        n = int(float(number) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 10k, 1M)") from None
    if n < NFILES or n % NFILES:
        raise argparse.ArgumentTypeError(f"size {text!r} must be a positive multiple of {NFILES}")
    return n


def size_label(n: int) -> str:
    """The short form of a size: 10000 -> ``"10k"``."""
    for suffix, scale in sorted(SUFFIXES.items(), key=lambda item: -item[1]):
        if n % scale == 0:
            return f"{n // scale}{suffix}"
    return str(n)


# -- the synthetic reference set --------------------------------------------------------------


def synthetic_group(n: int) -> Any:
    """One float32 array of ``n`` chunks, grid ``(n / 1000, 1000)``, over 1,000 files.

    Each file holds a contiguous run of ``n / 1000`` chunks (C order) after a 16 KB header,
    with compressed lengths of 2-4 KB, as a netCDF4 file written record by record would.
    """
    import numpy as np

    from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup

    per_file = n // NFILES
    grid = (n // 1000, 1000)
    lengths = np.random.default_rng(0).integers(2_000, 4_000, (NFILES, per_file), dtype=np.uint64)
    offsets = 16_384 + np.cumsum(lengths, axis=1, dtype=np.uint64) - lengths
    path_id = np.repeat(np.arange(NFILES, dtype=np.int32), per_file)
    paths = [f"s3://bucket/data/file_{i:04d}.nc" for i in range(NFILES)]
    manifest = ChunkManifest.from_arrays(
        paths, path_id.reshape(grid), offsets.reshape(grid), lengths.reshape(grid)
    )
    meta = ArrayMeta(
        shape=tuple(g * c for g, c in zip(grid, CHUNKS, strict=True)),
        chunks=CHUNKS,
        dtype=np.dtype("<f4"),
        fill_value=float("nan"),
        codecs=({"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 4}),
        attributes={"units": "K"},
        dimension_names=("time", "x"),
    )
    return RefGroup({"title": "synthetic"}, {ARRAY: RefArray(meta, manifest)})


# -- worker side: one measurement per fresh process -------------------------------------------
#
# A task imports what it needs and returns {label: callable}; only the callables are timed.

Task = Callable[[Path, int], dict[str, Callable[[], object]]]


def load_refzarr_json(folder: Path, n: int) -> dict[str, Callable[[], object]]:
    """refzarr.read of the JSON set, one chunk looked up and every manifest column loaded."""
    import refzarr

    def run() -> object:
        manifest = refzarr.read(folder / "refzarr.json")[ARRAY].manifest
        return manifest[0, 0], manifest.paths, manifest.path_id, manifest.offset, manifest.length

    return {"refzarr": run}


def load_refzarr_parquet(folder: Path, n: int) -> dict[str, Callable[[], object]]:
    """refzarr.read of the Parquet set and one chunk looked up (one record file loaded)."""
    import refzarr

    return {"refzarr": lambda: refzarr.read(folder / "refzarr.parq")[ARRAY].manifest[0, 0]}


def _reference_fs(path: Path) -> Any:
    import fsspec

    return fsspec.filesystem(
        "reference",
        fo=str(path),
        remote_protocol="s3",
        remote_options={"anon": True},
        skip_instance_cache=True,
    )


def load_fsspec_json(folder: Path, n: int) -> dict[str, Callable[[], object]]:
    """fsspec's ReferenceFileSystem on kerchunk's JSON and one key looked up."""
    import fsspec.implementations.reference  # noqa: F401
    import s3fs  # noqa: F401  (the remote filesystem is built inside the timed call)

    return {"fsspec": lambda: _reference_fs(folder / "kerchunk.json").references[FIRST_KEY]}


def load_fsspec_parquet(folder: Path, n: int) -> dict[str, Callable[[], object]]:
    """fsspec's ReferenceFileSystem (LazyReferenceMapper) on kerchunk's Parquet, one key."""
    import fastparquet  # noqa: F401  (fsspec's default engine for record files)
    import fsspec.implementations.reference  # noqa: F401
    import pandas  # noqa: F401
    import s3fs  # noqa: F401

    return {"fsspec": lambda: _reference_fs(folder / "kerchunk.parq").references[FIRST_KEY]}


def write_refzarr(folder: Path, n: int) -> dict[str, Callable[[], object]]:
    """refzarr.write as JSON (Version 0) and as Parquet, from a built RefGroup."""
    import refzarr

    group = synthetic_group(n)
    return {
        "json": lambda: refzarr.write(group, folder / "refzarr.json"),
        "parquet": lambda: refzarr.write(group, folder / "refzarr.parq"),
    }


def write_kerchunk(folder: Path, n: int) -> dict[str, Callable[[], object]]:
    """kerchunk's writes of the same references, from the reference dict a kerchunk scan gives."""
    import kerchunk.df
    import ujson

    from refzarr.formats.api import DEFAULT_RECORD_SIZE

    refs = to_kerchunk(synthetic_group(n))

    def dump(module: Any) -> None:
        with open(folder / "kerchunk.json", "w") as f:
            module.dump(refs, f)

    return {
        "json": lambda: dump(json),
        "ujson": lambda: dump(ujson),
        "kerchunk": lambda: kerchunk.df.refs_to_dataframe(
            refs, str(folder / "kerchunk.parq"), record_size=DEFAULT_RECORD_SIZE
        ),
    }


TASKS: dict[str, Task] = {
    "load-refzarr-json": load_refzarr_json,
    "load-refzarr-parquet": load_refzarr_parquet,
    "load-fsspec-json": load_fsspec_json,
    "load-fsspec-parquet": load_fsspec_parquet,
    "write-refzarr": write_refzarr,
    "write-kerchunk": write_kerchunk,
}


def run_worker(task: str, folder: Path, n: int, repeat: int) -> None:
    """Time each callable of ``task`` ``repeat`` times; print one JSON line with the results."""
    results: dict[str, Any] = {}
    try:
        calls = TASKS[task](folder, n)
    except Exception as exc:
        calls, results["*"] = {}, {"error": _describe(exc)}
    base_mb = _peak_mb()  # the interpreter and its imports (and, for writes, the input)
    for label, call in calls.items():
        try:
            results[label] = {"seconds": [_timed(call) for _ in range(repeat)]}
        except Exception as exc:  # report it in the table, go on with the others
            results[label] = {"error": _describe(exc)}
    print(json.dumps({"results": results, "peak_mb": _peak_mb(), "base_mb": base_mb}))


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:80] if text else type(exc).__name__


def _peak_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


# -- parent side: run workers, collect, report ------------------------------------------------


@dataclass
class Result:
    """Median time and peak memory of one tool doing one operation at one size.

    ``base_mb`` is the peak before the timed call (interpreter and imports).
    """

    seconds: float | None = None
    peak_mb: float | None = None
    base_mb: float | None = None
    error: str | None = None


Results = dict[tuple[int, str, str], Result]  # (size, operation, tool) -> result


def spawn(task: str, folder: Path, n: int, repeat: int = 1) -> dict[str, Any]:
    """Run ``task`` in a fresh interpreter and return its parsed report."""
    command = [sys.executable, __file__, "--worker", task, "--dir", str(folder)]
    command += ["--worker-size", str(n), "--repeat", str(repeat)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        return {"results": {"*": {"error": lines[-1][:80]}}, "peak_mb": None}
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


WRITES = {
    "write-refzarr": {"json": ("write JSON", "refzarr"), "parquet": ("write Parquet", "refzarr")},
    "write-kerchunk": {
        "json": ("write JSON", "json.dump"),
        "ujson": ("write JSON", "ujson.dump"),
        "kerchunk": ("write Parquet", "kerchunk"),
    },
}


def measure_writes(n: int, folder: Path, repeat: int, competitors: bool, out: Results) -> None:
    """Write timings: one process per tool, each write repeated; medians."""
    for task, labels in WRITES.items():
        if not competitors and task != "write-refzarr":
            continue
        progress(f"{size_label(n)}: {task} (x{repeat})")
        report = spawn(task, folder, n, repeat)
        for label, key in labels.items():
            found = report["results"].get(label) or report["results"].get("*") or {}
            out[(n, *key)] = _result(found)


LOADS = {
    "load-refzarr-json": ("load JSON", "refzarr"),
    "load-refzarr-parquet": ("load Parquet", "refzarr"),
    "load-fsspec-json": ("load JSON", "fsspec"),
    "load-fsspec-parquet": ("load Parquet", "fsspec"),
}


def measure_loads(n: int, folder: Path, repeat: int, competitors: bool, out: Results) -> None:
    """Load timings: each run a fresh process; medians of time and of peak memory."""
    tasks = [t for t in LOADS if competitors or "refzarr" in t]
    reports: dict[str, list[dict[str, Any]]] = {task: [] for task in tasks}
    for run in range(repeat):
        for task in tasks:  # interleaved, so that drift in the machine hits every tool alike
            progress(f"{size_label(n)}: {task} ({run + 1}/{repeat})")
            reports[task].append(spawn(task, folder, n))
    for task, runs in reports.items():
        out[(n, *LOADS[task])] = _merge(runs)


def _merge(runs: list[dict[str, Any]]) -> Result:
    found = [next(iter(run["results"].values())) for run in runs]
    errors = [f["error"] for f in found if "error" in f]
    if errors:
        return Result(error=errors[0])
    seconds = [s for f in found for s in f["seconds"]]
    peaks = [run["peak_mb"] for run in runs]
    bases = [run["base_mb"] for run in runs]
    return Result(statistics.median(seconds), statistics.median(peaks), statistics.median(bases))


def _result(found: dict[str, Any]) -> Result:
    if "seconds" not in found:
        return Result(error=found.get("error", "not measured"))
    return Result(statistics.median(found["seconds"]))


def progress(text: str) -> None:
    """A progress line on stderr (the table goes to stdout)."""
    print(f"  ... {text}", file=sys.stderr, flush=True)


# -- the report -------------------------------------------------------------------------------

OPERATIONS = {
    "load JSON": [("refzarr", "refzarr.read"), ("fsspec", "fsspec ReferenceFileSystem")],
    "load Parquet": [("refzarr", "refzarr.read"), ("fsspec", "fsspec LazyReferenceMapper")],
    "write JSON": [
        ("refzarr", "refzarr.write"),
        ("json.dump", "json.dump(refs)"),
        ("ujson.dump", "ujson.dump(refs)"),
    ],
    "write Parquet": [("refzarr", "refzarr.write"), ("kerchunk", "kerchunk refs_to_dataframe")],
}
COLUMNS = ("size", "operation", "tool", "time s", "peak MB", "base MB", "time x", "peak x")


def table(sizes: list[int], results: Results) -> str:
    """One row per size, operation and tool; the ``x`` columns are competitor / refzarr."""
    rows = []
    for n in sizes:
        for operation, tools in OPERATIONS.items():
            base = results.get((n, operation, "refzarr"))
            for tool, name in tools:
                found = results.get((n, operation, tool))
                if found is not None:
                    rows.append([size_label(n), operation, name, *_cells(found, base)])
    for above, row in zip(rows[-2::-1], rows[:0:-1], strict=True):  # blank repeated labels
        for column in (1, 0):
            if row[: column + 1] == above[: column + 1]:
                row[column] = ""
    return _align([list(COLUMNS), *rows])


def _cells(found: Result, base: Result | None) -> list[str]:
    if found.error is not None or found.seconds is None:
        return [f"n/a: {found.error}", "", "", "", ""]
    ratios = base is not None and base is not found and base.seconds is not None
    return [
        f"{found.seconds:.3f}",
        "" if found.peak_mb is None else f"{found.peak_mb:,.0f}",
        "" if found.base_mb is None else f"{found.base_mb:,.0f}",
        _ratio(found.seconds, base.seconds) if ratios and base else "",
        _ratio(found.peak_mb, base.peak_mb) if ratios and base else "",
    ]


def _ratio(value: float | None, reference: float | None) -> str:
    return f"{value / reference:.1f}x" if value and reference else ""


def _align(rows: list[list[str]]) -> str:
    widths = [
        max(len(row[i]) for row in rows if not row[i].startswith("n/a"))
        for i in range(len(COLUMNS))
    ]
    lines = []
    for row in rows:
        cells = [
            text.rjust(width) if i >= 3 and not text.startswith("n/a") else text.ljust(width)
            for i, (text, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


# -- targets (the bar, for a 2-core machine) ------------------------------------------


@dataclass(frozen=True)
class Target:
    """A goal on one measurement: ``value`` computes it from the results, ``goal`` judges it."""

    text: str
    size: int
    value: Callable[[Results, int], float | None]
    goal: Callable[[float], bool]
    unit: str


def _time_ratio(operation: str, tool: str) -> Callable[[Results, int], float | None]:
    return lambda results, n: _quotient(results, n, operation, tool, "seconds")


def _peak_ratio(operation: str, tool: str) -> Callable[[Results, int], float | None]:
    return lambda results, n: _quotient(results, n, operation, "refzarr", "peak_mb", over=tool)


def _quotient(
    results: Results, n: int, operation: str, top: str, field: str, over: str = "refzarr"
) -> float | None:
    a, b = results.get((n, operation, top)), results.get((n, operation, over))
    x, y = getattr(a, field, None), getattr(b, field, None)
    return x / y if x and y else None


def _seconds(operation: str) -> Callable[[Results, int], float | None]:
    return lambda results, n: getattr(results.get((n, operation, "refzarr")), "seconds", None)


TARGETS = [
    Target(
        "load 10M JSON >= 3x faster than fsspec",
        size=10**7,
        value=_time_ratio("load JSON", "fsspec"),
        goal=lambda x: x >= 3,
        unit="x",
    ),
    Target(
        "load 10M JSON peak < 1/2 of fsspec's",
        size=10**7,
        value=_peak_ratio("load JSON", "fsspec"),
        goal=lambda x: x < 0.5,
        unit=" of fsspec's",
    ),
    Target("write 1M Parquet < 1 s", 10**6, _seconds("write Parquet"), lambda x: x < 1, " s"),
    Target("write 1M JSON < 1 s", 10**6, _seconds("write JSON"), lambda x: x < 1, " s"),
]


def targets(results: Results) -> str:
    """One line per target: met / NOT MET with the measured value, or why it was not judged."""
    lines = ["targets (the issue's bar on a 2-core machine):"]
    for target in TARGETS:
        value = target.value(results, target.size)
        if value is None:
            verdict, shown = "-", f"not measured ({size_label(target.size)} not run or failed)"
        else:
            verdict = "met" if target.goal(value) else "NOT MET"
            shown = f"{value:.2f}{target.unit}"
        lines.append(f"  {verdict:<8} {target.text:<42} {shown}")
    return "\n".join(lines)


# -- appending 10 files to a Parquet set of 10,000 (issue 18) --------------------------------

APPEND_NEW = 10
APPEND_CHUNK = 50
APPEND_IN_PROCESS = 3
APPEND_TASKS = {
    "append-fast": "append 10 files (changed record files only)",
    "append-whole": "append 10 files, whole set rewritten (before)",
    "write-whole": "write the whole set from memory",
}


def append_group(first: int, count: int, per_file: int) -> Any:
    """``count`` daily files from day ``first`` as one group: ``air(time, y, x)`` with one
    time step and ``per_file`` (a square) chunks per file, an inlined ``time`` coordinate and
    inlined ``y`` / ``x`` coordinates (what combining scanned files gives)."""
    import numpy as np

    from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup
    from refzarr.combine.coordinate import inlined_array

    side = math.isqrt(per_file)
    grid = (count, side, side)
    rng = np.random.default_rng(first)
    lengths = rng.integers(2_000, 4_000, (count, per_file), dtype=np.uint64)
    offsets = 16_384 + np.cumsum(lengths, axis=1, dtype=np.uint64) - lengths
    path_id = np.repeat(np.arange(count, dtype=np.int32), per_file)
    paths = [f"s3://bucket/air/day_{first + k:06d}.nc" for k in range(count)]
    manifest = ChunkManifest.from_arrays(
        paths, path_id.reshape(grid), offsets.reshape(grid), lengths.reshape(grid)
    )
    meta = ArrayMeta(
        shape=(count, side * APPEND_CHUNK, side * APPEND_CHUNK),
        chunks=(1, APPEND_CHUNK, APPEND_CHUNK),
        dtype=np.dtype("<f4"),
        fill_value=float("nan"),
        codecs=({"id": "zlib", "level": 4},),
        attributes={"units": "K"},
        dimension_names=("time", "y", "x"),
    )
    days = np.arange(first, first + count, dtype="<f8")
    axis = np.arange(side * APPEND_CHUNK, dtype="<f4")
    members = {
        "time": inlined_array(days, "time", {"units": "days since 2000-01-01"}),
        "y": inlined_array(axis, "y", {"units": "km"}),
        "x": inlined_array(axis, "x", {"units": "km"}),
        "air": RefArray(meta, manifest),
    }
    return RefGroup({"title": "synthetic archive"}, members)


def run_append_worker(task: str, folder: Path, args: argparse.Namespace) -> None:
    """Timed appends (or a whole write) to a fresh copy of the set; one JSON line.

    ``append-fast`` makes ``APPEND_IN_PROCESS`` appends of 10 files one after the other to
    the same copy, as a job appending every day does (the first in a fresh process pays
    first-call costs, and finds no directory left by an earlier append to recycle; each
    later one recycles the directory the one before replaced); the others run once.
    """
    import refzarr

    files, per_file, size = args.append_files, args.append_chunks, args.append_record_size
    if task == "setup":
        refzarr.write(append_group(0, files, per_file), folder / "base.parq", record_size=size)
        return
    _warm_up(folder / "warm.parq")
    runs = APPEND_IN_PROCESS if task == "append-fast" else 1
    news = [append_group(files + k * APPEND_NEW, APPEND_NEW, per_file) for k in range(runs)]
    whole = None
    if task == "write-whole":
        whole = refzarr.combine([append_group(0, files, per_file), news[0]], concat_dims=["time"])
    base_mb = _peak_mb()
    work = _fresh_copy(folder, copy=whole is None)
    timed = [_append_once(task, work, new, whole, size) for new in news]
    report = {"seconds": [t for t, _ in timed], "fast": all(f for _, f in timed)}
    print(json.dumps({**report, "peak_mb": _peak_mb(), "base_mb": base_mb}))


def _fresh_copy(folder: Path, *, copy: bool) -> Path:
    """``work.parq``: a copy of the set (when ``copy``), nothing left beside it by earlier
    runs (so the first append finds what a set never appended to has)."""
    work = folder / "work.parq"
    for path in folder.glob("work.parq*"):
        shutil.rmtree(path, ignore_errors=True)
    if copy:
        shutil.copytree(folder / "base.parq", work)
    return work


def _append_once(task: str, work: Path, new: Any, whole: Any, size: int) -> tuple[float, bool]:
    """Seconds of one append of ``new`` to the set at ``work`` (or of writing ``whole``
    there), and whether only the changed record files were written."""
    import refzarr
    from refzarr.formats.parquet.append import append_parquet
    from refzarr.formats.source import locate

    if whole is not None:
        start = time.perf_counter()
        refzarr.write(whole, work, record_size=size)
        return time.perf_counter() - start, False
    start = time.perf_counter()
    outcome = append_parquet(
        new,
        locate(str(work), None),
        target=str(work),
        append_dim="time",
        record_size=None,
        storage_options=None,
        fast=task == "append-fast",
    )
    return time.perf_counter() - start, outcome.fast


def _warm_up(target: Path) -> None:
    """Both kinds of append on a 2-file set, so that the timed call imports nothing."""
    import refzarr

    refzarr.write(append_group(0, 1, 4), target)
    refzarr.write(append_group(1, 1, 4), target, append_dim="time")
    refzarr.write(append_group(0, 1, 4), target.with_suffix(".json"))
    refzarr.write(append_group(1, 1, 4), target.with_suffix(".json"), append_dim="time")
    shutil.rmtree(target)
    target.with_suffix(".json").unlink()


def measure_append(args: argparse.Namespace) -> str:
    """The append section: medians over ``repeat`` fresh processes per task, interleaved."""
    folder = CACHE / "append"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    progress(f"append: writing the {args.append_files:,}-file set")
    _spawn_append("setup", folder, args)
    runs: dict[str, list[dict[str, Any]]] = {task: [] for task in APPEND_TASKS}
    repeat = args.repeat or 5
    for run in range(repeat):
        for task in APPEND_TASKS:
            progress(f"append: {task} ({run + 1}/{repeat})")
            runs[task].append(_spawn_append(task, folder, args))
    shutil.rmtree(folder, ignore_errors=True)
    return append_report(args, runs, repeat)


def _spawn_append(task: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--append-worker", task, "--dir", str(folder)]
    command += ["--append-files", str(args.append_files)]
    command += ["--append-chunks", str(args.append_chunks)]
    command += ["--append-record-size", str(args.append_record_size)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"append worker {task} failed: {done.stderr.strip()[-400:]}")
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def append_report(
    args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]], repeat: int
) -> str:
    """The section's table and its target."""
    chunks = (args.append_files + APPEND_NEW) * args.append_chunks
    lines = [
        f"append {APPEND_NEW} files to a Parquet set of {args.append_files:,} "
        f"({args.append_chunks} chunks per file: {chunks:,} references of 'air' in the result; "
        f"record_size {args.append_record_size:,}); {repeat} processes per row, medians "
        f"(append: {APPEND_IN_PROCESS} appends in a row per process to one copy; 'first': "
        "the first of each, 'later': the others)",
    ]
    rows = [["operation", "time s", "peak MB", "base MB", "x fast"]]
    seconds = {t: [s for r in runs[t] for s in r["seconds"]] for t in APPEND_TASKS}
    median = {t: statistics.median(v) for t, v in seconds.items()}
    first = statistics.median(r["seconds"][0] for r in runs["append-fast"])
    for task, text in APPEND_TASKS.items():
        peak = statistics.median(r["peak_mb"] for r in runs[task])
        base = statistics.median(r["base_mb"] for r in runs[task])
        ratio = median[task] / median["append-fast"]
        rows.append([text, f"{median[task]:.3f}", f"{peak:,.0f}", f"{base:,.0f}", f"{ratio:.0f}x"])
    later = statistics.median(s for r in runs["append-fast"] for s in r["seconds"][1:])
    rows.insert(2, ["  first append in a fresh process", f"{first:.3f}", "", "", ""])
    rows.insert(3, ["  later appends (recycled directory)", f"{later:.3f}", "", "", ""])
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    share = median["append-fast"] / median["append-whole"]
    fast = all(r.get("fast") for r in runs["append-fast"])
    verdict = "met" if share < 0.01 and fast else "NOT MET"
    lines.append(
        f"  {verdict:<8} append < 1% of rewriting the whole set: {share:.2%} "
        f"(first appends: {first / median['append-whole']:.2%}; fast path in every run: {fast})"
    )
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------------


def header(sizes: list[int], repeats: dict[int, int]) -> str:
    """What was measured, where, with which versions."""
    runs = ", ".join(f"{size_label(n)}: median of {repeats[n]}" for n in sizes)
    tools = ", ".join(f"{name} {version(name)}" for name in ("refzarr", "fsspec", "kerchunk"))
    return (
        f"one array, {NFILES:,} file URLs; {runs}; {os.cpu_count()} CPUs; "
        f"Python {sys.version.split()[0]}\n{tools}\n"
        "time x, peak x: competitor / refzarr (above 1: refzarr is faster / smaller)\n"
        "base MB: peak memory before the timed call (interpreter and imports)\n"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options (the --worker ones are internal)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,10M", help="comma-separated, e.g. 10k,100k,1M")
    parser.add_argument("--repeat", type=int, help="runs per measurement (default 3; 1 at 10M+)")
    parser.add_argument("--skip-competitors", action="store_true", help="measure refzarr only")
    parser.add_argument("--append", action="store_true", help="run the append section only")
    parser.add_argument(
        "--icechunk", action="store_true", help="run the Icechunk section only (bench_icechunk)"
    )
    parser.add_argument("--append-files", type=int, default=10_000, help="files in the set")
    parser.add_argument(
        "--append-chunks", type=int, default=1024, help="chunks per file (a square number)"
    )
    parser.add_argument(
        "--append-record-size", type=int, default=100_000, help="record_size of the set"
    )
    parser.add_argument("--append-worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker", choices=sorted(TASKS), help=argparse.SUPPRESS)
    parser.add_argument("--worker-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        args.sizes = [parse_size(part) for part in args.sizes.split(",")]
    except argparse.ArgumentTypeError as exc:
        parser.error(str(exc))
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, with --worker, one measurement)."""
    args = parse_args(argv)
    if args.worker:
        run_worker(args.worker, args.dir, args.worker_size, args.repeat or 1)
        return 0
    if args.append_worker:
        run_append_worker(args.append_worker, args.dir, args)
        return 0
    if args.append:
        print(measure_append(args))
        return 0
    if args.icechunk:
        return _icechunk_section()
    repeats = {n: args.repeat or (1 if n >= 10**7 else 3) for n in args.sizes}
    results: Results = {}
    for n in args.sizes:
        folder = CACHE / size_label(n)
        shutil.rmtree(folder, ignore_errors=True)  # loads must read this run's outputs
        folder.mkdir(parents=True)
        measure_writes(n, folder, repeats[n], not args.skip_competitors, results)
        measure_loads(n, folder, repeats[n], not args.skip_competitors, results)
    print(header(args.sizes, repeats))
    print(table(args.sizes, results))
    print()
    print(targets(results))
    print()
    print(measure_append(args))
    print()
    return _icechunk_section()


def _icechunk_section() -> int:
    """Writing 1M references into Icechunk: `bench_icechunk.py` with its defaults."""
    import bench_icechunk

    return bench_icechunk.main([])


if __name__ == "__main__":
    sys.exit(main())
