"""ArrayMeta: construction checks, immutability, equality, and its Zarr v2 rendering and parsing."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import pickle
from dataclasses import FrozenInstanceError
from typing import Any

import numcodecs
import numpy as np
import pytest
import ujson
import zarr
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from zarr.core.buffer import default_buffer_prototype
from zarr.storage import MemoryStore

from refzarr import ArrayMeta, RefFormatError
from refzarr.model.kerchunk import metadata_text
from strategies import array_metas, scalar_dtypes


def _meta(**changes: Any) -> ArrayMeta:
    fields: dict[str, Any] = {"shape": (4, 6), "chunks": (2, 4), "dtype": np.dtype("<f4")}
    fields.update(changes)
    return ArrayMeta(**fields)


# -- construction -------------------------------------------------------------------------------


def test_defaults_and_derived_fields() -> None:
    meta = _meta()
    assert meta.fill_value is None
    assert meta.codecs == ()
    assert meta.attributes == {}
    assert meta.dimension_names is None
    assert (meta.order, meta.dimension_separator) == ("C", ".")
    assert meta.ndim == 2
    assert meta.grid_shape == (2, 2)  # the last chunk column overhangs the edge


@pytest.mark.parametrize(
    ("shape", "chunks", "grid"),
    [((), (), ()), ((0,), (5,), (0,)), ((7, 0, 3), (2, 1, 3), (4, 0, 1)), ((1,), (100,), (1,))],
)
def test_grid_shape(shape: tuple[int, ...], chunks: tuple[int, ...], grid: tuple[int, ...]) -> None:
    assert _meta(shape=shape, chunks=chunks).grid_shape == grid


def test_inputs_are_normalised() -> None:
    meta = _meta(
        shape=np.array([4, 6]),
        chunks=[np.int64(2), 4],
        dtype="f4",
        fill_value=1,
        codecs=[{"id": "zlib", "level": 1}],
        attributes={"valid_range": np.array([0.5, 1.5]), "count": np.int16(3)},
        dimension_names=["y", "x"],
    )
    assert meta.shape == (4, 6)
    assert meta.chunks == (2, 4)
    assert meta.dtype == np.dtype("<f4")
    assert meta.fill_value == np.float32(1)
    assert isinstance(meta.fill_value, np.float32)
    assert meta.attributes == {"valid_range": [0.5, 1.5], "count": 3}
    assert meta.dimension_names == ("y", "x")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"shape": (-1, 6)}, r"shape must hold integers >= 0, got \[-1, 6\]"),
        ({"shape": (4.0, 6)}, "shape must hold integers >= 0"),
        ({"shape": (True, 6)}, "shape must hold integers >= 0"),
        ({"shape": "46"}, "shape must be a sequence of integers, got '46'"),
        ({"shape": 4}, "shape must be a sequence of integers, got 4"),
        ({"chunks": (0, 4)}, r"chunks must hold integers >= 1, got \[0, 4\]"),
        ({"chunks": (2,)}, r"chunks \(2,\) must have one entry per dimension of \(4, 6\)"),
        ({"dtype": "not-a-dtype"}, "invalid dtype or fill value"),
        ({"dtype": np.dtype(("<i4", (2,)))}, "a sub-array dtype .* is only valid as a structured"),
        ({"dtype": "u1", "fill_value": 256}, "fill value 256 does not fit dtype uint8"),
        ({"dtype": "i2", "fill_value": 1.5}, r"fill value 1\.5 is not an integer \(dtype int16\)"),
        ({"dtype": "?", "fill_value": "false"}, "expected a boolean fill value, got 'false'"),
        ({"dtype": "?", "fill_value": 2}, "expected a boolean fill value, got 2"),
        ({"fill_value": "abc"}, "invalid dtype or fill value: could not convert string to float"),
        ({"dtype": "c8", "fill_value": "x"}, "invalid dtype or fill value"),
        ({"attributes": {"_ARRAY_DIMENSIONS": ["y", "x"]}}, "pass _ARRAY_DIMENSIONS as dimension"),
        ({"dimension_names": ("y",)}, r"dimension_names \('y',\) must be one str per dimension"),
        ({"dimension_names": ("y", 1)}, "must be one str per dimension"),
        ({"order": "K"}, "order must be 'C' or 'F', got 'K'"),
        ({"dimension_separator": "-"}, "dimension_separator must be '.' or '/', got '-'"),
        ({"codecs": ({"level": 1},)}, "a codec must be a numcodecs config with an 'id'"),
        ({"codecs": ("zlib",)}, "a codec must be a numcodecs config with an 'id', got 'zlib'"),
        ({"codecs": ({"id": 5},)}, "a codec must be a numcodecs config with an 'id'"),
    ],
)
def test_invalid_metadata_is_a_ref_format_error(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(RefFormatError, match=message):
        _meta(**changes)


def test_titled_structured_fields_are_rejected() -> None:
    """Regression: Zarr v2 has no place for field titles, so the rendering could not be parsed."""
    titled = np.dtype([(("a title", "a"), "<i4")])
    with pytest.raises(RefFormatError, match=r"field .* has a title; Zarr v2 cannot store one"):
        _meta(dtype=titled)


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({1: "x"}, r"attributes: mapping keys must be str, got 1"),
        ({"a": {2: "x"}}, r"attributes\['a'\]: mapping keys must be str, got 2"),
        ({"a": {1, 2}}, r"attributes\['a'\]: set is not a JSON value"),
        ({"a": b"bytes"}, r"attributes\['a'\]: bytes is not a JSON value"),
        ({"a": object()}, "object is not a JSON value"),
    ],
)
def test_non_json_attributes_are_a_type_error(attributes: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        _meta(attributes=attributes)


def test_codec_configs_must_be_json() -> None:
    with pytest.raises(TypeError, match=r"codec 'zlib'\['level'\]: set is not a JSON value"):
        _meta(codecs=({"id": "zlib", "level": {1}},))


# -- immutability -------------------------------------------------------------------------------


def test_fields_cannot_be_reassigned() -> None:
    meta = _meta()
    with pytest.raises(FrozenInstanceError):
        meta.shape = (1, 1)  # type: ignore[misc]


def test_attributes_and_codecs_are_deeply_read_only() -> None:
    meta = _meta(attributes={"a": {"b": [1, 2]}}, codecs=[{"id": "zlib", "level": 1}])
    with pytest.raises(TypeError):
        meta.attributes["a"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        meta.attributes["a"]["b"][0] = 3
    with pytest.raises(TypeError):
        meta.codecs[0]["level"] = 9  # type: ignore[index]


def test_later_changes_to_the_inputs_do_not_leak_in() -> None:
    attributes: dict[str, Any] = {"a": [1, 2]}
    codec: dict[str, Any] = {"id": "zlib", "level": 1}
    meta = _meta(attributes=attributes, codecs=[codec])
    attributes["a"].append(3)
    attributes["b"] = 0
    codec["level"] = 9
    assert meta.attributes == {"a": [1, 2]}
    assert meta.codecs[0]["level"] == 1


def test_replace_validates_like_the_constructor() -> None:
    meta = _meta()
    assert meta.replace(shape=(8, 6)).grid_shape == (4, 2)
    assert meta.shape == (4, 6)
    with pytest.raises(RefFormatError, match="chunks must hold integers >= 1"):
        meta.replace(chunks=(0, 1))


@given(array_metas())
def test_as_one_raw_chunk_equals_replace(meta: ArrayMeta) -> None:
    expected = meta.replace(chunks=tuple(max(s, 1) for s in meta.shape), codecs=())
    got = meta.as_one_raw_chunk()
    assert got == expected
    assert got.grid_shape == expected.grid_shape
    assert meta.codecs == meta.replace().codecs  # the original is untouched


def test_pickles() -> None:
    meta = _meta(fill_value=np.nan, attributes={"a": [1, "b"]}, codecs=[{"id": "zlib"}])
    assert pickle.loads(pickle.dumps(meta)) == meta


# -- equality -----------------------------------------------------------------------------------


def test_equal_metadata_hash_alike() -> None:
    a = _meta(fill_value=np.nan, attributes={"x": 1, "y": [np.nan]})
    b = _meta(fill_value=float("nan"), attributes={"y": [float("nan")], "x": 1})
    assert a == b  # NaN equals NaN; attribute order does not matter
    assert hash(a) == hash(b)


@pytest.mark.parametrize(
    "changes",
    [
        {"shape": (4, 7)},
        {"chunks": (2, 2)},
        {"dtype": np.dtype(">f4")},
        {"fill_value": 0.0},
        {"codecs": ({"id": "zlib", "level": 1},)},
        {"attributes": {"a": 1}},
        {"dimension_names": ("y", "x")},
        {"order": "F"},
        {"dimension_separator": "/"},
    ],
)
def test_every_field_takes_part_in_equality(changes: dict[str, Any]) -> None:
    assert _meta() != _meta(**changes)


@pytest.mark.parametrize(("a", "b"), [(True, 1), (1, 1.0), ([1], (2,)), ("1", 1)])
def test_attribute_values_compare_as_json(a: Any, b: Any) -> None:
    assert _meta(attributes={"v": a}) != _meta(attributes={"v": b})


def test_fill_values_compare_by_encoding() -> None:
    assert _meta(fill_value=0.0) == _meta(fill_value=np.float64(0))
    assert _meta(fill_value=None) != _meta(fill_value=0)


# -- Zarr v2 rendering --------------------------------------------------------------------------


def test_zarray_has_kerchunks_field_order_and_puts_codecs_in_filters() -> None:
    meta = _meta(
        fill_value=np.nan,
        codecs=[{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 4}],
        attributes={"units": "m/s"},
        dimension_names=("y", "x"),
    )
    zarray, zattrs = meta.to_zarr_v2()
    assert metadata_text(zarray) == (
        '{"shape":[4,6],"chunks":[2,4],"dtype":"<f4","fill_value":"NaN","order":"C",'
        '"filters":[{"id":"shuffle","elementsize":4},{"id":"zlib","level":4}],'
        '"dimension_separator":".","compressor":null,"zarr_format":2}'
    )
    assert metadata_text(zattrs) == '{"_ARRAY_DIMENSIONS":["y","x"],"units":"m\\/s"}'


def test_zero_dimensional_array_with_dimension_names_renders_an_empty_list() -> None:
    zarray, zattrs = _meta(shape=(), chunks=(), dimension_names=()).to_zarr_v2()
    assert (zarray["shape"], zarray["chunks"], zattrs) == ([], [], {"_ARRAY_DIMENSIONS": []})


@pytest.mark.parametrize(
    ("dtype", "fill", "encoded"),
    [
        ("<f8", np.inf, "Infinity"),
        ("<f4", -np.inf, "-Infinity"),
        ("<f2", 1.5, 1.5),
        ("<c16", complex(1, np.nan), [1.0, "NaN"]),
        ("|b1", True, True),
        (">u8", 2**64 - 1, 2**64 - 1),
        ("<M8[ns]", np.datetime64("NaT", "ns"), -(2**63)),
        (">M8[s]", np.datetime64(7, "s"), 7),
        (">m8[D]", np.timedelta64("NaT", "D"), -(2**63)),
        ("<U3", "héé", "héé"),
        ("|S2", b"ab", "YWI="),
        ("|V3", np.frombuffer(b"\x00\x01\x02", "V3")[0], "AAEC"),
    ],
)
def test_fill_value_encodings(dtype: str, fill: Any, encoded: Any) -> None:
    meta = _meta(dtype=np.dtype(dtype), fill_value=fill)
    assert meta.to_zarr_v2()[0]["fill_value"] == encoded
    assert ArrayMeta.from_zarr_v2(meta.to_zarr_v2()[0]) == meta


def test_big_endian_datetime_fill_values_are_not_byte_swapped() -> None:
    """Regression: a NaT fill of a '>M8' array was written as 128 (its bytes read natively)."""
    meta = _meta(dtype=np.dtype(">M8[ns]"), fill_value=np.datetime64("NaT", "ns"))
    assert meta.to_zarr_v2()[0]["fill_value"] == -(2**63)
    parsed = ArrayMeta.from_zarr_v2(
        {"shape": [1], "chunks": [1], "dtype": ">M8[ns]", "fill_value": 5}
    )
    assert parsed.fill_value == np.datetime64(5, "ns")


def test_structured_dtype_renders_as_a_field_list() -> None:
    dtype = np.dtype([("a", "<i4"), ("b", [("c", ">f8", (2,))])])
    zarray = _meta(dtype=dtype, fill_value=np.zeros((), dtype)[()]).to_zarr_v2()[0]
    assert zarray["dtype"] == [["a", "<i4"], ["b", [["c", ">f8", [2]]]]]
    assert zarray["fill_value"] == base64.standard_b64encode(bytes(20)).decode()


# -- Zarr v2 parsing ----------------------------------------------------------------------------


def test_parses_kerchunk_hdf5_metadata() -> None:
    zarray = {
        "shape": [6, 4, 5],
        "chunks": [2, 3, 3],
        "dtype": "<f4",
        "fill_value": "NaN",
        "order": "C",
        "filters": [{"id": "shuffle", "elementsize": 4}, {"id": "zlib", "level": 4}],
        "dimension_separator": ".",
        "compressor": None,
        "zarr_format": 2,
    }
    zattrs = {"_ARRAY_DIMENSIONS": ["time", "lat", "lon"], "units": "degC"}
    meta = ArrayMeta.from_zarr_v2(zarray, zattrs)
    assert math.isnan(meta.fill_value)
    assert meta.dimension_names == ("time", "lat", "lon")
    assert meta.attributes == {"units": "degC"}
    assert meta.to_zarr_v2() == (zarray, zattrs)


def test_minimal_zarray_takes_zarr_defaults() -> None:
    meta = ArrayMeta.from_zarr_v2({"shape": [3], "chunks": [1], "dtype": "i8"})
    assert meta == ArrayMeta((3,), (1,), np.dtype("<i8"))


def test_compressor_is_appended_to_the_filters() -> None:
    """The model keeps one ordered pipeline; a compressor is its last codec.

    A ``.zarray`` with a ``compressor`` is therefore rendered back with the compressor inside
    ``filters`` (``compressor: null``): same data, different metadata bytes.
    """
    zarray = {
        "shape": [3],
        "chunks": [1],
        "dtype": "<i4",
        "filters": [{"id": "delta", "dtype": "<i4"}],
        "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1},
    }
    meta = ArrayMeta.from_zarr_v2(zarray)
    assert [c["id"] for c in meta.codecs] == ["delta", "blosc"]
    assert meta.to_zarr_v2()[0]["compressor"] is None


@pytest.mark.parametrize(
    ("zarray", "message"),
    [
        ({"chunks": [1], "dtype": "<i4"}, r"temp/\.zarray: \.zarray lacks shape"),
        ({"shape": [1], "dtype": "<i4"}, r"\.zarray lacks chunks"),
        ({"shape": [1], "chunks": [1], "dtype": "<i4", "zarr_format": 3}, "expected zarr_format 2"),
        ({"shape": [1], "chunks": [1], "dtype": 5}, "expected a dtype string or a list of fields"),
        ({"shape": [1], "chunks": [1], "dtype": [["a"]]}, "must be \\[name, type\\(, shape\\)\\]"),
        ({"shape": [1], "chunks": [1], "dtype": "<i4", "fill_value": "x"}, "expected an integer"),
        ({"shape": [1], "chunks": [1], "dtype": "|S2", "fill_value": "!!"}, "invalid"),
        ({"shape": [1], "chunks": [1], "dtype": "|S2", "fill_value": "YWJj"}, "decodes to 3 bytes"),
        ({"shape": [1], "chunks": [1], "dtype": "<c8", "fill_value": 1}, "\\[real, imag\\]"),
        ({"shape": [1], "chunks": [1], "dtype": "<i4", "order": "X"}, "order must be 'C' or 'F'"),
        (
            {"shape": "1", "chunks": [1], "dtype": "<i4"},
            r"shape must hold integers >= 0, got \['1'\]",
        ),
        ({"shape": [1], "chunks": [1], "dtype": "<i4", "filters": [{}]}, "numcodecs config"),
    ],
)
def test_invalid_zarray_names_where(zarray: dict[str, Any], message: str) -> None:
    with pytest.raises(RefFormatError, match=message) as info:
        ArrayMeta.from_zarr_v2(zarray, where="temp/.zarray")
    assert str(info.value).startswith("temp/.zarray: ")


def test_zero_fill_of_a_bytes_dtype_is_accepted() -> None:
    """zarr-python 2 wrote ``0`` as the fill value of empty ``S`` dtypes."""
    meta = ArrayMeta.from_zarr_v2({"shape": [1], "chunks": [1], "dtype": "|S4", "fill_value": 0})
    assert meta.fill_value == b""


# -- properties ---------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(array_metas())
def test_zarr_v2_round_trip(meta: ArrayMeta) -> None:
    assert ArrayMeta.from_zarr_v2(*meta.to_zarr_v2()) == meta


@settings(max_examples=50, deadline=None)
@given(array_metas(), st.sampled_from([json.loads, ujson.loads]))
def test_zarr_v2_round_trip_through_json_text(meta: ArrayMeta, loads: Any) -> None:
    zarray, zattrs = meta.to_zarr_v2()
    parsed = ArrayMeta.from_zarr_v2(loads(metadata_text(zarray)), loads(metadata_text(zattrs)))
    assert parsed == meta
    # the same text again: attribute order, int/float/bool kinds and every digit survive
    assert [metadata_text(d) for d in parsed.to_zarr_v2()] == [
        metadata_text(zarray),
        metadata_text(zattrs),
    ]


def _zarr_python_zarray(meta: ArrayMeta) -> str:
    """The ``.zarray`` zarr-python 3 writes for ``meta``, minified by ujson as kerchunk does."""
    store = MemoryStore()
    zarr.create_array(
        store,
        shape=meta.shape,
        chunks=meta.chunks,
        dtype=meta.dtype,
        fill_value=meta.fill_value,
        zarr_format=2,
        filters=[numcodecs.get_codec(dict(c)) for c in meta.codecs] or None,
        compressors=None,
        order=meta.order,
        chunk_key_encoding={"name": "v2", "separator": meta.dimension_separator},
    )
    raw = asyncio.run(store.get(".zarray", default_buffer_prototype()))
    assert raw is not None
    return str(ujson.dumps(ujson.loads(raw.to_bytes())))


_REAL_CODECS = st.lists(
    st.sampled_from([{"id": "zlib", "level": 1}, {"id": "shuffle", "elementsize": 4}]), max_size=2
)


@settings(max_examples=60, deadline=None)
@given(array_metas(dtypes=scalar_dtypes()), _REAL_CODECS)
def test_zarray_text_is_what_zarr_python_and_kerchunk_write(meta: ArrayMeta, codecs: Any) -> None:
    """kerchunk's ``.zarray`` is zarr-python's, minified with ujson; ours must be the same bytes.

    Not for ``S`` fills: zarr-python base64-encodes the value without its padding NULs and
    refzarr with them (both decode to the same value).
    """
    assume(meta.dtype.kind != "S" or meta.fill_value is None)
    meta = meta.replace(codecs=tuple(codecs))
    assert metadata_text(meta.to_zarr_v2()[0]) == _zarr_python_zarray(meta)
