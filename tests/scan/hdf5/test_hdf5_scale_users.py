"""The users of a dimension scale read from the headers are those h5py's references give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from h5kit import CORPUS_FILES, corpus_h5_files, write_h5
from h5py import h5ds
from test_hdf5_attr_messages import _headers, _objects

from refzarr.scan.hdf5.attrs import get_attribute
from refzarr.scan.hdf5.scale_users import ScaleUser
from refzarr.scan.hdf5.unlimited import _dataset_shape


def _h5py_users(scale: h5py.Dataset) -> list[ScaleUser]:
    references = get_attribute(scale, "REFERENCE_LIST")
    if references is None:
        return []
    return [
        ScaleUser(_dataset_shape(scale, entry[0]), int(entry[1]))
        for entry in np.asarray(references).ravel()
    ]


def _compare(f: h5py.File) -> tuple[int, int]:
    """(scales compared, scales h5py had to read) in one file."""
    headers = _headers(f)
    compared = fallback = 0
    for obj in _objects(f):
        if not isinstance(obj, h5py.Dataset) or not h5ds.is_scale(obj.id):
            continue
        users = headers.scale_users(obj.id)
        if users is None:
            fallback += 1
            continue
        assert users == _h5py_users(obj), obj.name
        compared += 1
    return compared, fallback


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_scales_attached_to_several_datasets(tmp_path: Path, libver: str) -> None:
    def writer(f: h5py.File) -> None:
        time = f.create_dataset("time", data=np.arange(4.0), maxshape=(None,))
        time.make_scale("time")
        x = f.create_dataset("x", data=np.arange(3))
        x.make_scale("x")
        for name, shape in (("a", (4, 3)), ("b", (6, 3)), ("c", (2,))):
            ds: Any = f.create_dataset(name, data=np.zeros(shape), maxshape=(None,) * len(shape))
            ds.dims[0].attach_scale(time)
            if len(shape) > 1:
                ds.dims[1].attach_scale(x)
        f.create_dataset("g/d", data=np.zeros((5, 3))).dims[1].attach_scale(x)

    path = write_h5(tmp_path / "scales.h5", writer, libver=libver)
    with h5py.File(path, "r") as f:
        compared, fallback = _compare(f)
        assert compared + fallback == 2
        if libver == "latest":  # reference datatypes of HDF5 1.12+: left to h5py
            return
        assert fallback == 0
        assert [u.shape for u in _headers(f).scale_users(f["x"].id) or []] == [
            (4, 3),
            (6, 3),
            (5, 3),
        ]


def test_netcdf_unlimited_dimension(tmp_path: Path) -> None:
    netcdf4 = pytest.importorskip("netCDF4")
    path = tmp_path / "u.nc"
    with netcdf4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 2)
        time = nc.createVariable("time", "f8", ("time",))
        for k in range(9):
            time.setncattr(f"a{k}", k)  # dense attribute storage
        short = nc.createVariable("short", "f4", ("time", "x"))
        long = nc.createVariable("long", "f4", ("time",))
        short[0:2] = np.ones((2, 2))
        long[0:5] = np.arange(5)
    with h5py.File(path, "r") as f:
        assert _compare(f) == (2, 0)


def test_corpus_scales() -> None:
    compared = 0
    for f in corpus_h5_files():
        compared += _compare(f)[0]
    if CORPUS_FILES:
        assert compared > 5
