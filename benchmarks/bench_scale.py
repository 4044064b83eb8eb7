"""An archive of many daily netCDF4 files, as a user handles it: scan, read, append, check.

The workload of the archive-scale users' trial: N daily netCDF4 files (netCDF4-python; four
float32 variables ``tas``, ``pr``, ``psl``, ``hurs`` of shape ``(1, 90, 180)``, one zlib +
shuffle chunk each, ``time`` with CF units, ``lat``, ``lon``, a few global attributes), and
100 more days to append. Per file count, each step runs as a user runs it (the ``refzarr``
command, or a short Python script) in a fresh process:

- ``scan parquet|json|icechunk``: ``refzarr scan 'DIR/*.nc' --concat-dim time -o OUT``;
- ``open``, ``point``, ``map``, ``mean``: ``refzarr.open_dataset(set.parq)``, then one time
  series at a point (one chunk of every file), one day's map, and the mean of one whole
  variable with dask (``chunks={}``, dask's threaded scheduler);
- ``append parquet|json|icechunk``: ``refzarr scan 'NEW/*.nc' --append-dim time -o OUT`` on a
  copy of each set (the copy is not timed);
- ``validate --sources``, ``refresh`` (one source touched first, so one file is scanned again),
  ``info``, ``cat`` (``tas/.zarray``) on the Parquet set.

``wall`` is the step's wall time, ``cpu`` the CPU time of its processes (workers included:
steadier than wall time on a shared machine); ``tree MB`` the peak of the summed resident
memory of the process and its children (sampled every 20 ms with psutil); ``per file ms``
the CPU time over N. Steps are repeated ``--repeat`` times (medians). The files are
generated once into ``--cache DIR`` (default ``benchmarks/.cache/scale``) and read once before
measuring (page cache). Other processes on the machine change the figures: the load average
is printed with each row.

Usage::

    python benchmarks/bench_scale.py --files 1000            # a quick run
    python benchmarks/bench_scale.py --files 1000,5000,20000 --repeat 3
    python benchmarks/bench_scale.py --files 2000 --steps scan,point,mean
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(__file__).resolve().parent / ".cache" / "scale"
NAMES = ("tas", "pr", "psl", "hurs")
GRID = (90, 180)
NEW_DAYS = 100
STEPS = (
    "scan parquet",
    "scan json",
    "scan icechunk",
    "open",
    "point",
    "map",
    "mean",
    "append parquet",
    "append json",
    "append icechunk",
    "validate --sources",
    "refresh",
    "info",
    "cat",
)

READ = """
import sys, time, refzarr
step, path = sys.argv[1], sys.argv[2]
ds = refzarr.open_dataset(path, chunks={} if step == "mean" else None)
if step == "point":
    ds["tas"].isel(lat=45, lon=90).values
