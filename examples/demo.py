"""refzarr end to end: netCDF4-style files -> references -> JSON and Parquet -> values checked.

Run with ``make demo``. The demo writes three small HDF5 files shaped like netCDF4 (dimension
scales, gzip+shuffle chunks, a contiguous variable, a partly written variable whose missing
chunks read as the NaN fill value, attributes, a subgroup with phony dimension names) into
``demo-output/``, references every array with `refzarr.scan`, writes each reference set as
kerchunk JSON and as Parquet, reads them back with `refzarr.read`, and opens them with fsspec's
``ReferenceFileSystem`` + xarray to compare every value with what h5py reads from the source.
It exits non-zero on any mismatch.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import h5py
import numpy as np
import xarray as xr

import refzarr
from refzarr import RefGroup

OUTPUT = Path(__file__).resolve().parent.parent / "demo-output"
FORMATS = {"json": ".json", "parquet": ".parq"}


# -- 1. sample files -------------------------------------------------------------------------


def write_sample(path: Path, number: int) -> Path:
    """A small netCDF4-style file: coordinates as dimension scales, compressed variables."""
    rng = np.random.default_rng(number)
    with h5py.File(path, "w") as f:
        f.attrs["title"] = f"refzarr demo file {number}"
        f.attrs["Conventions"] = "CF-1.8"
        time_ = _scale(f, "time", np.arange(6.0) + 6 * number, units="hours since 2000-01-01")
        lat = _scale(f, "lat", np.linspace(-30, 30, 4, dtype="f4"), units="degrees_north")
        lon = _scale(f, "lon", np.linspace(0, 40, 5, dtype="f4"), units="degrees_east")
        dims = (time_, lat, lon)
        temp = _variable(f, "temperature", dims, chunks=(2, 2, 5), units="K")
        temp[...] = 280 + 10 * rng.random(temp.shape, dtype="f4")
        rain = _variable(f, "precipitation", dims, chunks=(3, 4, 5), units="mm")
        rain[:3] = rng.random((3, 4, 5), dtype="f4")  # the chunk of time 3..5 is never written
        quality = f.create_dataset("quality", data=rng.integers(0, 4, (4, 5), dtype="i2"))
        quality.attrs["flag_meanings"] = "good fair poor bad"
        for axis, scale in enumerate((lat, lon)):
            quality.dims[axis].attach_scale(scale)
        sub = f.create_group("diagnostics")
        sub.attrs["comment"] = "dimensions without scales get phony names"
        cloud = sub.create_dataset("cloud_fraction", data=rng.random((4, 5)), chunks=(2, 5))
        cloud.attrs["units"] = "1"
    return path


def _scale(f: h5py.File, name: str, values: np.ndarray, *, units: str) -> h5py.Dataset:
    ds = f.create_dataset(name, data=values)
    ds.make_scale(name)
    ds.attrs["units"] = units
    return ds


def _variable(
    f: h5py.File, name: str, dims: tuple[h5py.Dataset, ...], *, chunks: tuple[int, ...], units: str
) -> h5py.Dataset:
    shape = tuple(len(d) for d in dims)
    ds = f.create_dataset(
        name, shape, "f4", chunks=chunks, compression="gzip", shuffle=True, fillvalue=np.nan
    )
    for axis, scale in enumerate(dims):
        ds.dims[axis].attach_scale(scale)
    ds.attrs["units"] = units
    return ds


# -- 2. references: refzarr.scan reads each file's chunk index ---------------------------------
#
# The helpers below describe the source the way h5py sees it, to check what the references say.

HDF5_INTERNAL_ATTRS = {"CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid"}


def _dimension_names(ds: h5py.Dataset) -> list[str]:
    """The attached dimension scale of each axis, else a phony name (as netCDF readers do)."""
    if ds.is_scale:
        return [ds.name.rpartition("/")[2]]
    names = []
    for axis, dim in enumerate(ds.dims):
        scales = list(dim.values())
        names.append(scales[0].name.rpartition("/")[2] if scales else f"phony_dim_{axis}")
    return names


def _attributes(attrs: h5py.AttributeManager) -> dict[str, Any]:
    """User attributes as JSON values (HDF5 dimension-scale bookkeeping left out)."""
    return {k: _json(v) for k, v in attrs.items() if k not in HDF5_INTERNAL_ATTRS}


def _json(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray):
        return [_json(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return _json(value.item())
    return value


# -- 3. write, read back, check through fsspec + xarray --------------------------------------


class Mismatch(Exception):
    """Values read through the references differ from the source file."""


def check(source: Path, group: RefGroup, refs: Path) -> list[str]:
    """Check one written reference set; return the variables checked, raise on a mismatch."""
    if refzarr.read(refs) != group:
        raise Mismatch(f"{refs.name}: refzarr.read does not give back the group written")
    fs = fsspec.filesystem("reference", fo=str(refs), skip_instance_cache=True)
    checked = []
    with h5py.File(source, "r") as h5:
        for path, _ in group.groups():
            with _open(fs, path) as ds:
                checked += [_compare(h5, ds, path, name) for name in ds.variables]
    return checked


def _open(fs: Any, group: str) -> xr.Dataset:
    """The group through zarr-python + xarray, values as stored (no CF decoding)."""
    return xr.open_dataset(
        fs.get_mapper(group),
        engine="zarr",
        consolidated=False,
        mask_and_scale=False,
        decode_times=False,
    )


def _compare(h5: h5py.File, ds: xr.Dataset, group: str, name: Any) -> str:
    path = f"{group}/{name}" if group else str(name)
    source, seen = h5[path], ds[name]
    expected = source[()]
    if seen.dtype != expected.dtype or not np.array_equal(seen.values, expected, equal_nan=True):
        raise Mismatch(f"{path}: values differ from the source")
    if seen.dims != tuple(_dimension_names(source)):
        raise Mismatch(f"{path}: dimensions {seen.dims} differ from the source")
    for key, value in _attributes(source.attrs).items():
        if seen.attrs.get(key) != value:
            raise Mismatch(f"{path}: attribute {key!r} is {seen.attrs.get(key)!r}, not {value!r}")
    return path


# -- main ------------------------------------------------------------------------------------


def run_checks(output: Path) -> Iterator[bool]:
    """Write, read and check every sample in every format, printing one line per check."""
    for number in range(3):
        source = write_sample(output / f"sample_{number}.nc", number)
        group = refzarr.scan(source)
        for format_, suffix in FORMATS.items():
            refs = output / f"{source.stem}{suffix}"
            label = f"  {source.name}  {format_:<8}"
            try:
                refzarr.write(group, refs)
                checked = check(source, group, refs)
            except Exception as exc:  # report every failure, then exit non-zero
                print(f"{label} FAILED: {type(exc).__name__}: {exc}")
                yield False
                continue
            names = ", ".join(sorted(checked))
            print(f"{label} {len(checked)} variables equal to the source ({names}): OK")
            yield True


def main() -> int:
    """Run the demo; 0 when every check passes."""
    started = time.perf_counter()
    shutil.rmtree(OUTPUT, ignore_errors=True)
    OUTPUT.mkdir()
    print(f"refzarr {refzarr.__version__} demo: 3 netCDF4-style files in {OUTPUT}")
    results = list(run_checks(OUTPUT))
    seconds = time.perf_counter() - started
    failed = results.count(False)
    if failed:
        print(f"{failed} of {len(results)} checks FAILED ({seconds:.1f} s)")
        return 1
    print(f"all {len(results)} checks passed ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
