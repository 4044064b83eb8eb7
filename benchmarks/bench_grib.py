"""Scanning GRIB files: refzarr against kerchunk's ``scan_grib`` (+ ``grib_tree``) and a bare
ecCodes loop reading only the keys that place each field.

Files, measured in one run:

- the corpus's ERA5 2 m temperature file (GRIB1, 744 messages);
- a generated GRIB2 file of 500 messages (the corpus's GEFS soil-moisture field at 500 steps;
  kept in ``benchmarks/.cache/grib/``).

The tools, each as its documentation shows:

- refzarr: ``refzarr.scan(path)`` (groups, coordinates, lat/lon included);
- kerchunk: ``scan_grib(path)`` then ``grib_tree(...)`` on its messages;
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
TOOLS = ("refzarr", "kerchunk", "eccodes")
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

run = globals()[f"run_{tool}"]
run(warm)
best, found = float("inf"), 0
for _ in range(repeat):
    t0 = time.perf_counter()
    found = run(path)
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"seconds": best, "found": found}))
"""


def generated(count: int = 500) -> Path:
    """A GRIB2 file of ``count`` messages: one GEFS field at steps 0, 3, 6, ... hours."""
    path = CACHE / f"gefs-{count}.grib2"
    if path.exists():
        return path
    import eccodes

    CACHE.mkdir(parents=True, exist_ok=True)
    source = (CORPUS / "gec00_20250101_00_soilw.grib2").read_bytes()
    parts = []
    for k in range(count):
        handle = eccodes.codes_new_from_message(source)
        try:
            eccodes.codes_set(handle, "forecastTime", 3 * k)
            parts.append(eccodes.codes_get_message(handle))
        finally:
            eccodes.codes_release(handle)
    path.write_bytes(b"".join(parts))
    return path


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
        results = {tool: measure(tool, path, args.repeat) for tool in tools}
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
