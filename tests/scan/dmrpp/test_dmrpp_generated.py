"""Small HDF5 and netCDF4 files written here, their sidecars written by the kit as
``build_dmrpp`` writes them: the sidecar's scan equals the file's own scan, and reads back
h5py's values, for filters in every order, byte orders, fill values and missing chunks,
compact data, strings, groups and dimensions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import h5py
import netCDF4
import numpy as np
import pytest
import zarr
from dmrppkit import assert_values_match_h5, differences, write_sidecar

import refzarr

FASTPARQUET = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")

Writer = Callable[[h5py.File], None]


def _filtered(
    f: h5py.File, name: str, order: str, data: np.ndarray, chunks: tuple[int, ...]
) -> None:
    """A dataset whose filters HDF5 applies in ``order`` (letters: s shuffle, d deflate,
    f fletcher32), made with the low-level API so the order is exactly that."""
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk(chunks)
    for letter in order:
        {"s": dcpl.set_shuffle, "f": dcpl.set_fletcher32, "d": lambda: dcpl.set_deflate(3)}[
            letter
        ]()
    space = h5py.h5s.create_simple(data.shape)
    tid = h5py.h5t.py_create(data.dtype)
    h5py.h5d.create(f.id, name.encode(), tid, space, dcpl=dcpl)
    f[name][...] = data


def _filters(f: h5py.File) -> None:
    data = np.arange(60, dtype="<i4").reshape(6, 10) * 1001
    # shuffle after deflate is left out: HDF5 leaves the bytes past a multiple of the element
    # size unshuffled, numcodecs' Shuffle refuses them (the HDF5 scanner's mapping too)
    for order in ("d", "sd", "fsd", "sdf", "fd", "f"):
        _filtered(f, f"v_{order}", order, data, (4, 4))
    _filtered(f, "big_sd", "sd", data.astype(">f8") / 7, (3, 5))


def _byte_orders(f: h5py.File) -> None:
    f.create_dataset("be_f4", data=np.linspace(-1, 1, 12, dtype=">f4").reshape(3, 4))
    f.create_dataset("be_i2_chunked", data=np.arange(-50, 50, dtype=">i2"), chunks=(30,))
    f.create_dataset("le_u8", data=np.arange(5, dtype="<u8") * 2**60)
    f.create_dataset("bytes", data=np.arange(-5, 5, dtype="i1"))
    f.create_dataset("scalar_f8", data=np.float64(2.5))


def _fills(f: h5py.File) -> None:
    ds = f.create_dataset("some", shape=(10, 10), chunks=(4, 4), dtype="<i4", fillvalue=-99)
    ds[:4, :4] = 7
    ds[8:, 8:] = 8
    g = f.create_dataset("none", shape=(5,), chunks=(2,), dtype="<f4", fillvalue=1.5)
    g.attrs["_FillValue"] = np.float32(1.5)
    z = f.create_dataset("zero_fill", shape=(6,), chunks=(3,), dtype="<i2")
    z[:3] = 4
    nc = f.create_dataset(
        "nc_default", shape=(4,), chunks=(2,), dtype="<f8", fillvalue=9.969209968386869e36
    )
    nc[:2] = 1.0
    d = f.create_dataset("declared", shape=(4,), chunks=(2,), dtype="<f8", fillvalue=1 / 3)
    d.attrs["_FillValue"] = 1 / 3
    d[:2] = 1.0
    f.create_dataset("never_written", shape=(3, 3), dtype="<i4", fillvalue=5)
    u = f.create_dataset("uneven", data=np.arange(35, dtype="<i8").reshape(5, 7), chunks=(2, 3))
    u.attrs["units"] = "m"


def _compact_and_strings(f: h5py.File) -> None:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    data = np.arange(8, dtype=">i2")
    space = h5py.h5s.create_simple(data.shape)
    h5py.h5d.create(f.id, b"compact", h5py.h5t.py_create(data.dtype), space, dcpl=dcpl)
    f["compact"][...] = data
    f.create_dataset(
        "fixed",
        data=np.array([[b"ab", b"cde"], [b"", b"fghij"]], dtype="S5"),
        chunks=(1, 2),
        compression="gzip",
    )
    f.create_dataset("scalar_text", data=np.bytes_(b"hello world"))
    text = h5py.string_dtype()
    f.create_dataset("vlen", data=np.array([["a", ""], ["ccc", "dé"]], dtype=object), dtype=text)
    f.create_dataset("vlen_empty", data=np.array(["", ""], dtype=object), dtype=text)
    f.attrs["title"] = "strings"
    f.attrs["numbers"] = np.array([1.5, -2.25], dtype="<f4")
    f.attrs["count"] = np.int64(3)


def _compounds(f: h5py.File) -> None:
    packed = np.dtype([("a", "<i4"), ("b", "<f8"), ("c", "u1")])
    rows = np.array([(1, 1.5, 7), (2, -2.5, 8), (3, 0.0, 9), (4, 1e300, 255)], dtype=packed)
    f.create_dataset("packed", data=rows, chunks=(2,), compression="gzip", shuffle=True)
    aligned = np.dtype(
        {"names": ["x", "y"], "formats": [">i2", ">f4"], "offsets": [0, 4], "itemsize": 12}
    )
    f.create_dataset("aligned_be", data=np.zeros(3, dtype=aligned))
    f["aligned_be"]["x"] = [1, 2, 3]
    half = f.create_dataset("half", shape=(6,), chunks=(3,), dtype=packed)
    half[:3] = rows[:3]


WRITERS: dict[str, Writer] = {
    "compounds": _compounds,
    "filters": _filters,
    "byte_orders": _byte_orders,
    "fills": _fills,
    "compact_strings": _compact_and_strings,
}


@pytest.fixture(scope="module", params=sorted(WRITERS))
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dmrpp") / f"{request.param}.h5"
    with h5py.File(path, "w") as f:
        WRITERS[request.param](f)
    write_sidecar(path)
    return path


def test_same_group_as_the_hdf5_scan(written: Path) -> None:
    dmrpp = refzarr.scan(f"{written}.dmrpp")
    assert differences(dmrpp, refzarr.scan(str(written))) == []


@FASTPARQUET
def test_values_identical_to_h5py(written: Path, tmp_path: Path) -> None:
    dmrpp = refzarr.scan(f"{written}.dmrpp")
    assert assert_values_match_h5(dmrpp, written, tmp_path) > 0


def test_six_digit_float_fills(tmp_path: Path) -> None:
    """build_dmrpp writes fill values with six digits: netCDF's default fill and a fill equal
    to the ``_FillValue`` attribute are recovered exactly; another float fill is as written."""
    path = tmp_path / "fills.h5"
    with h5py.File(path, "w") as f:
        _fills(f)
        lossy = f.create_dataset("lossy", shape=(4,), chunks=(2,), dtype="<f8", fillvalue=1 / 3)
        lossy[:2] = 0
    write_sidecar(path, fill_digits=6)
    found = differences(refzarr.scan(f"{path}.dmrpp"), refzarr.scan(str(path)))
    assert [d.split(": dmrpp")[0] for d in found] == ["lossy: fill_value"]


def _netcdf(path: Path) -> None:
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 4)
        t = nc.createVariable("time", "f8", ("time",))
        t[:] = [0.0, 1.0, 2.0]
        t.units = "days since 2000-01-01"
        x = nc.createVariable("x", "i4", ("x",))
        x[:] = [10, 20, 30, 40]
        v = nc.createVariable("temp", "f4", ("time", "x"), zlib=True, shuffle=True, fill_value=-1.5)
        v[:2] = np.arange(8, dtype="f4").reshape(2, 4)
        v.scale_factor = np.float32(0.5)
        g = nc.createGroup("inner")
        g.createDimension("y", 2)
        w = g.createVariable("w", "i2", ("y", "x"), fletcher32=True)
        w[:] = [[1, 2, 3, 4], [5, 6, 7, 8]]
        nc.history = "made by the dmrpp tests"


@FASTPARQUET
def test_netcdf4_groups_dimensions_coordinates(tmp_path: Path) -> None:
    path = tmp_path / "nc.nc4"
    _netcdf(path)
    write_sidecar(path)
    dmrpp = refzarr.scan(f"{path}.dmrpp")
    assert differences(dmrpp, refzarr.scan(str(path))) == []
    assert dmrpp["time"].manifest.paths == ()  # a coordinate, loaded into the reference set
    referenced = refzarr.scan(f"{path}.dmrpp", inline_coordinates=0)
    assert referenced["time"].manifest.paths == (str(path),)
    root = zarr.open_group(refzarr.ReferenceStore(dmrpp), mode="r", zarr_format=2)
    with netCDF4.Dataset(path) as nc:  # netCDF's view: temp extended along time with fills
        nc.set_auto_maskandscale(False)
        for name, _ in dmrpp.arrays():
            group, _, var = name.rpartition("/")
            expected = (nc[group] if group else nc)[var][...]
            got = root[name][...]
            np.testing.assert_array_equal(got, np.asarray(expected), strict=True, err_msg=name)
    ds = refzarr.open_dataset(dmrpp)
    assert ds["temp"].dims == ("time", "x")
    np.testing.assert_array_equal(ds["x"].values, [10, 20, 30, 40])


def test_skipped_filters_are_inlined(tmp_path: Path) -> None:
    """A chunk written with its deflate stage skipped (``fm``) is read and re-encoded."""
    path = tmp_path / "masked.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("m", shape=(8,), chunks=(4,), dtype="<i4", compression="gzip")
        ds[:4] = [1, 2, 3, 4]
        ds.id.write_direct_chunk((4,), np.arange(4, dtype="<i4").tobytes(), filter_mask=1)
    write_sidecar(path)
    dmrpp = refzarr.scan(f"{path}.dmrpp")
    assert differences(dmrpp, refzarr.scan(str(path))) == []
    np.testing.assert_array_equal(refzarr.open_dataset(dmrpp)["m"].values, [1, 2, 3, 4, 0, 1, 2, 3])


def test_inline_threshold_reads_small_chunks(tmp_path: Path) -> None:
    path = tmp_path / "small.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(10, dtype="<i4"), chunks=(5,))
    write_sidecar(path)
    dmrpp = refzarr.scan(f"{path}.dmrpp", inline_threshold=100)
    assert differences(dmrpp, refzarr.scan(str(path), inline_threshold=100)) == []
    assert dmrpp["a"].manifest.paths == ()


def test_attribute_named_like_a_record_is_refused_as_hdf5_refuses_it(tmp_path: Path) -> None:
    """A sidecar describing an attribute named like refzarr's attribute-types record: refused
    naming the sidecar, variable and attribute; skipped and listed as the HDF5 scan does, and
    the numbers JSON keeps recorded alike (``"netcdf": 4``)."""
    path = tmp_path / "r.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("v", data=np.arange(3, dtype="f4"))
        ds.attrs["_nczarr_attr"] = "mine"
        ds.attrs["count"] = np.int64(3)
        f.attrs["_nc_source_layout"] = "mine"
    write_sidecar(path)
    with pytest.raises(refzarr.UnsupportedFeatureError, match="attribute '_nczarr_attr': refzarr"):
        refzarr.scan(f"{path}.dmrpp")
    dmrpp = refzarr.scan(f"{path}.dmrpp", on_unsupported="skip")
    hdf5 = refzarr.scan(str(path), on_unsupported="skip")
    assert differences(dmrpp, hdf5) == []
    paths = ["/@_nc_source_layout", "/v@_nczarr_attr"]
    assert sorted(s.path for s in dmrpp.skipped) == sorted(s.path for s in hdf5.skipped) == paths
    assert dmrpp["v"].meta.attributes["_nczarr_attr"] == {"types": {}, "netcdf": 4}
