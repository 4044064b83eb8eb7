"""refzarr end to end on the real path: an archive of daily netCDF4 files -> ``refzarr scan``
-> one JSON and one Parquet reference set -> xarray, through refzarr and through fsspec.

Run with ``make demo``. The demo writes 30 daily netCDF4 files with netCDF4-python (``air``
float32 ``(1, 64, 128)`` zlib-compressed, CF ``time`` in "days since 2020-01-01", ``lat``,
``lon``) into ``examples/.cache/demo/`` (once; delete it to regenerate), runs the installed
``refzarr scan <dir>/*.nc --concat-dim time`` command for JSON and for Parquet, opens both
reference sets with `refzarr.open_dataset` and with fsspec's ``reference://`` filesystem +
xarray's zarr engine, and checks that every one is identical to
``xr.open_mfdataset(files, combine="by_coords")``, with timings. It exits non-zero on any
mismatch.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import xarray as xr

import refzarr

CACHE = Path(__file__).resolve().parent / ".cache" / "demo"
OUTPUT = Path(__file__).resolve().parent.parent / "demo-output"
DAYS = 30
GRID = (64, 128)


# -- 1. the archive ---------------------------------------------------------------------------


def write_archive(folder: Path, days: int = DAYS) -> list[Path]:
    """``days`` daily netCDF4 files in ``folder`` (written once, in a child process: netCDF4
    and h5py each bundle an HDF5 library, and this process uses h5py through refzarr)."""
    files = [folder / f"air_{day:03d}.nc" for day in range(days)]
    if not all(path.exists() for path in files):
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, __file__, "--write", str(folder)], check=True)
    return files


def _write_files(folder: Path) -> None:
    import netCDF4

    ny, nx = GRID
    for day in range(DAYS):
        with netCDF4.Dataset(folder / f"air_{day:03d}.nc", "w", format="NETCDF4") as nc:
            nc.setncatts({"title": "daily air temperature (synthetic)", "Conventions": "CF-1.8"})
            nc.createDimension("time", None)
            nc.createDimension("lat", ny)
            nc.createDimension("lon", nx)
            t = nc.createVariable("time", "f8", ("time",))
            t.setncatts({"units": "days since 2020-01-01", "calendar": "standard"})
            t[:] = [day]
            lat = nc.createVariable("lat", "f4", ("lat",))
            lat.units = "degrees_north"
            lat[:] = np.linspace(-88.6, 88.6, ny)
            lon = nc.createVariable("lon", "f4", ("lon",))
            lon.units = "degrees_east"
            lon[:] = np.linspace(0, 357.2, nx)
            air = nc.createVariable("air", "f4", ("time", "lat", "lon"), zlib=True)
            air.setncatts({"units": "K", "long_name": "air temperature at 2 m"})
            y, x = np.meshgrid(np.linspace(-1, 1, ny), np.linspace(0, 6.28, nx), indexing="ij")
            air[0] = (270 + 25 * np.cos(1.5 * y) + 5 * np.sin(x + day / 5)).astype("f4")


# -- 2. the command ---------------------------------------------------------------------------


def refzarr_command() -> str:
    """The installed ``refzarr`` script next to this interpreter."""
    command = Path(sys.executable).with_name("refzarr")
    if not command.exists():
        raise SystemExit("the refzarr command is not installed: pip install -e .")
    return str(command)


def scan_command(pattern: str, out: Path, *extra: str) -> list[str]:
    return [refzarr_command(), "scan", pattern, "--concat-dim", "time", "-o", str(out), *extra]


# -- 3. opening and comparing -----------------------------------------------------------------


def through_refzarr(refs: Path) -> xr.Dataset:
    return refzarr.open_dataset(refs)


def through_fsspec(refs: Path) -> xr.Dataset:
    return xr.open_dataset(
        "reference://",
        engine="zarr",
        backend_kwargs={"consolidated": False, "storage_options": {"fo": str(refs)}},
    )


@contextmanager
def timed(label: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    print(f"  {label:<52} {time.perf_counter() - started:7.3f} s")


def compare(
    label: str, open_: Callable[[Path], xr.Dataset], refs: Path, expected: xr.Dataset
) -> bool:
    """Open ``refs`` with ``open_``, load every value, compare with ``expected``."""
    try:
        with timed(f"{label}: open + load every value"), open_(refs) as ds:
            ds.load()
        xr.testing.assert_identical(ds, expected)
    except Exception as exc:  # report every failure, then exit non-zero
        print(f"  {label}: FAILED: {type(exc).__name__}: {exc}")
        return False
    print(f"  {label}: identical to xr.open_mfdataset: OK")
    return True


# -- main -------------------------------------------------------------------------------------


def main() -> int:
    """Run the demo; 0 when every check passes."""
    started = time.perf_counter()
    files = write_archive(CACHE)
    shutil.rmtree(OUTPUT, ignore_errors=True)
    OUTPUT.mkdir()
    print(f"refzarr {refzarr.__version__} demo: {len(files)} daily netCDF4 files in {CACHE}")
    if not hasattr(importlib.import_module("refzarr.combine"), "combine"):
        print("refzarr.combine is not available yet: cannot combine the archive")
        return 1
    pattern = str(CACHE / "*.nc")
    outputs = {"json": OUTPUT / "air.json", "parquet": OUTPUT / "air.parq"}
    for format_, out in outputs.items():
        command = scan_command(pattern, out, "--format", format_)
        print("$ refzarr " + " ".join(command[1:]))
        with timed(f"refzarr scan + combine + write ({format_})"):
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr.strip())
            return 1
        print("  " + done.stdout.strip())
    with timed("xr.open_mfdataset(files, combine='by_coords') + load"):
        expected = xr.open_mfdataset(files, combine="by_coords").load()
    with through_refzarr(outputs["parquet"]) as ds:
        print(ds)
    results = [
        compare(f"{opener} {format_}", open_, out, expected)
        for format_, out in outputs.items()
        for opener, open_ in (("refzarr", through_refzarr), ("fsspec", through_fsspec))
    ]
    seconds = time.perf_counter() - started
    if not all(results):
        print(f"{results.count(False)} of {len(results)} checks FAILED ({seconds:.1f} s)")
        return 1
    print(f"all {len(results)} checks passed ({seconds:.1f} s)")
    return 0


def _cli(argv: list[str]) -> int:
    if argv[:1] == ["--write"]:
        _write_files(Path(argv[1]))
        return 0
    return main()


if __name__ == "__main__":
    sys.exit(_cli(sys.argv[1:]))
