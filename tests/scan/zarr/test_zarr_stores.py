"""Stores written by zarr-python in the test: every layout, chunk key encoding, codec and dtype
the scanner maps reads back exactly as zarr-python reads the store, through JSON, Parquet and
refzarr's own store."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec, GzipCodec, ShardingCodec, TransposeCodec, ZstdCodec
from zarrkit import readback, roundtrip

from refzarr import RefArray
from refzarr.model import INLINED, MISSING
from refzarr.scan import ScannedGroup
from refzarr.scan.zarr import ZarrScanner

pytestmark = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")

Writer = Callable[[zarr.Group], None]

RNG = np.random.default_rng(12)


def _values(shape: tuple[int, ...], dtype: str = "i4") -> np.ndarray:
    return (RNG.integers(-1000, 1000, size=shape)).astype(dtype)


def _keys(group: zarr.Group, fmt: int) -> None:
    """Every chunk key encoding of each format; a chunk left unwritten in each array."""
    encodings: list[dict[str, Any]] = (
        [{"name": "v2", "separator": "."}, {"name": "v2", "separator": "/"}]
        if fmt == 2
        else [
            {"name": "default", "separator": "/"},
            {"name": "default", "separator": "."},
            {"name": "v2", "separator": "."},
            {"name": "v2", "separator": "/"},
        ]
    )
    for k, encoding in enumerate(encodings):
        a = group.create_array(
            f"a{k}",
            shape=(5, 7, 3),
            chunks=(2, 3, 2),
            dtype="i2",
            chunk_key_encoding=encoding,
            fill_value=-9,
        )
        a[:4] = _values((4, 7, 3), "i2")


def _v2_keys(group: zarr.Group) -> None:
    _keys(group, 2)


def _v3_keys(group: zarr.Group) -> None:
    _keys(group, 3)


def _sharded(group: zarr.Group) -> None:
    """Shards with unwritten inner chunks, the index first or last, codecs inside them."""
    plain = group.create_array(
        "plain", shape=(9, 10), chunks=(2, 5), shards=(4, 5), dtype="f8", fill_value=np.nan
    )
    plain[:5, :7] = _values((5, 7), "f8") / 3
    inner = [TransposeCodec(order=(1, 0)), BytesCodec(endian="big"), GzipCodec(level=3)]
    for location in ("start", "end"):
        a = group.create_array(
            f"index_{location}",
            shape=(7, 6),
            chunks=(4, 4),
            dtype="i4",
            fill_value=-1,
            serializer=ShardingCodec(chunk_shape=(2, 2), codecs=inner, index_location=location),
            compressors=None,
        )
        a[:3, :3] = _values((3, 3))
    outer = group.create_array(
        "outer_transpose",
        shape=(4, 6, 2),
        chunks=(4, 4, 2),
        dtype="u2",
        filters=[TransposeCodec(order=(2, 0, 1))],
        serializer=ShardingCodec(chunk_shape=(2, 2, 2), codecs=[BytesCodec()]),
        compressors=[ZstdCodec()],
    )
    outer[:] = _values((4, 6, 2), "u2")


def _layouts(group: zarr.Group) -> None:
    """Transposes (C, F, other permutations), big-endian storage, a numcodecs filter."""
    for name, order in (("f_order", (2, 1, 0)), ("permuted", (1, 2, 0)), ("same", (0, 1, 2))):
        a = group.create_array(
            name,
            shape=(3, 4, 5),
            chunks=(2, 3, 4),
            dtype="f4",
            filters=[TransposeCodec(order=order)],
            serializer=BytesCodec(endian="big"),
        )
        a[:] = _values((3, 4, 5), "f4") / 7


def _v2_layouts(group: zarr.Group) -> None:
    """F order, big-endian, numcodecs filters in Zarr v2."""
    f = group.create_array("f", shape=(5, 6), chunks=(2, 4), dtype=">i4", order="F")
    f[:] = _values((5, 6))
    d = group.create_array(
        "delta",
        shape=(20,),
        chunks=(8,),
        dtype="<i8",
        filters=[numcodecs.Delta(dtype="<i8")],
        compressors=numcodecs.Zlib(),
    )
    d[:] = np.cumsum(_values((20,), "i8"))


def _dtypes(group: zarr.Group) -> None:
    """float16, complex, bool, datetime64, timedelta64, strings (fixed and variable)."""
    cases: list[tuple[str, Any, np.ndarray]] = [
        ("f2", "f2", (_values((7,)) / 8).astype("f2")),
        ("c16", "c16", _values((7,)) + 1j * _values((7,))),
        ("b1", "bool", _values((7,)) > 0),
        ("M8", "M8[s]", np.arange(7).astype("M8[D]").astype("M8[s]")),
        ("m8", "m8[ms]", _values((7,)).astype("m8[ms]")),
        ("vlen", str, np.array(["a", "", "ünï", "x" * 40, "b", "c", "d"])),
    ]
    for name, dtype, data in cases:
        a = group.create_array(name, shape=(7,), chunks=(3,), dtype=dtype)
        a[:4] = data[:4]  # the last chunk never written
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fixed-length strings and structs are not yet spec'd
        u = group.create_array("U5", shape=(4,), chunks=(3,), dtype="<U5")
        u[:] = ["a", "bb", "ccc", "dddd"]
        s = group.create_array(
            "struct", shape=(3,), chunks=(2,), dtype=[("a", "<i4"), ("b", "<f8")]
        )
        s[:] = np.array([(1, 2.0), (3, 4.0), (5, 6.0)], dtype=s.dtype)


def _v2_dtypes(group: zarr.Group) -> None:
    """Fixed-length bytes and strings (big-endian too), datetime64, bool, structured."""
    for name, dtype, data in (
        ("S4", "S4", np.array([b"ab", b"c", b"def"])),
        ("U3", ">U3", np.array(["ab", "c", "déf"])),
        ("M8", "<M8[ns]", np.array(["2001-01-01", "NaT", "1970-01-02"], dtype="M8[ns]")),
        ("b1", "bool", np.array([True, False, True])),
        (
            "struct",
            [("a", "<i4"), ("b", ">f8")],
            np.array([(1, 2.0), (3, 4.0), (5, 6.0)], dtype=[("a", "<i4"), ("b", ">f8")]),
        ),
    ):
        a = group.create_array(name, shape=(3,), chunks=(2,), dtype=dtype)
        a[:] = data


def _shapes(group: zarr.Group) -> None:
    """0-d arrays, an empty array, an array never written, chunks larger than the array."""
    sub = group.create_group("g")
    scalar = sub.create_array("scalar", shape=(), dtype="f8", fill_value=1.5)
    scalar[...] = 3.25
    sub.create_array("unwritten_scalar", shape=(), dtype="i4", fill_value=5)
    sub.create_array("empty", shape=(0, 4), chunks=(2, 2), dtype="i4")
    sub.create_array("unwritten", shape=(6,), chunks=(4,), dtype="i4", fill_value=3)
    big = sub.create_array("big_chunk", shape=(3, 2), chunks=(10, 10), dtype="u1")
    big[:] = 7


def _hierarchy(group: zarr.Group) -> None:
    """Nested groups with attributes, names with spaces and dots."""
    group.attrs.update({"title": "root", "n": 3, "list": [1, 2.5, "x"], "nested": {"a": None}})
    deep = group.create_group("a").create_group("b c").create_group("d.e")
    deep.attrs["level"] = 3
    a = deep.create_array("x.y", shape=(4,), chunks=(2,), dtype="u1", attributes={"units": "m"})
    a[:] = [1, 2, 3, 4]
    group.create_group("empty")


WRITERS: dict[str, tuple[int, Writer]] = {
    "v2_keys": (2, _v2_keys),
    "v3_keys": (3, _v3_keys),
    "sharded": (3, _sharded),
    "layouts": (3, _layouts),
    "v2_layouts": (2, _v2_layouts),
    "dtypes": (3, _dtypes),
    "v2_dtypes": (2, _v2_dtypes),
    "shapes_v2": (2, _shapes),
    "shapes_v3": (3, _shapes),
    "hierarchy_v2": (2, _hierarchy),
    "hierarchy_v3": (3, _hierarchy),
}


def write_store(path: Path, name: str, *, consolidated: bool = False) -> Path:
    """The store ``name`` of `WRITERS`, written by zarr-python at ``path``."""
    fmt, writer = WRITERS[name]
    group = zarr.open_group(path, mode="w", zarr_format=fmt)
    writer(group)
    if consolidated:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # v3 consolidated metadata is not in the spec yet
            zarr.consolidate_metadata(path, zarr_format=fmt)
    return path


@pytest.mark.parametrize("name", list(WRITERS))
def test_store_reads_back(name: str, tmp_path: Path) -> None:
    store = write_store(tmp_path / f"{name}.zarr", name)
    group = roundtrip(store, tmp_path)
    assert isinstance(group, ScannedGroup)
    assert group.skipped == ()


@pytest.mark.parametrize("name", ["hierarchy_v2", "hierarchy_v3", "sharded"])
def test_consolidated_store(name: str, tmp_path: Path) -> None:
    plain = roundtrip(write_store(tmp_path / "plain.zarr", name), tmp_path / "a", hows=("json",))
    (tmp_path / "a").mkdir(exist_ok=True)
    store = write_store(tmp_path / "consolidated.zarr", name, consolidated=True)
    (tmp_path / "b").mkdir()
    group = roundtrip(store, tmp_path / "b", hows=("json",))
    assert [p for p, _ in group.arrays()] == [p for p, _ in plain.arrays()]
    assert dict(group.groups()).keys() == dict(plain.groups()).keys()


def _array(group: Any, path: str) -> RefArray:
    array = group[path]
    assert isinstance(array, RefArray)
    return array


def test_missing_chunks_are_missing(tmp_path: Path) -> None:
    store = write_store(tmp_path / "s.zarr", "v3_keys")
    group = roundtrip(store, tmp_path, hows=("json",))
    for k in range(4):
        ids = _array(group, f"a{k}").manifest.path_id
        assert ids.shape == (3, 3, 2)
        assert (ids[2] == MISSING).all()
        assert (ids[:2] >= 0).all()


def test_chunk_references_are_whole_files(tmp_path: Path) -> None:
    store = write_store(tmp_path / "s.zarr", "v2_keys")
    group = roundtrip(store, tmp_path, hows=("json",))
    array = _array(group, "a1")  # "/" separator: nested chunk files
    ref = array.manifest[(1, 2, 0)]
    assert ref is not None
    assert not isinstance(ref, bytes)
    assert ref.url == str(store / "a1" / "1" / "2" / "0")
    assert ref.offset == 0
    assert ref.length == (store / "a1" / "1" / "2" / "0").stat().st_size


def test_fill_values(tmp_path: Path) -> None:
    """Zarr v3's fill value is declared only where a chunk is missing and it is not zero
    (xarray would mask it, as it does not for the store); Zarr v2's is kept as it is."""
    root = zarr.open_group(tmp_path / "s.zarr", mode="w")
    for name, fill, written in (("full", 7, 4), ("partial", 7, 2), ("zero", 0, 2)):
        root.create_array(name, shape=(4,), chunks=(1,), dtype="i4", fill_value=fill)[:written] = 1
    v2 = zarr.open_group(tmp_path / "s.zarr", path="v2", mode="w", zarr_format=2)
    v2.create_array("full", shape=(2,), chunks=(1,), dtype="i4", fill_value=7)[:] = 1
    group = roundtrip(tmp_path / "s.zarr", tmp_path)
    v2_group = roundtrip(tmp_path / "s.zarr" / "v2", tmp_path / "v2")
    assert _array(group, "full").meta.fill_value is None
    assert _array(group, "partial").meta.fill_value == 7
    assert _array(group, "zero").meta.fill_value is None
    assert _array(v2_group, "full").meta.fill_value == 7


