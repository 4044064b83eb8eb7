"""Scanning GRIB files: refzarr against kerchunk's ``scan_grib`` (+ ``grib_tree``), a bare
ecCodes loop reading only the keys that place each field, and refzarr's ``.idx`` path.

Files, measured in one run:

- the corpus's ERA5 2 m temperature file (GRIB1, 744 messages);
- a generated GRIB2 file of 500 messages (the corpus's GEFS soil-moisture field at 500 steps)
  with its wgrib2 ``.idx``.

Both are copied or generated in ``benchmarks/.cache/grib/`` with a second file of the same
layout a day (ERA5: a year) later (``-b``), each with a sidecar (ERA5: ECMWF JSON lines).

The tools, each as its documentation shows:

- refzarr: ``refzarr.scan(path)`` (groups, coordinates, lat/lon included);
- kerchunk: ``scan_grib(path)`` then ``grib_tree(...)`` on its messages;
- ecCodes: ``codes_grib_new_from_file`` in a loop, reading shortName, paramId, stepType,
  typeOfLevel, level, dataDate, dataTime, endStep and number of each message: the floor for
  anything that asks ecCodes for keys;
- idx: ``refzarr.scan_many([file, file_b], grib_index="auto", executor="serial")``, timed
  without the full scan of the first file: what the second file costs (its sidecar and the
  head of its last message read, its group built; no message read).

Every measurement runs in a fresh Python process (kerchunk has hung on GRIB files: each run has
a time limit). Before the clock starts the process imports the tool and scans a small GRIB file
once (ecCodes loads its definition files on first use). Times are the median (and best) of
``--repeat`` runs; ``found`` is how many fields the tool's result references (idx: of the
second file). The load average is printed: the machine is shared.

Usage::

    python benchmarks/bench_grib.py
    python benchmarks/bench_grib.py --repeat 1 --tools refzarr,idx
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "grib"
CORPUS = (HERE.parent / ".." / "shared" / "corpus" / "files" / "grib").resolve()
ERA5 = CORPUS / "era5-2mt-2019-03-uk.grib"
WARM = CORPUS / "fields_with_missing_values.grib"
TOOLS = ("refzarr", "kerchunk", "eccodes", "idx")
TIMEOUT = 300
"""Seconds a tool may take per run (kerchunk has hung on GRIB files)."""

RUNNER = r"""
import json, statistics, sys, time
tool, path, warm, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def fields(group):
    return sum(int((a.manifest.path_id >= 0).sum()) for _, a in group.arrays()
               if a.meta.codecs and a.meta.codecs[-1]["id"] == "refzarr.grib")

def run_refzarr(p):
    import refzarr
    return fields(refzarr.scan(p)), None

def run_kerchunk(p):
    from kerchunk.grib2 import grib_tree, scan_grib
    messages = scan_grib(p)
    grib_tree(messages)
    return len(messages), None

def run_eccodes(p):
    import eccodes
    keys = ("shortName", "paramId", "stepType", "typeOfLevel", "level", "dataDate",
            "dataTime", "endStep")
    n = 0
    with open(p, "rb") as f:
        while (h := eccodes.codes_grib_new_from_file(f)) is not None:
            for k in keys:
                eccodes.codes_get(h, k)
            if eccodes.codes_is_defined(h, "number"):
                eccodes.codes_get(h, "number")
            eccodes.codes_release(h)
            n += 1
    return n, None

def run_idx(p):
    # scan_many over the file and its "-b" twin; the first file's full scan is not timed
    import refzarr
    from refzarr.scan.grib.scanner import GribScanner
    original, spent = GribScanner.scan_recorded, []
    def timed(self, url):
        t = time.perf_counter()
        try:
            return original(self, url)
        finally:
            spent.append(time.perf_counter() - t)
    GribScanner.scan_recorded = timed
    stem, _, suffix = p.rpartition(".")
    t0 = time.perf_counter()
    results = refzarr.scan_many([p, f"{stem}-b.{suffix}"], grib_index="auto",
                                executor="serial", progress=False)
    seconds = time.perf_counter() - t0 - sum(spent)
    GribScanner.scan_recorded = original
    assert len(spent) == 1, f"{len(spent)} files scanned: the sidecar was not used"
    return fields(results[1]), seconds

run = globals()[f"run_{tool}"]
if tool == "idx":
    import refzarr
    refzarr.scan_many([warm], grib_index="auto", executor="serial", progress=False)
else:
    run(warm)
