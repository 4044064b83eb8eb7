"""refzarr end to end: netCDF4-style files -> references -> JSON and Parquet -> values checked.

Run with ``make demo``. The demo writes three small HDF5 files shaped like netCDF4 (dimension
scales, gzip+shuffle chunks, a contiguous variable, a partly written variable whose missing
chunks read as the NaN fill value, attributes, a subgroup with phony dimension names) into
``demo-output/``, references every array, writes each reference set as kerchunk JSON and as
Parquet, reads them back with `refzarr.read`, and opens them with fsspec's
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
from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup

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


# -- 2. references (a stand-in: until refzarr.scan lands) ------------------------------------
#
# This minimal HDF5 walker shows the model API. It handles what the sample files hold:
# chunked datasets with gzip and shuffle, contiguous datasets, attributes, dimension scales.

HDF5_INTERNAL_ATTRS = {"CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid"}


def references_for(path: Path) -> RefGroup:
    """The `RefGroup` of an HDF5 file (every dataset, every group)."""
    url = path.resolve().as_posix()
    with h5py.File(path, "r") as f:
        return _group(f, url)


def _group(group: h5py.Group, url: str) -> RefGroup:
    members: dict[str, RefArray | RefGroup] = {}
    for name, item in group.items():
        if isinstance(item, h5py.Group):
            members[name] = _group(item, url)
        else:
            members[name] = RefArray(_meta(item), _manifest(item, url))
    return RefGroup(_attributes(group.attrs), members)


def _meta(ds: h5py.Dataset) -> ArrayMeta:
    return ArrayMeta(
        shape=ds.shape,
        chunks=ds.chunks or ds.shape,
        dtype=ds.dtype,
        fill_value=ds.fillvalue,
        codecs=_codecs(ds),
        attributes=_attributes(ds.attrs),
        dimension_names=_dimension_names(ds),
    )


def _codecs(ds: h5py.Dataset) -> list[dict[str, Any]]:
    """numcodecs configs in HDF5's encoding order: shuffle, then deflate."""
    if ds.compression not in (None, "gzip") or ds.fletcher32 or ds.scaleoffset:
        raise refzarr.UnsupportedFeatureError(f"{ds.name}: only gzip and shuffle in this demo")
    codecs: list[dict[str, Any]] = []
    if ds.shuffle:
        codecs.append({"id": "shuffle", "elementsize": ds.dtype.itemsize})
    if ds.compression == "gzip":
        codecs.append({"id": "zlib", "level": ds.compression_opts})
    return codecs


def _manifest(ds: h5py.Dataset, url: str) -> ChunkManifest:
    if ds.chunks is None:  # contiguous: one chunk, the whole array
        grid = (1,) * ds.ndim
        offset = ds.id.get_offset()
        if offset is None:  # never written
            return ChunkManifest.missing(grid)
        return ChunkManifest.from_arrays(
            [url],
            np.zeros(grid, int),
            np.full(grid, offset),
            np.full(grid, ds.id.get_storage_size()),
        )
    stored: list[Any] = []
    ds.id.chunk_iter(stored.append)  # allocated chunks only: the rest are missing
    if any(info.filter_mask for info in stored):
        raise refzarr.UnsupportedFeatureError(f"{ds.name}: a chunk skips one of its filters")
    grid = tuple(-(-size // chunk) for size, chunk in zip(ds.shape, ds.chunks, strict=True))
    return ChunkManifest.from_entries(
        grid,
        coords=np.array([info.chunk_offset for info in stored]) // np.array(ds.chunks),
        urls=[url],
        url_ids=np.zeros(len(stored), int),
        offsets=[info.byte_offset for info in stored],
        lengths=[info.size for info in stored],
    )


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
        group = references_for(source)
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
