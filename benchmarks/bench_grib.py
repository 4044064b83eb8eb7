"""Scanning GRIB files: refzarr against kerchunk's ``scan_grib`` (+ ``grib_tree``) and a bare
ecCodes loop reading only the keys that place each field.

Files, measured in one run:

- the corpus's ERA5 2 m temperature file (GRIB1, 744 messages);
- a generated GRIB2 file of 500 messages (the corpus's GEFS soil-moisture field at 500 steps;
  kept in ``benchmarks/.cache/grib/``).

The tools, each as its documentation shows:

- refzarr: ``refzarr.scan(path)`` (groups, coordinates, lat/lon included);
- kerchunk: ``scan_grib(path)`` then ``grib_tree(...)`` on its messages;
- idx: refzarr building the second file of a run from its wgrib2 ``.idx`` sidecar once the
  first file was scanned (`refzarr.scan.grib.scan_indexed`; only the second file is timed);
- ecCodes: ``codes_grib_new_from_file`` in a loop, reading shortName, paramId, stepType,
  typeOfLevel, level, dataDate, dataTime, endStep and number of each message: the floor for
  anything that asks ecCodes for keys.

Every measurement runs in a fresh Python process (kerchunk has hung on GRIB files: each run has
a time limit). Before the clock starts the process imports the tool and scans a small GRIB file
once (ecCodes loads its definition files on first use). Times are the best of ``--repeat``
runs; ``found`` is how many fields the tool's result references.

Usage::

    python benchmarks/bench_grib.py
    python benchmarks/bench_grib.py --repeat 1 --tools refzarr,eccodes
"""

from __future__ import annotations

import argparse
import json
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

RUNNER = r"""
import json, sys, time
tool, path, warm, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def run_refzarr(p):
    import refzarr
    group = refzarr.scan(p)
    return sum(int((a.manifest.path_id >= 0).sum()) for _, a in group.arrays()
               if a.meta.codecs and a.meta.codecs[-1]["id"] == "refzarr.grib")

def run_kerchunk(p):
    from kerchunk.grib2 import grib_tree, scan_grib
    messages = scan_grib(p)
    grib_tree(messages)
    return len(messages)

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
    return n

def run_idx(p):
    # the second file of a run, built from its sidecar once the first was scanned: only that
    # is timed (TIMED), the first file's scan is not
    global TIMED
    from refzarr.scan.grib.index import _placements, _read_index, _agrees_with_scan
    from refzarr.scan.grib.scanner import GribScanner
    scanner = GribScanner()
    _, recording = scanner.scan_recorded(p)
    reference = _read_index(p + ".idx", None)
    assert reference is not None and _agrees_with_scan(reference, recording)
    other = p.replace(".grib2", "-b.grib2")
    t0 = time.perf_counter()
    entries = _read_index(other + ".idx", None)
    placed = _placements(recording, reference, entries, other, None)
    group = scanner.from_placements(other, placed, recording.grids)
    TIMED = time.perf_counter() - t0
    return sum(int((a.manifest.path_id >= 0).sum()) for _, a in group.arrays()
               if a.meta.codecs and a.meta.codecs[-1]["id"] == "refzarr.grib")

TIMED = None
run = globals()[f"run_{tool}"]
if tool != "idx":
    run(warm)
best, found = float("inf"), 0
for _ in range(repeat):
    t0 = time.perf_counter()
    found = run(path)
    best = min(best, TIMED if TIMED is not None else time.perf_counter() - t0)
print(json.dumps({"seconds": best, "found": found}))
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


def measure(tool: str, path: Path, repeat: int) -> dict[str, Any]:
    command = [sys.executable, "-c", RUNNER, tool, str(path), str(WARM), str(repeat)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"error": f"no result after {TIMEOUT} s"}
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1][:60]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tools", default=",".join(TOOLS))
    args = parser.parse_args()
    tools = args.tools.split(",")
    files = {"ERA5 GRIB1, 744 msgs": ERA5, "GEFS GRIB2, 500 msgs": generated()}
    print(f"{'file':<24} {'tool':<10} {'seconds':>8} {'found':>6} {'vs ecCodes':>11}")
    for label, path in files.items():
        has_index = Path(f"{path}.idx").exists()
        results = {
            tool: measure(tool, path, args.repeat) for tool in tools if tool != "idx" or has_index
        }
        floor = results.get("eccodes", {}).get("seconds")
        for tool, result in results.items():
            if "error" in result:
                print(f"{label:<24} {tool:<10} {result['error']}")
                continue
            ratio = f"{result['seconds'] / floor:.2f}x" if floor else "-"
            print(
                f"{label:<24} {tool:<10} {result['seconds']:>8.3f} {result['found']:>6} {ratio:>11}"
            )


if __name__ == "__main__":
    main()
