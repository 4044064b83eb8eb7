"""The input -> expected bytes cases fsspec's reference tests cover, checked against refzarr.

Same cases as fsspec's own test vectors (Version 0 and 1 values, templates and ``gen``, default
targets, compressed reference files, Parquet with one or several record files and arrays),
written independently: every key must resolve to exactly the bytes fsspec promises.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import refzarr
from refzarr import ChunkRef, RefArray, RefFormatError, RefGroup

DATA = b"0123456789abcdefghij"
OTHER = b"another file's bytes"
HELLO_B64 = "base64:" + base64.b64encode(b"hello").decode()


@pytest.fixture
def files(make_data_file: Callable[[str, bytes], Path]) -> tuple[str, str]:
    """Two local files with known bytes, as ``file://`` URLs."""
    first = make_data_file("data/first.bin", DATA)
    second = make_data_file("data/second.bin", OTHER)
    return first.as_uri(), second.as_uri()


def resolve(entry: Any) -> bytes:
    """The bytes an expanded entry or a manifest entry stands for."""
    if isinstance(entry, bytes):
        return entry
    if isinstance(entry, str):
        return entry.encode("utf-8")
    if isinstance(entry, dict):
        return json.dumps(entry).encode("utf-8")
    if isinstance(entry, ChunkRef):
        entry = [entry.url] if entry.length is None else list(entry)
    fs, path = fsspec.core.url_to_fs(entry[0])
    if len(entry) == 1:
        data: bytes = fs.cat_file(path)
    else:
        data = fs.cat_file(path, entry[1], entry[1] + entry[2])
    return data


def chunk_bytes(group: RefGroup, path: str) -> list[bytes | None]:
    """Every chunk of an array in C order: its bytes, or None when never written."""
    array = group[path]
    assert isinstance(array, RefArray)
    manifest = array.manifest
    entries = [manifest[index] for index in np.ndindex(*manifest.grid_shape)]
    return [None if e is None else resolve(e) for e in entries]


def _array_refs(chunks: dict[str, Any], **zarray: Any) -> dict[str, Any]:
    """A Zarr hierarchy holding array ``x`` (one byte per chunk) and the given chunk keys."""
    n = len(chunks)
    meta = {"shape": [n], "chunks": [1], "dtype": "|u1", "zarr_format": 2, **zarray}
    return {".zgroup": '{"zarr_format":2}', "x/.zarray": json.dumps(meta), **chunks}


# -- Version 0 ----------------------------------------------------------------------------------


def _simple(first: str) -> dict[str, Any]:
    """Inline text and bytes, byte ranges, base64 data and a JSON-object value."""
    return {
        "a": b"text",
        "b": (first, 0, 5),
        "c": [first, 3, 4],
        "d": HELLO_B64.encode(),
        "e": HELLO_B64,
        "f": {"key": "value", "n": [1, 2]},
        "g": "plain text",
    }


SIMPLE_BYTES = {
    "a": b"text",
    "b": DATA[:5],
    "c": DATA[3:7],
    "d": b"hello",
    "e": b"hello",
    "f": json.dumps({"key": "value", "n": [1, 2]}).encode(),
    "g": b"plain text",
}


def test_version_0_values_expand_to_their_bytes(files: tuple[str, str]) -> None:
    expanded = refzarr.expand_references(_simple(files[0]))
    assert {k: resolve(v) for k, v in expanded.items()} == SIMPLE_BYTES
    assert expanded["f"] == {"key": "value", "n": [1, 2]}  # objects stay objects


def test_version_1_refs_expand_like_version_0(files: tuple[str, str]) -> None:
    expanded = refzarr.expand_references({"version": 1, "refs": _simple(files[0])})
    assert {k: resolve(v) for k, v in expanded.items()} == SIMPLE_BYTES


@pytest.mark.parametrize("version", [0, 1])
def test_the_same_values_as_chunks_of_a_zarr_array(files: tuple[str, str], version: int) -> None:
    chunks = {f"x/{i}": v for i, v in enumerate(_simple(files[0]).values())}
    refs = _array_refs(chunks)
    group = refzarr.read(refs if version == 0 else {"version": 1, "refs": refs})
    assert chunk_bytes(group, "x") == list(SIMPLE_BYTES.values())


def test_references_into_two_files_and_whole_files(files: tuple[str, str]) -> None:
    first, second = files
    refs = {"a": [first, 1, 1], "b": [first, 2, 1], "c": [second], "d": [second, 4, 6]}
    expanded = refzarr.expand_references(refs)
    assert {k: resolve(v) for k, v in expanded.items()} == {
        "a": DATA[1:2],
        "b": DATA[2:3],
        "c": OTHER,
        "d": OTHER[4:10],
    }
    group = refzarr.read(_array_refs({f"x/{i}": v for i, v in enumerate(refs.values())}))
    assert chunk_bytes(group, "x") == [DATA[1:2], DATA[2:3], OTHER, OTHER[4:10]]


