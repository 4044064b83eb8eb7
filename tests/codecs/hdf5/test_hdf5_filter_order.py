"""Every order of fletcher32, shuffle and deflate (as HDF5 applies them) reads back exactly.

netCDF-C writes fletcher32 -> shuffle -> deflate: HDF5 then shuffles the elements *and* the
4-byte checksum, which numcodecs' shuffle rejects for 8-byte elements (issue 13, point 1). Each
file is read through fsspec + zarr (h5kit's round trip) and through refzarr's own reader.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import h5py
import netCDF4
import numcodecs
import numpy as np
import pytest
from h5py import h5p, h5s, h5t, h5z

import refzarr
from refzarr.codecs.hdf5.shuffle import Hdf5Shuffle
from scan.hdf5.h5kit import array, roundtrip

STAGES = ("fletcher32", "shuffle", "deflate")
ORDERS = [
    order for n in range(1, 4) for order in itertools.permutations(STAGES, n) if "shuffle" in order
]
DTYPES = ["u1", ">u2", "<f4", ">f8", "S3", "S16"]


def _write(path: Path, order: tuple[str, ...], dtype: str) -> np.ndarray:
    """A 2-D chunked dataset ``v`` whose filters are set in ``order`` (HDF5's encoding order)."""
    rng = np.random.default_rng(3)
    values = rng.integers(0, 255, size=(9, 7, np.dtype(dtype).itemsize), dtype="u1")
    data = values.view(dtype).reshape(9, 7)
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_chunk((4, 3))
    for stage in order:
        {
            "fletcher32": dcpl.set_fletcher32,
            "shuffle": dcpl.set_shuffle,
            "deflate": lambda: dcpl.set_deflate(4),
        }[stage]()
    with h5py.File(path, "w") as f:
        tid = h5t.py_create(np.dtype(dtype))
        ds = h5py.h5d.create(f.id, b"v", tid, h5s.create_simple((9, 7)), dcpl=dcpl)
        ds.write(h5s.ALL, h5s.ALL, np.ascontiguousarray(data))
    return data


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_filter_order_reads_back(tmp_path: Path, order: tuple[str, ...], dtype: str) -> None:
    path = tmp_path / "order.h5"
    expected = _write(path, order, dtype)
    with h5py.File(path) as f:
        plist = f["v"].id.get_create_plist()
        ids = [plist.get_filter(k)[0] for k in range(plist.get_nfilters())]
    names = {h5z.FILTER_FLETCHER32: "fletcher32", h5z.FILTER_SHUFFLE: "shuffle"}
    assert [names.get(i, "deflate") for i in ids] == list(order)
    group = roundtrip(path, tmp_path)  # fsspec + zarr, compared with h5py
    got = refzarr.open_dataset(group)["v"].values
    np.testing.assert_array_equal(got, expected)  # xarray gives native byte order


def test_shuffle_stays_numcodecs_when_lengths_allow(tmp_path: Path) -> None:
    """Only a shuffle whose buffers may hold a partial element uses refzarr's codec."""
    _write(tmp_path / "a.h5", ("shuffle", "deflate", "fletcher32"), "<f8")
    _write(tmp_path / "b.h5", ("fletcher32", "shuffle", "deflate"), "<f4")
    _write(tmp_path / "c.h5", ("fletcher32", "shuffle", "deflate"), "<f8")
    ids = [
        [c["id"] for c in array(refzarr.scan(str(tmp_path / n)), "v").meta.codecs]
        for n in ("a.h5", "b.h5", "c.h5")
    ]
    assert ids[0] == ["shuffle", "zlib", "fletcher32"]
    assert ids[1] == ["fletcher32", "shuffle", "zlib"]
    assert ids[2] == ["fletcher32", Hdf5Shuffle.codec_id, "zlib"]


@pytest.mark.parametrize("dtype", ["f8", "i8", "f4", "i2", "u1"])
def test_netcdf_c_fletcher32_order(tmp_path: Path, dtype: str) -> None:
    """The file of the issue: netCDF4 with zlib, shuffle and fletcher32."""
    path = tmp_path / "nc.nc"
    values = np.arange(40, dtype=dtype).reshape(8, 5)
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("y", 8)
        ds.createDimension("x", 5)
        var = ds.createVariable("v", dtype, ("y", "x"), zlib=True, shuffle=True, fletcher32=True)
        var[:] = values
    roundtrip(path, tmp_path)
    got = refzarr.open_dataset(refzarr.scan(str(path)))["v"].values
    np.testing.assert_array_equal(got, values)


@pytest.mark.parametrize(("size", "length"), [(8, 44), (8, 40), (3, 10), (1, 5), (16, 36)])
def test_hdf5_shuffle_codec(size: int, length: int) -> None:
    data = np.random.default_rng(1).integers(0, 255, length, dtype="u1")
    codec = numcodecs.get_codec({"id": Hdf5Shuffle.codec_id, "elementsize": size})
    encoded = np.frombuffer(codec.encode(data), "u1")
    whole = length - length % size
    if whole:
        plain = numcodecs.Shuffle(size).encode(data[:whole])
        np.testing.assert_array_equal(encoded[:whole], np.frombuffer(plain, "u1"))
    np.testing.assert_array_equal(encoded[whole:], data[whole:])
    np.testing.assert_array_equal(np.frombuffer(codec.decode(encoded), "u1"), data)
    out = np.zeros(length, "u1")
    codec.decode(encoded, out=out)
    np.testing.assert_array_equal(out, data)
    with pytest.raises(ValueError, match="elementsize"):
        Hdf5Shuffle(0)
