"""xarray's decoded view of a scanned store through ``engine="refzarr"`` equals
``xr.open_dataset(store)``: values, dtypes, coordinates, attributes (variables in name order)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

import refzarr
from corpus import CORPUS
from refzarr.scan import ScannedGroup
from refzarr.scan.zarr import ZarrScanner


def _dataset(fill: float, written: int) -> xr.Dataset:
    time = np.arange(6, dtype="i8")
    values = np.arange(6 * 4, dtype="f4").reshape(6, 4) / 3
    return xr.Dataset(
        {
            "temperature": (("time", "x"), values, {"units": "K", "long_name": "T"}),
            "flag": (("time",), (time % 2).astype("u1"), {"flag_values": [0, 1]}),
            # xarray writes a Zarr v3 0-d array without dimension_names
            "station": ((), np.int32(7), {"long_name": "station number"}),
        },
        coords={
            "time": ("time", time, {"units": "days since 2000-01-01", "calendar": "standard"}),
            "x": ("x", np.linspace(0, 1, 4)),
        },
        attrs={"title": "refzarr test", "history": "written by xarray"},
    )


def _write(path: Path, fmt: int, *, fill: float = -9999.0, missing: bool = False) -> Path:
    ds = _dataset(fill, 6)
    encoding = {
        "temperature": {"chunks": (2, 4), "_FillValue": fill},
        "flag": {"chunks": (3,)},
    }
    ds.to_zarr(path, zarr_format=fmt, encoding=encoding, consolidated=False, mode="w")
    if missing:  # a chunk row never written: remove its file
        array = zarr.open_array(path, path="temperature", mode="r")
        key = "c/1/0" if fmt == 3 else "1.0"
        (path / "temperature" / key).unlink()
        assert array.shape == (6, 4)
    return path


def _direct(path: Path) -> xr.Dataset:
    return xr.open_dataset(path, engine="zarr", consolidated=False)


@pytest.mark.parametrize(
    ("fmt", "fill", "missing"),
    [(2, -9999.0, False), (2, -9999.0, True), (3, -9999.0, False), (3, 0.0, False)],
)
def test_decoded_view_identical(tmp_path: Path, fmt: int, fill: float, missing: bool) -> None:
    store = _write(tmp_path / "ds.zarr", fmt, fill=fill, missing=missing)
    group = ZarrScanner()(str(store))
    with _direct(store) as direct, refzarr.open_dataset(group) as ours:
        ours.load()
        direct.load()
        # a directory has no order: members come sorted by name (zarr-python lists them in
        # the filesystem's order, which differs between a local copy and S3)
        assert list(ours.data_vars) == sorted(direct.data_vars)
        xr.testing.assert_identical(ours, direct)


def test_v3_fill_value_with_missing_chunks(tmp_path: Path) -> None:
    """A Zarr v3 array whose chunk is missing and whose fill value is not zero: references
    declare the fill value (Zarr v2 metadata) and xarray would mask it, where it does not for
    the v3 store; ``use_zarr_fill_value_as_mask=False`` gives the store's view."""
    store = _write(tmp_path / "ds.zarr", 3, fill=-9999.0, missing=True)
    group = ZarrScanner()(str(store))
    with (
        _direct(store) as direct,
        refzarr.open_dataset(group, use_zarr_fill_value_as_mask=False) as ours,
    ):
        xr.testing.assert_identical(ours.load(), direct.load())


@pytest.mark.skipif(not (CORPUS / "zarr").is_dir(), reason="the corpus is absent")
def test_corpus_hierarchy_group(tmp_path: Path) -> None:
    """zarrs' hierarchy fixture: group ``a`` has dimension names and NaN fill (never written)."""
    store = CORPUS / "zarr" / "zarrs_hierarchy.zarr"
    group = refzarr.scan(store)
    with (
        xr.open_dataset(store, engine="zarr", group="a", consolidated=False) as direct,
        refzarr.open_datatree(group) as tree,
    ):
        ours = tree["a"].to_dataset()
        xr.testing.assert_identical(ours.isel(rows=slice(0, 50)), direct.isel(rows=slice(0, 50)))


def test_scanner_is_picklable_and_scan_many_works(tmp_path: Path) -> None:
    stores = [_write(tmp_path / f"s{k}.zarr", 2 + k % 2) for k in range(3)]
    scanner = pickle.loads(pickle.dumps(ZarrScanner(inline_coordinates=0)))
    groups = [scanner(str(s)) for s in stores]
    assert all(isinstance(g, ScannedGroup) for g in groups)
    many = refzarr.scan_many([str(s) for s in stores], inline_coordinates=0)
    assert list(many) == groups


def test_nczarr_store_keeps_its_attribute_types(tmp_path: Path) -> None:
    """A store netCDF-C wrote as NCZarr carries ``_nczarr_attr`` with the meaning refzarr gives
    it (the attributes' types): scanned as it is, read back with those types as netCDF4-python
    reads the store, NCZarr's bookkeeping hidden."""
    netCDF4 = pytest.importorskip("netCDF4")
    store = tmp_path / "nc.zarr"
    url = f"file://{store}#mode=nczarr,file"
    try:
        with netCDF4.Dataset(url, "w") as ds:
            ds.createDimension("x", 3)
            v = ds.createVariable("v", "i2", ("x",))
            v.scale_factor = np.float32(0.5)
            v.count = np.int64(7)
            v.units = "m"
            v[:] = [1, 2, 3]
            ds.ratio = 2.5
    except OSError as exc:  # a netCDF-C built without NCZarr
        pytest.skip(f"netCDF-C cannot write NCZarr here: {exc}")
    group = refzarr.scan(str(store))
    assert group["v"].meta.attributes["_nczarr_attr"]["types"]["scale_factor"] == "<f4"
    got = refzarr.open_dataset(group).load()
    with xr.open_dataset(url, engine="netcdf4") as expected:
        assert got["v"].dtype == expected["v"].dtype == np.float32
        np.testing.assert_array_equal(got["v"].values, expected["v"].values, strict=True)
        assert got["v"].attrs == expected["v"].attrs == {"count": 7, "units": "m"}
        assert type(got["v"].attrs["count"]) is type(expected["v"].attrs["count"])
        assert type(got["v"].encoding["scale_factor"]) is np.float32
        assert got.attrs["ratio"] == expected.attrs["ratio"] == 2.5