elif step == "map":
    ds["pr"].isel(time=ds.sizes["time"] // 2).values
elif step == "mean":
    float(ds["psl"].mean().compute())
"""


# -- the files ----------------------------------------------------------------------------------


def write_day(path: Path, day: int) -> None:
    """One daily file of the four variables, written whole then renamed into place."""
    import netCDF4
    import numpy as np

    lat = np.linspace(-89, 89, GRID[0], dtype="f4")
    lon = np.linspace(0, 358, GRID[1], dtype="f4")
    la, lo = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    part = path.with_suffix(".part")
    with netCDF4.Dataset(part, "w", format="NETCDF4") as nc:
        nc.setncatts({"title": "synthetic daily fields", "Conventions": "CF-1.8"})
        nc.source = f"day {day}"
        nc.createDimension("time", None)
        nc.createDimension("lat", GRID[0])
        nc.createDimension("lon", GRID[1])
        time_ = nc.createVariable("time", "f8", ("time",))
        time_.setncatts({"units": "days since 1970-01-01", "calendar": "standard"})
        time_[0] = float(day)
        nc.createVariable("lat", "f4", ("lat",))[:] = lat
        nc.createVariable("lon", "f4", ("lon",))[:] = lon
        for k, name in enumerate(NAMES):
            var = nc.createVariable(
                name, "f4", ("time", "lat", "lon"), zlib=True, shuffle=True, chunksizes=(1, *GRID)
            )
            var.units = "K"
            var[0] = np.round(280 + 20 * np.cos(la) * np.sin(lo * (k + 1) + day / 30.0), 1)
    part.rename(path)


def _write_days(args: tuple[Path, list[int]]) -> None:
    folder, days = args
    for day in days:
        path = folder / f"day_{day:05d}.nc"
        if not path.exists():
            write_day(path, day)


def ensure_files(folder: Path, days: range) -> list[Path]:
    """The files of ``days`` in ``folder`` (written where missing, on every CPU)."""
    from concurrent.futures import ProcessPoolExecutor

    folder.mkdir(parents=True, exist_ok=True)
    wanted = [d for d in days if not (folder / f"day_{d:05d}.nc").exists()]
    if wanted:
        progress(f"writing {len(wanted):,} files into {folder}")
        parts = [(folder, wanted[k : k + 200]) for k in range(0, len(wanted), 200)]
        with ProcessPoolExecutor() as pool:
            list(pool.map(_write_days, parts))
    return [folder / f"day_{d:05d}.nc" for d in days]


def warm(paths: list[Path]) -> None:
    for path in paths:
        path.read_bytes()


# -- measuring ----------------------------------------------------------------------------------


@dataclass
class Row:
    wall: float
    cpu: float
    tree_mb: float


def measured(command: list[str], cwd: Path) -> Row:
    """Run ``command``; its wall time and the peak summed RSS of its process tree."""
    import psutil

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    root = psutil.Process(child.pid)
    while child.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, sum(_rss(p) for p in [root, *root.children(recursive=True)]))
        time.sleep(0.02)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(getattr(after, f) - getattr(before, f) for f in ("ru_utime", "ru_stime"))
    assert child.stderr is not None
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {child.stderr.read().decode()[-500:]}")
    return Row(wall, cpu, peak / 2**20)


def _rss(process: object) -> int:
    try:
        return int(process.memory_info().rss)  # type: ignore[attr-defined]
    except Exception:  # gone meanwhile
        return 0


def refzarr_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "refzarr", *args]


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Trial:
    """The steps on one file count, in a scratch folder."""

    def __init__(self, files: Path, new: Path, scratch: Path, count: int) -> None:
        self.files, self.new, self.scratch, self.count = files, new, scratch, count
        self.sizes: dict[str, int] = {}

    def glob(self, folder: Path, count: int) -> list[str]:
        return [str(p) for p in sorted(folder.glob("day_*.nc"))[:count]]

    def run(self, step: str) -> Row:
        kind = step.split()[-1]
        outputs = {"parquet": "set.parq", "json": "set.json", "icechunk": "set.icechunk"}
        if step.startswith("scan"):
            out = self.scratch / outputs[kind]
            shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
            names = [Path(p).name for p in self.glob(self.files, self.count)]  # short argv
            extra = ["--format", "icechunk"] if kind == "icechunk" else []
            row = measured(
                refzarr_command("scan", *names, "--concat-dim", "time", "-o", str(out)) + extra,
                self.files,
            )
            self.sizes[kind] = size_of(out)
            return row
        if step in ("open", "point", "map", "mean"):
            script = self.scratch / "read.py"
            script.write_text(READ)
            return measured([sys.executable, str(script), step, "set.parq"], self.scratch)
        if step.startswith("append"):
            source, copy = self.scratch / outputs[kind], self.scratch / f"appended-{outputs[kind]}"
            _replace_with_copy(source, copy)
            new = [str(p) for p in sorted(self.new.glob("day_*.nc"))]
            return measured(
                refzarr_command("scan", *new, "--append-dim", "time", "-o", str(copy))
                + (["--format", "icechunk"] if kind == "icechunk" else []),
                self.scratch,
            )
        if step == "refresh":
            os.utime(self.glob(self.files, 1)[0])  # one source changed: scanned again
            return measured(refzarr_command("refresh", "set.parq"), self.scratch)
        if step == "validate --sources":
            return measured(refzarr_command("validate", "set.parq", "--sources"), self.scratch)
        if step == "info":
            return measured(refzarr_command("info", "set.parq"), self.scratch)
        if step == "cat":
            return measured(refzarr_command("cat", "set.parq", "tas/.zarray"), self.scratch)
        raise ValueError(step)


def _replace_with_copy(source: Path, copy: Path) -> None:
    if copy.is_dir():
        shutil.rmtree(copy)
    elif copy.exists():
        copy.unlink()
    if source.is_dir():
        shutil.copytree(source, copy)
    else:
        shutil.copy2(source, copy)


# -- the run ------------------------------------------------------------------------------------


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the trial for every file count; print one table."""
    args = parse_args(argv)
    files = ensure_files(args.cache / "days", range(max(args.files)))
    new = ensure_files(args.cache / "new", range(max(args.files), max(args.files) + NEW_DAYS))
    warm(files + new)
    rows = [["files", "step", "wall s", "cpu s", "per file ms", "tree MB", "load"]]
    sizes: list[str] = []
    for count in args.files:
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as scratch:
            trial = Trial(args.cache / "days", args.cache / "new", Path(scratch), count)
            for step in args.steps:
                found = [trial.run(step) for _ in range(args.repeat)]
                wall = statistics.median(r.wall for r in found)
                cpu = statistics.median(r.cpu for r in found)
                tree = statistics.median(r.tree_mb for r in found)
                load = os.getloadavg()[0]
                progress(f"{count:,} files, {step}: {wall:.2f} s, cpu {cpu:.2f} s, {tree:.0f} MB")
                per = f"{cpu / count * 1e3:.2f}"
                rows.append(
                    [
                        f"{count:,}",
                        step,
                        f"{wall:.2f}",
                        f"{cpu:.2f}",
                        per,
                        f"{tree:.0f}",
                        f"{load:.1f}",
                    ]
                )
            sizes += [f"{count:,} files, {k}: {v / 2**10:,.0f} KiB" for k, v in trial.sizes.items()]
    print(table(rows))
    print("\n".join(sizes))
    return 0


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if k < 2 else cell.rjust(w)
            for k, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="1000,5000", help="file counts, e.g. 1000,20000")
    parser.add_argument("--repeat", type=int, default=1, help="runs per step (median)")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"from {','.join(STEPS)}")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where the files are kept")
    args = parser.parse_args(argv)
    try:
        args.files = [int(part) for part in args.files.split(",") if part.strip()]
    except ValueError:
        parser.error(f"--files: expected comma-separated integers, got {args.files!r}")
    if not args.files or min(args.files) < 2 or args.repeat < 1:
        parser.error("--files needs counts of at least 2 and --repeat at least 1")
    args.steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = sorted(set(args.steps) - set(STEPS))
    if unknown:
        parser.error(f"unknown steps {unknown}; choose from {','.join(STEPS)}")
    args.cache = args.cache.resolve()
    return args


if __name__ == "__main__":
    sys.exit(main())
