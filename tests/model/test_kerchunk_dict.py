"""Kerchunk reference dicts <-> RefGroup: parsing, errors naming keys, rendering, round trips."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest
import ujson
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from refzarr import ArrayMeta, ChunkManifest, ChunkRef, RefArray, RefFormatError, RefGroup
from refzarr.model.kerchunk import (
    decode_inline,
    encode_inline,
    from_kerchunk,
    metadata_text,
    to_kerchunk,
)
from roundtrip import KerchunkCase, assert_groups_identical
from strategies import json_values, ref_groups

ZARRAY = {"shape": [4], "chunks": [2], "dtype": "<i2", "fill_value": 0, "zarr_format": 2}
ZARRAY_2D = {**ZARRAY, "shape": [2, 2], "chunks": [1, 1]}


def _refs(**chunks: Any) -> dict[str, Any]:
    """A Version 0 set: root group, array ``a`` (4 values in chunks of 2), the given chunk keys."""
    return {".zgroup": '{"zarr_format":2}', "a/.zarray": json.dumps(ZARRAY), **chunks}


# -- reading ------------------------------------------------------------------------------------


def test_reads_every_kind_of_value() -> None:
    refs = _refs(**{"a/0": ["s3://b/f.nc", 100, 4]})
    refs["b/.zarray"] = json.dumps({**ZARRAY, "shape": [8]})
    refs |= {"b/0": ["s3://b/g.nc"], "b/1": "text", "b/2": "base64:AAEC", "b/3": {"k": "v"}}
    group = from_kerchunk(refs)
    a, b = group["a"], group["b"]
    assert isinstance(a, RefArray)
    assert isinstance(b, RefArray)
    assert a.manifest[0] == ChunkRef("s3://b/f.nc", 100, 4)
    assert a.manifest[1] is None
    assert b.manifest[0] == ChunkRef("s3://b/g.nc", 0, None)
    assert b.manifest[1] == b"text"
    assert b.manifest[2] == b"\x00\x01\x02"
    assert b.manifest[3] == b'{"k": "v"}'


def test_metadata_may_be_text_bytes_or_json_objects() -> None:
    """The spec allows metadata values written as JSON objects instead of JSON text."""
    as_text = from_kerchunk(_refs())
    as_objects = from_kerchunk({".zgroup": {"zarr_format": 2}, "a/.zarray": ZARRAY})
    as_bytes = from_kerchunk(
        {".zgroup": b'{"zarr_format":2}', "a/.zarray": json.dumps(ZARRAY).encode()}
    )
    assert as_text == as_objects == as_bytes


def test_attributes_and_dimension_names() -> None:
    refs = _refs()
    refs[".zattrs"] = '{"title":"t\\u00e9st"}'
    refs["a/.zattrs"] = '{"_ARRAY_DIMENSIONS":["x"],"units":"m\\/s"}'
    group = from_kerchunk(refs)
    assert group.attributes == {"title": "tést"}
    array = group["a"]
    assert isinstance(array, RefArray)
    assert array.meta.dimension_names == ("x",)
    assert array.meta.attributes == {"units": "m/s"}


def test_version_1_refs_are_read() -> None:
    refs = {
        "version": 1,
        "templates": {"u": "s3://b"},
        "refs": _refs(**{"a/1": ["{{u}}/f.nc", 0, 8]}),
    }
    array = from_kerchunk(refs)["a"]
    assert isinstance(array, RefArray)
    assert array.manifest[1] == ChunkRef("s3://b/f.nc", 0, 8)


@pytest.mark.parametrize("version", [0, 1])
def test_in_memory_tuples_and_base64_bytes_read_as_fsspec_reads_them(version: int) -> None:
    """Regression: tuple references and ``b"base64:..."`` bytes values (both fine for fsspec)."""
    refs = _refs(**{"a/0": ("s3://b/f.nc", 1, 2), "a/1": b"base64:aGk="})
    array = from_kerchunk(refs if version == 0 else {"version": 1, "refs": refs})["a"]
    assert isinstance(array, RefArray)
    assert array.manifest[0] == ChunkRef("s3://b/f.nc", 1, 2)
    assert array.manifest[1] == b"hi"


def test_null_urls_take_the_target() -> None:
    refs = _refs(**{"a/0": [None, 3, 4]})
    array = from_kerchunk(refs, target="file:///data.nc")["a"]
    assert isinstance(array, RefArray)
    assert array.manifest[0] == ChunkRef("file:///data.nc", 3, 4)


def test_null_url_without_target_says_what_to_do() -> None:
    with pytest.raises(RefFormatError, match=r"key 'a/0': the reference has no URL .*pass target="):
        from_kerchunk(_refs(**{"a/0": [None, 3, 4]}))


def test_groups_implied_by_deeper_keys_are_created() -> None:
    refs = {"g/h/a/.zarray": json.dumps(ZARRAY), "g/h/a/1": ["u", 0, 1]}
    group = from_kerchunk(refs)
    assert [path for path, _ in group.groups()] == ["", "g", "g/h"]
    assert "g/h/a" in group


def test_slash_separated_chunk_keys() -> None:
    refs = {
        "a/.zarray": json.dumps({**ZARRAY_2D, "dimension_separator": "/"}),
        "a/1/0": ["u", 0, 1],
    }
    array = from_kerchunk(refs)["a"]
    assert isinstance(array, RefArray)
    assert array.manifest[1, 0] == ChunkRef("u", 0, 1)


def test_zero_dimensional_array_chunk_key_is_0() -> None:
    refs = {"s/.zarray": json.dumps({**ZARRAY, "shape": [], "chunks": []}), "s/0": "base64:BQA="}
    array = from_kerchunk(refs)["s"]
    assert isinstance(array, RefArray)
    assert array.manifest[()] == b"\x05\x00"


def test_consolidated_metadata_is_ignored() -> None:
    refs = _refs()
    refs[".zmetadata"] = json.dumps(
        {"metadata": {"other/.zarray": ZARRAY}, "zarr_consolidated_format": 1}
    )
    assert list(from_kerchunk(refs).members) == ["a"]


def test_url_table_is_shared_and_per_array() -> None:
    refs = _refs(**{"a/0": ["x", 0, 1], "a/1": ["y", 0, 1]})
    refs["b/.zarray"] = json.dumps(ZARRAY)
    refs["b/0"] = ["y", 5, 1]
    group = from_kerchunk(refs)
    a, b = group["a"], group["b"]
    assert isinstance(a, RefArray)
    assert isinstance(b, RefArray)
    assert a.manifest.paths == ("x", "y")
    assert b.manifest.paths == ("y",)


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"notes.txt": "hello"}, r"key 'notes\.txt': not Zarr metadata and not a chunk key"),
        ({"a/.zchunkstore": "{}"}, r"key 'a/\.zchunkstore': not Zarr metadata"),
        ({"a/0.0": ["u", 0, 1]}, r"key 'a/0\.0': not Zarr metadata and not a chunk key"),
        ({"a/x": ["u", 0, 1]}, r"key 'a/x': .*use refzarr\.expand_references"),
        ({"a/٣": ["u", 0, 1]}, r"key 'a/٣': not Zarr metadata"),  # a non-ASCII digit
        ({"a/2": ["u", 0, 1]}, r"key 'a'.*: chunk 2 lies outside the chunk grid \(2,\)"),
        ({"a/0": ["u", 0]}, r"key 'a/0': a reference must be \[url\] or \[url, offset, length\]"),
        ({"a/0": []}, r"key 'a/0': a reference must be"),
        ({"a/0": ["", 0, 1]}, r"key 'a/0': the URL must be a non-empty string, got ''"),
        ({"a/0": [7, 0, 1]}, r"key 'a/0': the URL must be a non-empty string, got 7"),
        ({"a/0": ["u", -1, 1]}, r"key 'a/0': the offset must lie in \[0, 9223372036854775807\]"),
        ({"a/0": ["u", 0, 2**63]}, r"key 'a/0': the length must lie in \[0, 9223372036854775807\]"),
        ({"a/0": ["u", 1.0, 1]}, r"key 'a/0': the offset must be an integer, got 1\.0"),
        ({"a/0": ["u", 0, True]}, r"key 'a/0': the length must be an integer, got True"),
        ({"a/0": ["u", "0", 1]}, r"key 'a/0': the offset must be an integer, got '0'"),
        ({"a/0": "base64:!!"}, r"key 'a/0': invalid base64 data"),
        ({"a/0": 5}, r"key 'a/0': unsupported value type int"),
        ({"a/0": None}, r"key 'a/0': unsupported value type NoneType"),
        ({"a/0": ["u", 0, 1], "a/00": ["u", 1, 1]}, r"chunk 0 is given more than once"),
        ({"a/0": "x", "a/00": "y"}, r"key 'a/00': chunk given more than once"),
    ],
)
def test_malformed_chunk_keys_are_named(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(RefFormatError, match=message):
        from_kerchunk(_refs(**extra))


@pytest.mark.parametrize(
    ("refs", "message"),
    [
        ({"a/.zarray": "{not json"}, r"key 'a/\.zarray': metadata is not valid JSON"),
        ({"a/.zarray": "[1, 2]"}, r"key 'a/\.zarray': metadata must be a JSON object"),
        ({"a/.zarray": b"\xff\xfe"}, r"key 'a/\.zarray': metadata is not UTF-8 text"),
        ({"a/.zarray": 12}, r"key 'a/\.zarray': metadata must be JSON text or an object, got int"),
        ({"a/.zarray": '{"shape": [1]}'}, r"key 'a/\.zarray': \.zarray lacks chunks, dtype"),
        ({".zarray": json.dumps(ZARRAY)}, r"the root of the reference set is an array"),
        (
            {"a/.zarray": json.dumps(ZARRAY), "a/b/.zarray": json.dumps(ZARRAY)},
            r"array 'a' has a member 'a/b'",
        ),
        ({"a/.zarray": json.dumps(ZARRAY), "a/.zgroup": "{}"}, r"'a' is both a group and an array"),
        ({".zgroup": "nonsense"}, r"key '\.zgroup': metadata is not valid JSON"),
        ({".zattrs": '{"a": {1: 2}}'}, r"key '\.zattrs': metadata is not valid JSON"),
        (
            {"a/.zarray": json.dumps(ZARRAY), "a/.zattrs": '"text"'},
            r"a/\.zattrs'?: metadata must be a JSON object",
        ),
    ],
)
def test_malformed_metadata_is_named(refs: dict[str, Any], message: str) -> None:
    with pytest.raises(RefFormatError, match=message):
        from_kerchunk(refs)


@pytest.mark.parametrize(
    ("refs", "message"),
    [
        (["not", "a", "dict"], "a reference set must be a JSON object, got list"),
        ({"version": 2, "refs": {}}, "unsupported reference set version 2: expected 1"),
        ({"version": 1, "refs": ["x"]}, "'refs' must be an object"),
        ({"version": 1, "extra": {}}, r"unknown top-level Version 1 fields: \['extra'\]"),
    ],
)
def test_malformed_reference_sets(refs: Any, message: str) -> None:
    with pytest.raises(RefFormatError, match=message):
        from_kerchunk(refs)


# -- rendering ----------------------------------------------------------------------------------


def test_to_kerchunk_renders_every_entry_kind() -> None:
    meta = ArrayMeta((6,), (1,), np.dtype("u1"), dimension_names=("x",))
    manifest = ChunkManifest.from_arrays(
        ["s3://b/f.nc"],
        [0, 0, -2, -2, -2, -1],
        [8, 0, 0, 0, 0, 0],
        np.array([2, 2**64 - 1, 0, 0, 0, 0], dtype=np.uint64),
        {(2,): b"plain", (3,): b"\xff\x00", (4,): b"base64:looks encoded"},
    )
    refs = to_kerchunk(RefGroup(attributes={"a": 1}, members={"v": RefArray(meta, manifest)}))
    assert refs == {
        ".zgroup": '{"zarr_format":2}',
        ".zattrs": '{"a":1}',
        "v/.zarray": '{"shape":[6],"chunks":[1],"dtype":"|u1","fill_value":null,"order":"C",'
        '"filters":null,"dimension_separator":".","compressor":null,"zarr_format":2}',
        "v/.zattrs": '{"_ARRAY_DIMENSIONS":["x"]}',
        "v/0": ["s3://b/f.nc", 8, 2],
        "v/1": ["s3://b/f.nc"],
        "v/2": "plain",
        "v/3": "base64:/wA=",
        "v/4": "base64:" + base64.b64encode(b"base64:looks encoded").decode(),
    }


def test_to_kerchunk_slash_separator_and_scalars() -> None:
    grid = ArrayMeta((2, 2), (1, 1), np.dtype("u1"), dimension_separator="/")
    scalar = ArrayMeta((), (), np.dtype("u1"))
    ranges = [[0, 1], [0, 0]]  # only chunk (0, 1) is written
    written = ChunkManifest.from_arrays(["u"], [[-1, 0], [-1, -1]], ranges, ranges)
    scalar_manifest = ChunkManifest.from_arrays(["u"], np.int32(0), 5, 1)
    group = RefGroup(members={"g": RefArray(grid, written), "s": RefArray(scalar, scalar_manifest)})
    refs = to_kerchunk(group)
    assert refs["g/0/1"] == ["u", 1, 1]
    assert refs["s/0"] == ["u", 5, 1]
    assert not {"g/0/0", "g/1/0", "g/1/1"} & set(refs)


def test_kerchunk_references_come_back_unchanged(kerchunk_case: KerchunkCase) -> None:
    """Every key kerchunk wrote for the netCDF file, metadata text included, is rendered again."""
    refs = kerchunk_case.refs["refs"]
    assert to_kerchunk(from_kerchunk(kerchunk_case.refs)) == refs


# -- metadata text ------------------------------------------------------------------------------


def test_metadata_text_escapes_like_kerchunk() -> None:
    """Regression: refzarr wrote ``m/s``, ``1e-05``; kerchunk (ujson) writes ``m\\/s``, ``1e-5``."""
    document = {
        "units": "m/s",
        "scale": 1e-05,
        "big": 1e300,
        "tiny": 2.5e-310,
        "del": "\x7f",
        "é": [None, True],
    }
    assert metadata_text(document) == ujson.dumps(document)
    assert metadata_text(document).startswith('{"units":"m\\/s","scale":1e-5,')


@settings(max_examples=300, deadline=None)
@given(json_values(max_leaves=12))
def test_metadata_text_is_byte_identical_to_ujson(document: Any) -> None:
    assert metadata_text(document) == ujson.dumps(document)
    assert json.dumps(json.loads(metadata_text(document))) == json.dumps(document)


# -- inline data --------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.binary() | st.text().map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_inline_round_trip(data: bytes) -> None:
    text = encode_inline(data)
    assert text.isascii()
    assert decode_inline("k", text) == data


def test_inline_ascii_is_kept_as_text_and_other_bytes_become_base64() -> None:
    assert encode_inline(b"hello") == "hello"
    assert encode_inline("é".encode()) == "base64:w6k="
    assert encode_inline(b"base64:x") == "base64:YmFzZTY0Ong="


def test_non_base64_text_is_utf8() -> None:
    assert decode_inline("k", "é") == "é".encode()


# -- properties ---------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(ref_groups())
def test_kerchunk_dict_round_trip(group: RefGroup) -> None:
    assert_groups_identical(from_kerchunk(to_kerchunk(group)), group)


@settings(max_examples=25, deadline=None)
@given(ref_groups(), st.sampled_from([(json.dumps, json.loads), (ujson.dumps, ujson.loads)]))
def test_round_trip_through_json_text(group: RefGroup, codec: Any) -> None:
    """As a kerchunk user would: dump the dict to JSON text (json or ujson) and load it back."""
    dumps, loads = codec
    assert_groups_identical(from_kerchunk(loads(dumps(to_kerchunk(group)))), group)


@settings(max_examples=25, deadline=None)
@given(ref_groups())
def test_round_trip_wrapped_in_version_1(group: RefGroup) -> None:
    refs = to_kerchunk(group)
    # a URL holding "{{" is a template in Version 1 by definition
    assume(not any(isinstance(v, list) and "{{" in v[0] for v in refs.values()))
    assert_groups_identical(from_kerchunk({"version": 1, "refs": refs}), group)


def test_chunk_index_beyond_int64_is_outside_the_grid() -> None:
    # regression: an index >= 2**63 raised OverflowError instead of RefFormatError
    refs = {
        ".zgroup": '{"zarr_format":2}',
        "x/.zarray": '{"shape":[4],"chunks":[2],"dtype":"<i4","fill_value":0,"zarr_format":2}',
        f"x/{2**63}": ["f", 0, 1],
    }
    with pytest.raises(RefFormatError, match=r"lies outside the chunk grid \(2,\)"):
        from_kerchunk(refs)


def test_inline_text_with_a_lone_surrogate_is_a_format_error() -> None:
    # regression: a lone surrogate (valid in JSON text) raised UnicodeEncodeError
    refs = {
        ".zgroup": '{"zarr_format":2}',
        "x/.zarray": '{"shape":[2],"chunks":[2],"dtype":"|u1","fill_value":0,"zarr_format":2}',
        "x/0": "\ud800",
    }
    with pytest.raises(RefFormatError, match=r"not valid Unicode.*base64"):
        from_kerchunk(refs)