def test_null_urls_refer_to_the_default_target(files: tuple[str, str]) -> None:
    first = files[0]
    refs = {"a": b"inline", "b": [None, 2, 5]}
    expanded = refzarr.expand_references(refs, target=first)
    assert resolve(expanded["b"]) == DATA[2:7]
    group = refzarr.read(_array_refs({"x/0": b"inline", "x/1": (None, 2, 5)}), target=first)
    assert chunk_bytes(group, "x") == [b"inline", DATA[2:7]]


def test_null_url_without_a_target_is_an_error() -> None:
    with pytest.raises(RefFormatError, match="key 'b': the reference has no URL"):
        refzarr.expand_references({"b": [None, 2, 5]})


def test_gzip_compressed_reference_file(files: tuple[str, str], tmp_path: Path) -> None:
    path = tmp_path / "refs.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"a": [files[1]]}).encode()))
    assert resolve(refzarr.expand_references(path)["a"]) == OTHER


def test_array_without_chunks_reads_as_missing() -> None:
    zarray = {"chunks": [1], "compressor": None, "dtype": "<f8", "fill_value": "NaN"}
    zarray |= {"filters": [], "order": "C", "shape": [10], "zarr_format": 2}
    group = refzarr.read({".zgroup": '{"zarr_format":2}', "x/.zarray": json.dumps(zarray)})
    array = group["x"]
    assert isinstance(array, RefArray)
    assert math.isnan(array.meta.fill_value)
    assert chunk_bytes(group, "x") == [None] * 10


# -- Version 1 templates and gen ----------------------------------------------------------------


def test_templates_and_gen_expand(files: tuple[str, str]) -> None:
    first, second = files
    folder, _, name = first.rpartition("/")
    refs = {
        "version": 1,
        "templates": {"dir": folder, "pick": "{{d}}/{{n}}"},
        "gen": [
            {
                "key": "g{{k}}",
                "url": "{{dir}}/" + name,
                "offset": "{{k * 3}}",
                "length": "{{k + 1}}",
                "dimensions": {"k": {"stop": 4}},
            },
            {"key": "g{{k}}", "url": second, "dimensions": {"k": {"start": 4, "stop": 6}}},
        ],
        "refs": {
            "inline": "data",
            "range": ["{{dir}}/" + name, 10, 3],
            "call": [f"{{{{pick(d='{folder}', n='{name}')}}}}", 0, 2],
            "whole": [second],
            "object": {"k": "v"},
        },
    }
    expanded = refzarr.expand_references(refs)
    assert expanded == {
        "inline": "data",
        "range": [first, 10, 3],
        "call": [first, 0, 2],
        "whole": [second],
        "object": {"k": "v"},
        "g0": [first, 0, 1],
        "g1": [first, 3, 2],
        "g2": [first, 6, 3],
        "g3": [first, 9, 4],
        "g4": [second],
        "g5": [second],
    }
    assert resolve(expanded["g2"]) == DATA[6:9]
    assert resolve(expanded["g5"]) == OTHER


@pytest.mark.parametrize("missing", ["offset", "length"])
def test_gen_needs_offset_and_length_together(missing: str) -> None:
    item = {"key": "k{{i}}", "url": "u{{i}}", "offset": "0", "length": "1"}
    item |= {"dimensions": {"i": {"stop": 2}}}
    del item[missing]
    with pytest.raises(RefFormatError, match="'offset' and 'length' must be given together"):
        refzarr.expand_references({"version": 1, "gen": [item]})


def test_gen_of_whole_files() -> None:
    refs = {
        "version": 1,
        "templates": {"u": "https://host/path"},
        "gen": [{"key": "k{{i}}", "url": "{{u}}_{{i}}", "dimensions": {"i": {"stop": 2}}}],
    }
    assert refzarr.expand_references(refs) == {
        "k0": ["https://host/path_0"],
        "k1": ["https://host/path_1"],
    }


def test_empty_version_1_set() -> None:
    assert refzarr.expand_references({"version": 1}) == {}
    assert refzarr.read({"version": 1}) == RefGroup()


# -- Parquet ------------------------------------------------------------------------------------


def _write_parquet_refs(
    root: Path,
    metadata: dict[str, Any],
    record_size: int,
    records: dict[str, list[dict[str, Any]]],
    *,
    dictionary_paths: bool = False,
) -> Path:
    """A Parquet reference set: ``.zmetadata`` plus ``<array>/refs.<n>.parq`` record files.

    ``records`` maps a record file's path (``"x/refs.0.parq"``) to its rows.
    """
    root.mkdir()
    zmetadata = {"metadata": metadata, "record_size": record_size, "zarr_consolidated_format": 1}
    (root / ".zmetadata").write_text(json.dumps(zmetadata))
    for name, rows in records.items():
        path_type = pa.dictionary(pa.int32(), pa.string()) if dictionary_paths else pa.string()
        schema = pa.schema(
            [
                ("path", path_type),
                ("offset", pa.int64()),
                ("size", pa.int64()),
                ("raw", pa.binary()),
            ]
        )
        columns = {field: [row.get(field) for row in rows] for field in schema.names}
        columns["offset"] = [v or 0 for v in columns["offset"]]
        columns["size"] = [v or 0 for v in columns["size"]]
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns, schema=schema), root / name)
    return root