times, found = [], 0
for _ in range(repeat):
    t0 = time.perf_counter()
    found, timed = run(path)
    times.append(timed if timed is not None else time.perf_counter() - t0)
print(json.dumps({"seconds": statistics.median(times), "best": min(times), "found": found}))
"""


def generated(count: int = 500) -> Path:
    """A GRIB2 file of ``count`` messages (one GEFS field at steps 0, 3, 6, ... hours) with
    its wgrib2 sidecar, and a second file of the same layout a day later (``-b``), with its
    own."""
    path = CACHE / f"gefs-{count}.grib2"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        _write_run(path, count, 20250101)
        _write_run(CACHE / f"gefs-{count}-b.grib2", count, 20250102)
    return path


def _write_run(path: Path, count: int, date: int) -> None:
    import eccodes

    source = (CORPUS / "gec00_20250101_00_soilw.grib2").read_bytes()
    parts, lines, offset = [], [], 0
    for k in range(count):
        handle = eccodes.codes_new_from_message(source)
        try:
            eccodes.codes_set(handle, "dataDate", date)
            eccodes.codes_set(handle, "forecastTime", 3 * k)
            part = eccodes.codes_get_message(handle)
        finally:
            eccodes.codes_release(handle)
        fcst = "anl" if k == 0 else f"{3 * k} hour fcst"
        lines.append(f"{k + 1}:{offset}:d={date}00:SOILW:0-0.1 m below ground:{fcst}:")
        parts.append(part)
        offset += len(part)
    path.write_bytes(b"".join(parts))
    Path(f"{path}.idx").write_text("\n".join(lines) + "\n")


def era5_run() -> Path:
    """The ERA5 file copied with an ECMWF JSON-lines sidecar, and a twin a year later
    (``-b``) with its own."""
    path = CACHE / "era5.grib"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        _write_era5(path, 0)
        _write_era5(CACHE / "era5-b.grib", 10000)
    return path


def _write_era5(path: Path, shift: int) -> None:
    import eccodes

    parts, lines, offset = [], [], 0
    with open(ERA5, "rb") as f:
        while (handle := eccodes.codes_grib_new_from_file(f)) is not None:
            try:
                if shift:
                    date = eccodes.codes_get(handle, "dataDate") + shift
                    eccodes.codes_set(handle, "dataDate", date)
                part = bytes(eccodes.codes_get_message(handle))
                entry = {
                    "date": str(eccodes.codes_get(handle, "dataDate")),
                    "time": f"{eccodes.codes_get(handle, 'dataTime'):04d}",
                    "step": str(eccodes.codes_get(handle, "endStep")),
                    "param": eccodes.codes_get(handle, "shortName"),
                    "levtype": "sfc",
                    "_offset": offset,
                    "_length": eccodes.codes_get(handle, "totalLength"),
                }
            finally:
                eccodes.codes_release(handle)
            lines.append(json.dumps(entry))
            parts.append(part)
            offset += len(part)
    path.write_bytes(b"".join(parts))
    Path(f"{path}.idx").write_text("\n".join(lines) + "\n")


def measure(tool: str, path: Path, repeat: int) -> dict[str, Any]:
    command = [sys.executable, "-c", RUNNER, tool, str(path), str(WARM), str(repeat)]
    limit = TIMEOUT * (repeat + 1)  # the warm-up and each run: TIMEOUT at most each
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"error": f"no result after {limit} s"}
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1][:60]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    """Measure every tool on both files; print one row per tool and file."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tools", default=",".join(TOOLS))
    args = parser.parse_args(argv)
    tools = args.tools.split(",")
    files = {"ERA5 GRIB1, 744 msgs": (ERA5, era5_run()), "GEFS GRIB2, 500 msgs": generated()}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'file':<22} {'tool':<9} {'median s':>9} {'best s':>8} {'found':>6} {'vs ecCodes':>11}")
    for label, paths in files.items():
        plain, indexed = paths if isinstance(paths, tuple) else (paths, paths)
        results = {
            tool: measure(tool, indexed if tool == "idx" else plain, args.repeat) for tool in tools
        }
        floor = results.get("eccodes", {}).get("seconds")
        for tool, result in results.items():
            if "error" in result:
                print(f"{label:<22} {tool:<9} {result['error']}")
                continue
            ratio = f"{result['seconds'] / floor:.3f}x" if floor else "-"
            print(
                f"{label:<22} {tool:<9} {result['seconds']:>9.4f} {result['best']:>8.4f} "
                f"{result['found']:>6} {ratio:>11}"
            )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