def test_dimensions_and_attributes(tmp_path: Path) -> None:
    root = zarr.open_group(tmp_path / "s.zarr", mode="w")
    root.create_array(
        "v3", shape=(2, 3), dtype="i1", dimension_names=["y", "x"], attributes={"units": "K"}
    )
    v2 = zarr.open_group(tmp_path / "s.zarr", path="v2", mode="w", zarr_format=2)
    v2.create_array(
        "a", shape=(2, 3), dtype="i1", attributes={"_ARRAY_DIMENSIONS": ["y", "x"], "k": [1]}
    )
    group = roundtrip(tmp_path / "s.zarr", tmp_path, hows=("json",))
    v2_group = roundtrip(tmp_path / "s.zarr" / "v2", tmp_path / "v2", hows=("json",))
    assert _array(group, "v3").meta.dimension_names == ("y", "x")
    assert dict(_array(group, "v3").meta.attributes) == {"units": "K"}
    assert _array(v2_group, "a").meta.dimension_names == ("y", "x")
    assert dict(_array(v2_group, "a").meta.attributes) == {"k": (1,)}


@pytest.mark.parametrize("fmt", [2, 3])
def test_root_array_named_after_the_folder(fmt: int, tmp_path: Path) -> None:
    a = zarr.create_array(
        tmp_path / "sea_surface.v1.zarr", shape=(3,), chunks=(2,), dtype="f4", zarr_format=fmt
    )
    a[:] = [1, 2, 3]
    group = roundtrip(tmp_path / "sea_surface.v1.zarr", tmp_path)
    assert list(group.members) == ["sea_surface.v1"]