def _zarray(shape: list[int], chunks: list[int]) -> dict[str, Any]:
    return {"chunks": chunks, "compressor": None, "dtype": "i8", "filters": None, "shape": shape}


@pytest.mark.parametrize("dictionary_paths", [False, True], ids=["str-paths", "categorical-paths"])
def test_parquet_single_record_file(
    files: tuple[str, str], tmp_path: Path, dictionary_paths: bool
) -> None:
    first = files[0]
    metadata = {".zgroup": {"zarr_format": 2}, "stuff/.zarray": _zarray([3], [1])}
    rows = [
        {"raw": b"raw"},  # inline data
        {"path": first},  # size 0: the whole file
        {"path": first, "offset": 4, "size": 4},  # a byte range
    ]
    root = _write_parquet_refs(
        tmp_path / "refs.parq",
        metadata,
        10,
        {"stuff/refs.0.parq": rows},
        dictionary_paths=dictionary_paths,
    )
    assert chunk_bytes(refzarr.read(root), "stuff") == [b"raw", DATA, DATA[4:8]]


def test_parquet_several_record_files(files: tuple[str, str], tmp_path: Path) -> None:
    first, second = files
    metadata = {".zgroup": {"zarr_format": 2}, "stuff/.zarray": _zarray([6], [1])}
    records = {
        "stuff/refs.0.parq": [
            {"raw": b"raw1"},
            {"path": first},
            {"path": first, "offset": 4, "size": 4},
        ],
        "stuff/refs.1.parq": [
            {"raw": b"raw2"},
            {"path": second},
            {"path": second, "offset": 2, "size": 2},
        ],
    }
    root = _write_parquet_refs(tmp_path / "refs.parq", metadata, 3, records)
    assert chunk_bytes(refzarr.read(root), "stuff") == [
        b"raw1",
        DATA,
        DATA[4:8],
        b"raw2",
        OTHER,
        OTHER[2:4],
    ]


def test_parquet_several_arrays_in_nested_groups(files: tuple[str, str], tmp_path: Path) -> None:
    first, second = files
    metadata = {
        ".zgroup": {"zarr_format": 2},
        ".zattrs": {"title": "several arrays"},
        "top/.zarray": _zarray([2, 2], [1, 1]),
        "deep/.zgroup": {"zarr_format": 2},
        "deep/one/.zarray": _zarray([3], [2]),
        "deep/one/.zattrs": {"_ARRAY_DIMENSIONS": ["n"]},
    }
    records = {
        "top/refs.0.parq": [
            {"path": first, "offset": 0, "size": 1},
            {},  # never written
            {"raw": b"inline"},
            {"path": second, "offset": 1, "size": 2},
        ],
        "deep/one/refs.0.parq": [{"path": second}, {"path": first, "offset": 19, "size": 1}],
    }
    group = refzarr.read(_write_parquet_refs(tmp_path / "refs.parq", metadata, 4, records))
    assert group.attributes == {"title": "several arrays"}
    assert chunk_bytes(group, "top") == [DATA[:1], None, b"inline", OTHER[1:3]]
    assert chunk_bytes(group, "deep/one") == [OTHER, DATA[19:]]
    deep = group["deep/one"]
    assert isinstance(deep, RefArray)
    assert deep.meta.dimension_names == ("n",)


def test_parquet_array_without_record_files(tmp_path: Path) -> None:
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "one/.zarray": {**_zarray([10], [5]), "fill_value": 1, "dtype": "<i4"},
        "scalar/.zarray": {**_zarray([], []), "fill_value": 1, "dtype": "<i4"},
    }
    group = refzarr.read(_write_parquet_refs(tmp_path / "refs.parq", metadata, 10, {}))
    assert chunk_bytes(group, "one") == [None, None]
    assert chunk_bytes(group, "scalar") == [None]
    one = group["one"]
    assert isinstance(one, RefArray)
    assert one.meta.fill_value == 1


def test_parquet_expands_to_version_0(files: tuple[str, str], tmp_path: Path) -> None:
    first = files[0]
    metadata = {".zgroup": {"zarr_format": 2}, "stuff/.zarray": _zarray([3], [1])}
    rows = [{"raw": b"raw"}, {"path": first}, {"path": first, "offset": 4, "size": 4}]
    root = _write_parquet_refs(tmp_path / "refs.parq", metadata, 10, {"stuff/refs.0.parq": rows})
    expanded = refzarr.expand_references(root)
    chunks = {
        k: resolve(v) for k, v in expanded.items() if k.startswith("stuff/") and ".z" not in k
    }
    assert chunks == {"stuff/0": b"raw", "stuff/1": DATA, "stuff/2": DATA[4:8]}
