"""`refresh_icechunk` of many changed files: N small netCDF4 files combined along time into a
local Icechunk repository, then C of them touched (their times moved on) and refreshed.

Each run copies the repository as first written, touches the files, and times
`refresh_icechunk` alone (imports done before the clock starts) in a fresh process whose
``PYTHONPATH`` is ``--src`` (so an older checkout's code can be timed the same way), with the
CPU time of that process and its scanning workers (imports included). Medians of
``--repeat`` runs.

Usage::

    python benchmarks/bench_icechunk_refresh.py                  # 200 files, 100 changed
    python benchmarks/bench_icechunk_refresh.py --variables 40   # slower scans per file
    python benchmarks/bench_icechunk_refresh.py --files 50 --changed 10 --src /tmp/old/src
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_RUN = """
import sys, time
from refzarr.formats.icechunk.refresh import refresh_icechunk
t = time.perf_counter()
done = refresh_icechunk(sys.argv[1])
print(time.perf_counter() - t, len(done.changes))
"""


def _write_files(folder: Path, count: int, variables: int = 1) -> list[Path]:
    import netCDF4
    import numpy as np

    paths = []
    for k in range(count):
        path = folder / f"d{k:04d}.nc"
        with netCDF4.Dataset(path, "w") as ds:
            ds.createDimension("time", None)
            ds.createDimension("x", 8)
            ds.createVariable("time", "f8", ("time",))[:] = np.arange(4) + 4 * k
            for n in range(variables):
                v = ds.createVariable(f"v{n}", "f4", ("time", "x"), chunksizes=(2, 4))
                v[:] = np.arange(32, dtype="f4").reshape(4, 8) + k + n
        paths.append(path)
    return paths


def _touch(paths: list[Path], seconds: int) -> None:
    for path in paths:
        stat = os.stat(path)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds * 1_000_000_000))


def _one_run(repo: Path, src: str) -> tuple[float, float, int]:
    """The refresh's wall time, the CPU time of its process and workers (imports included:
    steadier than wall time on a shared machine), and the number of files refreshed."""
    env = {**os.environ, "PYTHONPATH": src}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(repo)], env=env, check=True, capture_output=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(getattr(after, f) - getattr(before, f) for f in ("ru_utime", "ru_stime"))
    seconds, changed = out.stdout.decode().split()[-2:]  # after any output of the refresh
    return float(seconds), cpu, int(changed)


def main(argv: list[str] | None = None) -> None:
    """Time refreshes of ``--changed`` of ``--files`` files; print each run and the median."""
    from refzarr.cli import main as cli

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--changed", type=int, default=100)
    parser.add_argument("--variables", type=int, default=1, help="arrays per file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-icerefresh-") as tmp:
        folder = Path(tmp) / "data"
        folder.mkdir()
        paths = _write_files(folder, args.files, args.variables)
        first = Path(tmp) / "first"
        scan = ["scan", *map(str, paths), "-o", str(first), "--format", "icechunk"]
        assert cli([*scan, "--concat-dim", "time"]) == 0
        times, cpus = [], []
        for run in range(args.repeat):
            repo = Path(tmp) / f"repo{run}"
            shutil.copytree(first, repo)
            _touch(paths[: args.changed], 5 * (run + 1))
            seconds, cpu, changed = _one_run(repo, args.src)
            assert changed == args.changed, changed
            times.append(seconds)
            cpus.append(cpu)
            load = os.getloadavg()[0]
            print(
                f"run {run}: {seconds:.2f} s, process cpu {cpu:.2f} s ({changed} of "
                f"{args.files} files refreshed; load {load:.1f})"
            )
    print(
        f"median {statistics.median(times):.2f} s, process cpu {statistics.median(cpus):.2f} s "
        f"over {args.repeat} runs, src {args.src}"
    )


if __name__ == "__main__":
    main()