def test_inline_threshold(tmp_path: Path) -> None:
    store = write_store(tmp_path / "s.zarr", "shapes_v2")
    sizes = {p.name: p.stat().st_size for p in (store / "g" / "big_chunk").iterdir()}
    group = roundtrip(store, tmp_path, inline_threshold=10_000)
    manifest = _array(group, "g/big_chunk").manifest
    assert (manifest.path_id == INLINED).all()
    assert sizes["0.0"] > 0


def test_inline_coordinates(tmp_path: Path) -> None:
    root = zarr.open_group(tmp_path / "s.zarr", mode="w")
    x = root.create_array("x", shape=(10,), chunks=(3,), dtype="f8", dimension_names=["x"])
    x[:] = np.linspace(0, 1, 10)
    v = root.create_array("v", shape=(10,), chunks=(3,), dtype="f8", dimension_names=["x"])
    v[:] = 1
    group = roundtrip(tmp_path / "s.zarr", tmp_path)
    assert (_array(group, "x").manifest.path_id == INLINED).all()
    assert _array(group, "x").meta.chunks == (10,)
    assert (_array(group, "v").manifest.path_id >= 0).all()
    (tmp_path / "k").mkdir()
    kept = roundtrip(tmp_path / "s.zarr", tmp_path / "k", hows=("json",), inline_coordinates=0)
    assert (_array(kept, "x").manifest.path_id >= 0).all()


def test_big_endian_delta_reads_as_written(tmp_path: Path) -> None:
    """``numcodecs.delta`` then big-endian ``bytes``: the references read the values written.
    (zarr-python 3.1.6 itself reads this store's values byte-swapped: its bug, not the
    store's, whose bytes are the deltas in big-endian order as the codecs say.)"""
    from zarr.codecs.numcodecs import Delta

    written = np.cumsum(_values((20,), "i8"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = zarr.create_array(
            tmp_path / "d.zarr",
            shape=(20,),
            chunks=(8,),
            dtype="i8",
            filters=[Delta(dtype="i8")],
            serializer=BytesCodec(endian="big"),
        )
    d[:] = written
    stored = np.frombuffer(zstd_decode((tmp_path / "d.zarr/c/0").read_bytes()), ">i8")
    np.testing.assert_array_equal(stored, np.diff(written[:8], prepend=0))
    group = ZarrScanner()(str(tmp_path / "d.zarr"))
    back = readback(group, tmp_path)
    for how in ("json", "parquet", "store"):
        np.testing.assert_array_equal(back.read(how, "d"), written, strict=True)


def zstd_decode(data: bytes) -> bytes:
    return bytes(numcodecs.Zstd().decode(data))
