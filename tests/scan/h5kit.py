"""The kit shared by the HDF5 scanner tests: write a file, scan it, read back, compare with h5py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import zarr

import refzarr
from refzarr import RefArray
from refzarr.scan import ScannedGroup
from refzarr.scan.hdf5_dims import is_dimension_only
from roundtrip import open_zarr_group

__all__ = ["Writer", "array", "assert_matches_h5", "roundtrip", "source_path", "write_h5"]

Writer = Callable[[h5py.File], None]


def write_h5(path: Path, writer: Writer, **kwargs: Any) -> Path:
    """An HDF5 file written by ``writer`` (h5py.File keyword arguments passed on)."""
    with h5py.File(path, "w", **kwargs) as f:
        writer(f)
    return path


def assert_matches_h5(got: np.ndarray, expected: np.ndarray, path: str) -> None:
    """Equal dtypes and identical values; a padded compound's padding is Zarr v2's own fields."""
    if expected.dtype.names is not None and got.dtype != expected.dtype:
        # Zarr v2 cannot give field offsets: padding becomes unnamed void fields (f1, ...)
        assert got.dtype.itemsize == expected.dtype.itemsize, path
        for name in expected.dtype.names:
            assert got.dtype[name] == expected.dtype[name], f"{path}.{name}"
            np.testing.assert_array_equal(got[name], expected[name], strict=True, err_msg=path)
        return
    assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype} != {expected.dtype}"
    np.testing.assert_array_equal(got, expected, strict=True, err_msg=path)


def source_path(f: h5py.File, path: str) -> str:
    """The HDF5 path of an array: netCDF stores variable ``x`` as ``_nc4_non_coord_x`` when
    ``x`` is also a dimension it is not the coordinate of."""
    item = f.get(path)
    if isinstance(item, h5py.Dataset) and not is_dimension_only(item):
        return path
    parent, _, name = path.rpartition("/")
    return f"{parent}/_nc4_non_coord_{name}" if parent else f"_nc4_non_coord_{name}"


def roundtrip(h5_path: Path, tmp_path: Path, **options: Any) -> ScannedGroup:
    """Scan, write JSON, read every array through fsspec + zarr, compare with h5py."""
    group = refzarr.scan(str(h5_path), **options)
    assert isinstance(group, ScannedGroup)
    json_path = tmp_path / f"{h5_path.stem}.json"
    refzarr.write(group, json_path)
    root = open_zarr_group(json_path)
    with h5py.File(h5_path, "r") as f:
        for path, _ in group.arrays():
            array = root[path]
            assert isinstance(array, zarr.Array)
            expected = np.asarray(f[source_path(f, path)][()])
            assert_matches_h5(np.asarray(array[...]), expected, path)
    return group


def array(group: refzarr.RefGroup, path: str) -> RefArray:
    node = group[path]
    assert isinstance(node, RefArray)
    return node
