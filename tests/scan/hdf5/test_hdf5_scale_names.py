"""Scale names found from hard links and DIMENSION_LIST are the names HDF5 gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from h5kit import CORPUS_FILES, corpus_h5_files, write_h5
from h5py import h5ds
from test_hdf5_attr_messages import _headers

from refzarr.scan.hdf5.dims import _scale_name
from refzarr.scan.hdf5.ohdr import header_address
from refzarr.scan.hdf5.scale_names import UNKNOWN, ScaleNames
from refzarr.scan.hdf5.unlimited import _only_scale


def _compare(f: h5py.File) -> tuple[int, int]:
    """(axes named without HDF5 and equal to its names, axes left to HDF5) in one file."""
    names = ScaleNames(_headers(f))
    datasets: list[h5py.Dataset] = []

    def walk(group: h5py.Group) -> None:
        members = list(group)
        addresses = names.add_group(group, members)
        for name in members:
            item = group.get(name)
            if name in addresses:  # a hard link: the address of the object it opens
                assert addresses[name] == header_address(item.id), name
            if isinstance(item, h5py.Group):
                walk(item)
            elif isinstance(item, h5py.Dataset):
                datasets.append(item)

    walk(f)
    same = unknown = 0
    for ds in datasets:
        if ds.shape is None or h5ds.is_scale(ds.id):
            continue
        for axis in range(ds.ndim):
            only, expected = names.only_scale(ds, axis), _only_scale(ds, axis)
            if only is not UNKNOWN:
                assert (only is None) == (expected is None), (ds.name, axis)
                if expected is not None:
                    assert header_address(only) == header_address(expected.id)
            found = names.first_scale(ds, axis)
            if found is UNKNOWN:
                unknown += 1
                continue
            assert found == _scale_name(ds, axis), (ds.name, axis)
            same += 1
    return same, unknown


def test_scales_in_groups_and_hard_linked_twice(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        x = f.create_dataset("x", data=np.arange(3))
        x.make_scale("x")
        y = f.create_dataset("g/y", data=np.arange(2))
        y.make_scale("y")
        f["g/also_y"] = y  # a second hard link: HDF5's search decides its name
        other = f.create_dataset("other", data=np.arange(3))
        other.make_scale("other")
        d: Any = f.create_dataset("g/d", data=np.zeros((2, 3, 4)))
        d.dims[0].attach_scale(y)
        d.dims[1].attach_scale(x)
        d.dims[1].attach_scale(other)
        e: Any = f.create_dataset("e", data=np.zeros(3))
        e.dims[0].attach_scale(other)

    path = write_h5(tmp_path / "scales.h5", writer)
    with h5py.File(path, "r") as f:
        same, unknown = _compare(f)
        assert same == 3  # d: x (first of two), none on axis 2; e: other
        assert unknown == 1  # d axis 0: y has two hard links


def test_netcdf_file(tmp_path: Path) -> None:
    netcdf4 = pytest.importorskip("netCDF4")
    path = tmp_path / "n.nc"
    with netcdf4.Dataset(path, "w") as nc:
        for dim, size in (("time", None), ("lat", 2), ("lon", 3)):
            nc.createDimension(dim, size)
        nc.createVariable("lat", "f4", ("lat",))
        nc.createVariable("v", "f4", ("time", "lat", "lon"))
        sub = nc.createGroup("sub")
        sub.createDimension("z", 2)
        sub.createVariable("w", "f4", ("z", "lat"))
    with h5py.File(path, "r") as f:
        same, unknown = _compare(f)
        assert unknown == 0
        assert same == 5


def test_corpus_axes() -> None:
    same = 0
    for f in corpus_h5_files():
        same += _compare(f)[0]
    if CORPUS_FILES:
        assert same > 20
