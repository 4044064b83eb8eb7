"""``DIMENSION_LIST`` sequences read from global heap collections read once per scan.

netCDF-C writes the sequences of a file's variables one after the other into 4 KiB
collections (~170 each); each collection was read and walked from its start again for every
variable (~130 µs a variable at 500 variables). Now each is read once and walked once per
scan, at most `KEPT_BYTES` of them kept: the axes found are those HDF5 attaches.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import netCDF4
import numpy as np
import pytest
from h5py import h5ds

import refzarr
from refzarr.scan.hdf5 import dimension_list as dl
from refzarr.scan.hdf5.headers import ObjectHeaders
from refzarr.scan.hdf5.ohdr import header_address

VARIABLES = 400
"""More than one collection's worth of sequences (netCDF-C: ~170 a 4 KiB collection)."""


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A netCDF4 file of `VARIABLES` variables over dimensions of two groups."""
    path = tmp_path_factory.mktemp("dimlist") / "many.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 3)
        nc.createDimension("t", None)
        nc.createVariable("x", "f8", ("x",))[:] = np.arange(3.0)
        inner = nc.createGroup("inner")
        inner.createDimension("y", 2)
        for k in range(VARIABLES):
            group = inner if k % 3 == 0 else nc
            dims = ("t", "y", "x") if k % 3 == 0 else ("x",) if k % 2 else ("t", "x")
            group.createVariable(f"v{k:04d}", "f4", dims)
    return path


def _expected(ds: h5py.Dataset) -> list[list[int]]:
    """The header addresses of the scales HDF5 attaches to each axis of ``ds``."""
    axes = []
    for axis in range(ds.ndim):
        found: list[int] = []
        h5ds.iterate(ds.id, axis, lambda scale, found=found: found.append(header_address(scale)))
        axes.append(found)
    return axes


def _datasets(f: h5py.File) -> list[h5py.Dataset]:
    found: list[h5py.Dataset] = []
    f.visititems(lambda _, item: found.append(item) if isinstance(item, h5py.Dataset) else None)
    return [ds for ds in found if not h5ds.is_scale(ds.id)]


@pytest.mark.parametrize("kept", [dl.KEPT_BYTES, 1], ids=["kept", "dropped-each-time"])
def test_axes_are_those_hdf5_attaches(
    many: Path, kept: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dl, "KEPT_BYTES", kept)
    reads: list[int] = []
    read_collection = dl._collection
    monkeypatch.setattr(
        dl, "_collection", lambda read, sb, at: reads.append(at) or read_collection(read, sb, at)
    )
    with h5py.File(many, "r") as f, open(many, "rb") as raw:
        size = raw.seek(0, 2)
        headers = ObjectHeaders(f, lambda at, n: (raw.seek(at), raw.read(n))[1], size)
        datasets = _datasets(f)
        assert len(datasets) == VARIABLES
        for ds in datasets:
            assert headers.dimension_list(ds.id) == _expected(ds), ds.name
    distinct = len(set(reads))
    assert distinct > 1  # several collections
    if kept > 1:
        assert len(reads) == distinct  # each read once
    else:
        assert len(reads) > distinct  # dropped when over the budget, read again


def test_a_scan_names_every_axis_as_netcdf(many: Path) -> None:
    group = refzarr.scan(str(many))
    with netCDF4.Dataset(many) as nc:
        for k in range(VARIABLES):
            where = nc["inner"] if k % 3 == 0 else nc
            inner = group["inner"] if k % 3 == 0 else group
            array = inner[f"v{k:04d}"]  # type: ignore[index]
            assert array.meta.dimension_names == where[f"v{k:04d}"].dimensions  # type: ignore[union-attr]
