"""The kit shared by the netCDF3 scanner tests: write files with netCDF4-python, read them back
through refzarr and through fsspec + zarr, and compare with netCDF4-python (raw) and xarray
(decoded)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import xarray as xr
import zarr

import refzarr
from refzarr import RefArray, RefGroup
from refzarr.model.attr_types import typed_attributes
from roundtrip import open_zarr_group

__all__ = [
    "FORMATS",
    "Truth",
    "array",
    "assert_decoded_matches",
    "assert_group_matches",
    "assert_raw_equal",
    "read_truth",
    "write_nc",
]

FORMATS = ("NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA")
"""netCDF4-python's names of CDF-1, CDF-2 and CDF-5."""

Writer = Callable[[netCDF4.Dataset], None]


def write_nc(path: Path, writer: Writer, format: str = "NETCDF3_CLASSIC") -> Path:
    """A netCDF3 file written by ``writer`` with netCDF4-python."""
    with netCDF4.Dataset(path, "w", format=format) as ds:
        writer(ds)
    return path


@dataclass
class Truth:
    """What netCDF4-python shows of a file, undecoded: dims, attributes, variables in order."""

    dimensions: dict[str, int]
    attributes: dict[str, Any]
    variables: dict[str, tuple[tuple[str, ...], np.ndarray, dict[str, Any]]]


def read_truth(path: Path) -> Truth:
    """netCDF4-python's raw view (no mask/scale, no char-to-string)."""
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_maskandscale(False)
        ds.set_auto_chartostring(False)
        variables = {}
        for name, var in ds.variables.items():
            values = np.asarray(var[...])
            variables[name] = (var.dimensions, values, {k: var.getncattr(k) for k in var.ncattrs()})
        return Truth(
            {name: len(dim) for name, dim in ds.dimensions.items()},
            {k: ds.getncattr(k) for k in ds.ncattrs()},
            variables,
        )


def array(group: RefGroup, name: str) -> RefArray:
    node = group[name]
    assert isinstance(node, RefArray)
    return node


def assert_attrs_equal(got: Any, expected: Any, where: str) -> None:
    """Equal attribute mappings: same names in the same order, numbers of the same numpy type
    once the types recorded in ``_nczarr_attr`` are applied (as refzarr's engine does)."""
    typed = typed_attributes(got)
    assert list(typed) == list(expected), (
        f"{where}: attribute names {list(typed)} != {list(expected)}"
    )
    for key, value in expected.items():
        mine = typed[key]
        if key == "_FillValue" and isinstance(value, bytes):
            assert mine.encode("utf-8") == value, f"{where}@{key}"
            continue
        if isinstance(value, str):
            assert mine == value, f"{where}@{key}: {mine!r} != {value!r}"
            continue
        want = np.asarray(value)
        have = np.asarray(mine)
        assert have.shape == want.shape, f"{where}@{key}: {mine!r} != {value!r}"
        assert have.dtype == want.dtype, f"{where}@{key}: {have.dtype} != {want.dtype}"
        np.testing.assert_array_equal(have, want, strict=True, err_msg=f"{where}@{key}")


def assert_raw_equal(got: np.ndarray, expected: np.ndarray, where: str) -> None:
    """Identical values; ``got`` in the stored (big-endian) byte order of ``expected``'s type."""
    # a 0-d read comes back as a numpy scalar, in native byte order
    want = _stored(expected.dtype) if got.ndim else expected.dtype
    assert got.dtype == want, f"{where}: dtype {got.dtype.str} != {want.str}"
    np.testing.assert_array_equal(got, expected, strict=False, err_msg=where)
    assert got.shape == expected.shape, where


def _stored(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return dtype if dtype.itemsize == 1 else dtype.newbyteorder(">")


def assert_group_matches(group: RefGroup, truth: Truth, where: str) -> None:
    """The scanned group's layout is netCDF4's: variables in order, dims, attributes."""
    assert list(group.members) == list(truth.variables), where
    assert_attrs_equal(group.attributes, truth.attributes, f"{where}: global")
    for name, (dims, values, attrs) in truth.variables.items():
        meta = array(group, name).meta
        assert meta.dimension_names == tuple(dims), f"{where}: {name}"
        assert meta.shape == values.shape, f"{where}: {name}"
        assert meta.dtype == _stored(values.dtype), f"{where}: {name}"
        assert_attrs_equal(meta.attributes, attrs, f"{where}: {name}")


def read_every_way(
    group: RefGroup, tmp_path: Path, *, written: bool = True
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(how, {name: values}) through refzarr's store, and fsspec + zarr on JSON and Parquet
    (``written=False``: the store only)."""
    store_root = zarr.open_group(refzarr.ReferenceStore(group), mode="r", zarr_format=2)
    yield "ReferenceStore", _read_all(store_root, group)
    for suffix in (".json", ".parq") if written else ():
        target = tmp_path / f"refs{suffix}"
        refzarr.write(group, target)
        yield f"fsspec+zarr{suffix}", _read_all(open_zarr_group(target), group)


def _read_all(root: zarr.Group, group: RefGroup) -> dict[str, Any]:
    out = {}
    for name in group.members:
        node = root[name]
        assert isinstance(node, zarr.Array)
        out[name] = np.asarray(node[...])
    return out


def assert_values_match(
    group: RefGroup, truth: Truth, tmp_path: Path, where: str, *, written: bool = True
) -> None:
    """Every variable reads as netCDF4-python reads it, every way (see `read_every_way`)."""
    for how, values in read_every_way(group, tmp_path, written=written):
        for name, (_, expected, _) in truth.variables.items():
            assert_raw_equal(values[name], expected, f"{where} via {how}: {name}")


def assert_decoded_matches(group: RefGroup, path: Path, json_path: Path | None = None) -> None:
    """xarray's decoded view through refzarr (and through ``engine="refzarr"`` on the JSON)
    equals ``xr.open_dataset(path)``: variable order, values, dtypes (a ``short`` packed with
    a ``float`` ``scale_factor`` decodes to float32), attributes, what is masked, and the
    unlimited dimension."""
    ours = [refzarr.open_dataset(group)]
    if json_path is not None:
        ours.append(xr.open_dataset(json_path, engine="refzarr"))
    with xr.open_dataset(path) as direct:
        direct.load()
        for got in ours:
            with got:
                got.load()
                assert list(got.variables) == list(direct.variables), path
                xr.testing.assert_identical(got, direct)
                for name, var in [(None, direct), *direct.variables.items()]:
                    mine = got if name is None else got[name]
                    assert name is None or mine.dtype == var.dtype, f"{path}: {name}"
                    for key, value in var.attrs.items():
                        kind = np.asarray(mine.attrs[key]).dtype
                        assert kind == np.asarray(value).dtype, f"{path}: {name}@{key}"
                assert got.encoding.get("unlimited_dims", set()) == direct.encoding.get(
                    "unlimited_dims", set()
                ), path


def nchunks(arr: RefArray) -> int:
    return math.prod(arr.manifest.grid_shape)
