"""Kerchunk JSON writing: exact equality with the per-key dict, v1 templates, fsspec interop."""

from __future__ import annotations

import base64
import functools
import gzip
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
import zstandard
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.reference import ReferenceFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import refzarr
from refzarr import to_kerchunk
from refzarr.errors import RefFormatError
from refzarr.formats.kerchunk_json import write as json_write
from refzarr.formats.kerchunk_json import write_lines as json_write_lines
from refzarr.formats.kerchunk_json.write import compress, render_json
from refzarr.formats.kerchunk_json.write_templates import template_names
from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup
from refzarr.model.manifest import INLINED, MISSING, WHOLE_FILE, ManifestBlock
from refzarr.model.templates import expand_v1
from strategies import array_metas, attribute_dicts, ref_arrays, texts, urls

LONG_DIR = "s3://a-rather-long-bucket-name/model-run/2024/"
AWKWARD_DIRS = [
    LONG_DIR,
    'gs://b/"quoted" dir/',
    "s3://b/back\\slash/",
    "file:///données/é ü/",
    "s3://b/{{x}}/",
    "s3://b/{a}/",
    "memory://}}/",
    "s3://b/{%/{#/",
    "s3://b/line\nbreak/",
    "s3://b/\r/",
    "",
]


# metadata text comes from the same function as in to_kerchunk; a few dtypes are enough here
DTYPES = st.sampled_from([np.dtype(t) for t in ("<f4", ">i8", "u1", "<M8[s]", "S3", "<c8")])


@functools.cache
def awkward_urls() -> st.SearchStrategy[str]:
    """URLs sharing a few directories, with quotes, backslashes, braces, CR/LF and unicode."""
    named = st.builds(str.__add__, st.sampled_from(AWKWARD_DIRS), texts(min_size=1, max_size=6))
    return named | urls()


# built once: hypothesis validates every strategy object it has not drawn from before
_SHARED_ARRAYS = ref_arrays(array_metas(dtypes=DTYPES, max_side=7))


@st.composite
def awkward_arrays(draw: st.DrawFn) -> RefArray:
    """Arrays of the shared strategies, their URLs swapped for awkward ones."""
    array = draw(_SHARED_ARRAYS)
    m = array.manifest
    n = len(m.paths)
    paths = draw(st.lists(awkward_urls(), min_size=n, max_size=n, unique=True))
    manifest = ChunkManifest.from_arrays(paths, m.path_id, m.offset, m.length, m.inlined)
    return RefArray(array.meta, manifest)


def member_name(name: str) -> bool:
    return "/" not in name and name not in (".", "..", "zarr.json") and not name.startswith(".z")


def awkward_groups(max_depth: int = 2) -> st.SearchStrategy[RefGroup]:
    """Nested groups whose member names hold quotes, backslashes, control characters."""
    names = texts(min_size=1, max_size=5).filter(member_name)
    node: st.SearchStrategy[Any] = awkward_arrays()
    for _ in range(max_depth + 1):
        group = st.builds(
            RefGroup,
            attributes=attribute_dicts(),
            members=st.dictionaries(names, node, max_size=3),
        )
        node = awkward_arrays() | group
    return group


def parse_pairs(text: bytes) -> dict[str, Any]:
    """JSON text as a dict, failing on a duplicate key."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        counts = Counter(key for key, _ in pairs)
        assert max(counts.values(), default=1) == 1, counts.most_common(1)
        return dict(pairs)

    parsed: dict[str, Any] = json.loads(text, object_pairs_hook=unique)
    return parsed


def fsspec_references(refs: dict[str, Any], *, simple_templates: bool) -> dict[str, Any]:
    """The references fsspec's ReferenceFileSystem resolves from a parsed reference set."""
    fs = ReferenceFileSystem(
        fo=refs,
        fs={"file": LocalFileSystem()},
        simple_templates=simple_templates,
        skip_instance_cache=True,
    )
    return dict(fs.references)


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- equality with the per-key reference implementation ---------------------------------------


@SETTINGS
@given(awkward_groups())
def test_version_0_parses_to_the_kerchunk_dict(group: RefGroup) -> None:
    text = render_json(group)
    expected = to_kerchunk(group)
    parsed = parse_pairs(text)
    assert parsed == expected
    assert list(parsed) == list(expected)
    assert text.count(b"\n") == len(expected) + 2  # one key per line, braces on their own
    assert fsspec_references(parsed, simple_templates=True) == expected


@SETTINGS
@given(awkward_groups())
def test_version_1_expands_to_the_kerchunk_dict(group: RefGroup) -> None:
    parsed = parse_pairs(render_json(group, version=1))
    assert set(parsed) == {"version", "templates", "refs"}
    assert parsed["version"] == 1
    expected = to_kerchunk(group)
    assert expand_v1(parsed) == expected
    assert list(parsed["refs"]) == list(expected)
    assert all(len(name) <= 3 for name in parsed["templates"])
    for simple in (True, False):
        assert fsspec_references(parsed, simple_templates=simple) == expected


@st.composite
def templated_groups(draw: st.DrawFn) -> RefGroup:
    """One array with many references to a few awkward URLs: templates nearly always pay."""
    paths = draw(st.lists(awkward_urls(), min_size=1, max_size=6, unique=True))
    grid = draw(st.tuples(st.integers(1, 6), st.integers(1, 9)))
    path_id = draw(hnp.arrays(np.int32, grid, elements=st.integers(-1, len(paths) - 1)))
    offset = draw(hnp.arrays(np.uint64, grid, elements=st.integers(0, 2**63 - 1)))
    offset[path_id < 0] = 0
    length = np.where(path_id < 0, 0, offset // 3).astype(np.uint64)
    manifest = ChunkManifest.from_arrays(paths, path_id, offset, length)
    meta = ArrayMeta(shape=grid, chunks=(1, 1), dtype=np.dtype("u1"))
    return RefGroup(members={"v": RefArray(meta, manifest)})


@SETTINGS
@given(templated_groups())
def test_version_1_templates_resolve_everywhere(group: RefGroup) -> None:
    parsed = parse_pairs(render_json(group, version=1))
    expected = to_kerchunk(group)
    assert expand_v1(parsed) == expected
    for simple in (True, False):
        assert fsspec_references(parsed, simple_templates=simple) == expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(awkward_groups())
def test_version_0_reads_back(group: RefGroup) -> None:
    target = f"memory://refzarr-json-write/{uuid.uuid4().hex}/refs.json.zst"
    refzarr.write(group, target)
    try:
        assert refzarr.read(target) == group
    finally:
        fsspec.filesystem("memory").rm(target.rpartition("/")[0], recursive=True)


def test_many_slices_on_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small slices: keys, URLs and every chunk kind stay in C order across slice borders."""
    monkeypatch.setattr(json_write_lines, "SLICE_ROWS", 7)
    monkeypatch.setattr(json_write, "THREADED_ZSTD_BYTES", 0)
    rng = np.random.default_rng(1)
    grid = (13, 11, 3)
    kind = rng.integers(0, 4, grid)
    path_id = np.where(kind == 0, rng.integers(0, 5, grid), np.where(kind == 1, INLINED, MISSING))
    path_id = np.where(kind == 3, 4, path_id)
    offset = np.where(kind == 0, rng.integers(0, 2**63 - 1, grid, dtype=np.int64), 0)
    length = np.where(kind == 0, rng.integers(0, 2**40, grid), 0).astype(np.uint64)
    length[kind == 3] = WHOLE_FILE
    inlined = {tuple(int(i) for i in ix): bytes(ix) * 3 for ix in np.argwhere(kind == 1)}
    inlined[tuple(np.argwhere(kind == 1)[0])] = b"\x00\xff binary"
    paths = [f"{LONG_DIR}file_{i}.nc" for i in range(4)] + ["s3://other/whole.nc"]
    manifest = ChunkManifest.from_arrays(paths, path_id, offset.astype(np.uint64), length, inlined)
    meta = ArrayMeta(shape=(13, 22, 9), chunks=(1, 2, 3), dtype=np.dtype("<f8"))
    group = RefGroup(members={"v": RefArray(meta, manifest)})
    assert parse_pairs(render_json(group)) == to_kerchunk(group)
    assert expand_v1(parse_pairs(render_json(group, version=1))) == to_kerchunk(group)
    text = render_json(group)
    assert zstandard.ZstdDecompressor().decompress(compress(text, "zstd")) == text


class ListSource:
    """A lazy manifest source holding prepared blocks (each with its own URL table)."""

    def __init__(self, blocks: list[ManifestBlock], block_size: int) -> None:
        self.blocks = blocks
        self.block_size = block_size

    def load_block(self, number: int) -> ManifestBlock:
        return self.blocks[number]


def test_lazy_manifest_with_several_blocks() -> None:
    u64 = np.uint64
    blocks = [
        ManifestBlock(0, ("s3://b/d/x.nc", "s3://b/d/y.nc"), np.array([1, 0, -1], np.int32),
                      np.array([5, 6, 0], u64), np.array([7, 8, 0], u64), {}),
        ManifestBlock(3, ("s3://b/d/y.nc",), np.array([0, -2, 0], np.int32),
                      np.array([9, 0, 0], u64), np.array([10, 0, WHOLE_FILE], u64), {4: b"hi"}),
        ManifestBlock(6, ("s3://b/{{d}}/z.nc",), np.array([0], np.int32),
                      np.array([1], u64), np.array([2], u64), {}),
    ]  # fmt: skip
    manifest = ChunkManifest.lazy((7,), ListSource(blocks, 3))
    meta = ArrayMeta(shape=(7,), chunks=(1,), dtype=np.dtype("u1"))
    group = RefGroup(members={"a": RefArray(meta, manifest)})
    expected = to_kerchunk(group)
    assert expected["a/6"] == ["s3://b/{{d}}/z.nc", 1, 2]
    assert parse_pairs(render_json(group)) == expected
    assert expand_v1(parse_pairs(render_json(group, version=1))) == expected


def test_awkward_keys_zero_size_and_0d_arrays() -> None:
    meta_0d = ArrayMeta(shape=(), chunks=(), dtype=np.dtype("<i2"))
    one = ChunkManifest.from_arrays(["s3://b/one"], np.zeros((), np.int32), 3, 4)
    empty_meta = ArrayMeta(shape=(0, 5), chunks=(2, 2), dtype=np.dtype("u1"))
    sub = RefGroup(
        attributes={"é": "ü\n"},
        members={
            'q"uo\\te\x01': RefArray(meta_0d, one),
            "empty": RefArray(empty_meta, ChunkManifest.missing(empty_meta.grid_shape)),
        },
    )
    group = RefGroup(members={"g\u2028": sub, "none": RefArray(meta_0d, ChunkManifest.missing(()))})
    expected = to_kerchunk(group)
    assert expected['g\u2028/q"uo\\te\x01/0'] == ["s3://b/one", 3, 4]
    for version in (0, 1):
        parsed = parse_pairs(render_json(group, version=version))
        assert (parsed if version == 0 else expand_v1(parsed)) == expected


def test_unicode_is_utf8_and_surrogates_are_escaped() -> None:
    paths = ["s3://bücket/é.nc", "file:///tmp/bad-\udce9.nc"]
    manifest = ChunkManifest.from_arrays(paths, np.array([0, 1], np.int32), [0, 0], [1, 1])
    meta = ArrayMeta(shape=(2,), chunks=(1,), dtype=np.dtype("u1"))
    group = RefGroup(members={"ä": RefArray(meta, manifest)})
    text = render_json(group)
    assert "s3://bücket/é.nc".encode() in text
    assert b"bad-\\udce9.nc" in text
    assert json.loads(text) == to_kerchunk(group)
    assert expand_v1(json.loads(render_json(group, version=1))) == to_kerchunk(group)


# -- Version 1 templates ------------------------------------------------------------------------


def grid_group(urls: list[str], per_url: int) -> RefGroup:
    """A 2-D array whose rows each reference one URL ``per_url`` times."""
    grid = (len(urls), per_url)
    path_id = np.repeat(np.arange(len(urls), dtype=np.int32), per_url).reshape(grid)
    offset = np.arange(path_id.size, dtype=np.uint64).reshape(grid) * 100
    manifest = ChunkManifest.from_arrays(urls, path_id, offset, np.full(grid, 100, np.uint64))
    meta = ArrayMeta(shape=grid, chunks=(1, 1), dtype=np.dtype("<f4"))
    return RefGroup(members={"t": RefArray(meta, manifest)})


def test_shared_directories_become_short_templates() -> None:
    urls = [f"{d}file_{i:04d}.nc" for d in (LONG_DIR, "s3://bucket/run2/") for i in range(20)]
    group = grid_group([*urls, "lonely.nc"], per_url=10)
    v0, v1 = render_json(group), render_json(group, version=1)
    parsed = json.loads(v1)
    assert parsed["templates"] == {"a": LONG_DIR, "b": "s3://bucket/run2/"}
    assert parsed["refs"]["t/0.0"] == ["{{a}}file_0000.nc", 0, 100]
    assert parsed["refs"]["t/39.9"][0] == "{{b}}file_0019.nc"
    assert parsed["refs"]["t/40.0"][0] == "lonely.nc"
    assert len(v1) < len(v0) * 0.75
    assert expand_v1(parsed) == to_kerchunk(group)


def test_no_template_where_it_would_not_save_space() -> None:
    group = grid_group(["s3://bucket/only/one.nc", "s3://x/y.nc"], per_url=1)
    parsed = json.loads(render_json(group, version=1))
    assert parsed["templates"] == {}
    assert parsed["refs"]["t/0.0"][0] == "s3://bucket/only/one.nc"


def test_urls_with_double_braces_are_not_reinterpreted() -> None:
    urls = [f"{LONG_DIR}{{{{f{i}}}}}.nc" for i in range(3)] + [
        f"{LONG_DIR}p{i}.nc" for i in range(3)
    ]
    urls.append("s3://b/}}{{%x{#\r\n")
    group = grid_group(urls, per_url=5)
    parsed = json.loads(render_json(group, version=1))
    escapes = {text: name for name, text in parsed["templates"].items() if len(text) == 1}
    assert set(escapes) == {"{", "}", "\r", "\n"}
    assert parsed["templates"][escapes["{"]] == "{"
    brace = parsed["refs"]["t/0.0"][0]
    assert brace.startswith(f"{LONG_DIR}{{{{{escapes['{']}}}}}")  # literal dir: braces inside
    assert parsed["refs"]["t/3.0"][0].endswith("}}p0.nc")  # the directory is a template
    expected = to_kerchunk(group)
    assert expand_v1(parsed) == expected
    for simple in (True, False):
        assert fsspec_references(parsed, simple_templates=simple) == expected
    assert json.loads(render_json(group))["t/0.0"][0] == urls[0]  # Version 0: as is


def test_template_names_are_short_and_never_reserved() -> None:
    names = [name for name, _ in zip(template_names(), range(3000), strict=False)]
    assert names[:3] == ["a", "b", "c"]
    assert len(set(names)) == len(names)
    assert {"if", "in", "is", "or", "as", "and", "not", "for"}.isdisjoint(names)
    assert all(name.isalpha() and name.isascii() and len(name) <= 3 for name in names)


def test_version_must_be_0_or_1() -> None:
    with pytest.raises(ValueError, match="version must be 0 or 1"):
        render_json(RefGroup(), version=2)


# -- reading back through fsspec and refzarr ----------------------------------------------------


def local_sources(tmp_path: Path) -> dict[str, bytes]:
    """Small data files with awkward names; file path -> content."""
    names = ["plain.bin", 'q"uote.bin', "back\\slash.bin", "é ü.bin", "{{brace}}.bin", "b}}.bin"]
    out = {}
    for number, name in enumerate(names):
        directory = tmp_path / "data" / f"d{number % 2}"
        directory.mkdir(parents=True, exist_ok=True)
        content = bytes((number * 37 + i) % 256 for i in range(200 + number))
        (directory / name).write_bytes(content)
        out[(directory / name).as_posix()] = content
    return out


def local_group(sources: dict[str, bytes]) -> RefGroup:
    """Every chunk kind, both separators, a nested group, URLs with and without file://."""
    paths = [p if i % 2 else f"file://{p}" for i, p in enumerate(sources)]
    n = len(paths)
    grid = (n, 8)
    path_id = np.repeat(np.arange(n, dtype=np.int32), 8).reshape(grid)
    offset = np.tile(np.arange(8, dtype=np.uint64) * 20, (n, 1))
    length = np.tile(np.arange(8, dtype=np.uint64) + 3, (n, 1))
    path_id[0, 1], offset[0, 1], length[0, 1] = MISSING, 0, 0
    path_id[1, 2], offset[1, 2], length[1, 2] = INLINED, 0, 0
    path_id[2, 3], offset[2, 3], length[2, 3] = INLINED, 0, 0
    path_id[3, 4], offset[3, 4], length[3, 4] = 3, 0, WHOLE_FILE
    inlined = {(1, 2): b"text chunk", (2, 3): b"\x00\x01binary"}
    manifest = ChunkManifest.from_arrays(paths, path_id, offset, length, inlined)
    meta = ArrayMeta(shape=grid, chunks=(1, 1), dtype=np.dtype("u1"), dimension_separator="/")
    one = ChunkManifest.from_arrays(paths[:1], np.zeros(3, np.int32), [0, 10, 20], [10, 10, 10])
    flat = ArrayMeta(shape=(30,), chunks=(10,), dtype=np.dtype("u1"), attributes={"u": "é"})
    sub = RefGroup(attributes={"k": [1, 2]}, members={"flat": RefArray(flat, one)})
    return RefGroup(attributes={"title": "t"}, members={"grid": RefArray(meta, manifest), "g": sub})


def expected_bytes(value: Any, sources: dict[str, bytes]) -> bytes:
    """The bytes a Version 0 value stands for."""
    if isinstance(value, str):
        return base64.b64decode(value[7:]) if value.startswith("base64:") else value.encode()
    content = sources[value[0].removeprefix("file://")]
    return content if len(value) == 1 else content[value[1] : value[1] + value[2]]


@pytest.mark.parametrize("suffix", [".json", ".json.zst", ".json.gz"])
@pytest.mark.parametrize(("version", "simple"), [(0, True), (1, True), (1, False)])
def test_fsspec_reads_every_key(tmp_path: Path, suffix: str, version: int, simple: bool) -> None:
    sources = local_sources(tmp_path)
    group = local_group(sources)
    target = tmp_path / f"refs{suffix}"
    refzarr.write(group, target, version=version)
    compression = {".json": None, ".json.zst": "zstd", ".json.gz": "gzip"}[suffix]
    fs = fsspec.filesystem(
        "reference",
        fo=str(target),
        target_options={"compression": compression},
        simple_templates=simple,
        skip_instance_cache=True,
    )
    expected = to_kerchunk(group)
    assert set(fs.references) == set(expected)
    for key, value in expected.items():
        assert fs.cat(key) == expected_bytes(value, sources), key


@pytest.mark.parametrize("suffix", [".json", ".json.zst", ".json.gz"])
@pytest.mark.parametrize("version", [0, 1])
def test_refzarr_reads_back_the_group(tmp_path: Path, suffix: str, version: int) -> None:
    group = local_group(local_sources(tmp_path))
    target = tmp_path / "out" / f"refs{suffix}"
    refzarr.write(group, target, version=version)
    assert refzarr.read(target) == group


# -- write(): format, compression -----------------------------------------------------------


def test_compression_follows_the_suffix_or_the_argument(tmp_path: Path) -> None:
    group = local_group(local_sources(tmp_path))
    text = render_json(group)
    refzarr.write(group, tmp_path / "a.json.zst")
    refzarr.write(group, tmp_path / "a.json.gz")
    refzarr.write(group, tmp_path / "a.json")
    refzarr.write(group, tmp_path / "b.json", compression="zstd")
    refzarr.write(group, tmp_path / "refs.txt", format="json")
    assert zstandard.ZstdDecompressor().decompress((tmp_path / "a.json.zst").read_bytes()) == text
    assert gzip.decompress((tmp_path / "a.json.gz").read_bytes()) == text
    assert (tmp_path / "a.json").read_bytes() == text
    assert (tmp_path / "b.json").read_bytes().startswith(b"\x28\xb5\x2f\xfd")
    assert (tmp_path / "refs.txt").read_bytes() == text


def test_compress_round_trips() -> None:
    data = b'{\n"a":"b"\n}\n' * 1000
    assert zstandard.ZstdDecompressor().decompress(compress(data, "zstd")) == data
    assert gzip.decompress(compress(data, "gzip")) == data
    assert compress(data, None) == data


def test_unknown_suffix_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(RefFormatError, match=r"refs\.yaml.*use \.json.*format='json'"):
        refzarr.write(RefGroup(), tmp_path / "refs.yaml")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"compression": "lz4"}, "compression must be"),
        ({"version": 2}, "version must be 0 or 1"),
        ({"format": "yaml"}, "format must be 'json' or 'parquet'"),
    ],
)
def test_bad_options(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        refzarr.write(RefGroup(), tmp_path / "refs.json", **options)
    assert not list(tmp_path.iterdir())


# -- What a write imports -----------------------------------------------------------------------

WRITE_IN_A_FRESH_PROCESS = """
import sys
import numpy as np
import refzarr
from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup
from refzarr.model.manifest import INLINED, MISSING, WHOLE_FILE

path_id = np.array([[0, 1, INLINED], [MISSING, 2, 0]], np.int32)
length = np.array([[7, 8, 0], [0, WHOLE_FILE, 9]], np.uint64)
offset = np.array([[10, 20, 0], [0, 0, 30]], np.uint64)
urls = ["s3://b/d/x.nc", 's3://b/"q"/y.nc', "s3://b/{{d}}/\\u00e9.nc"]
manifest = ChunkManifest.from_arrays(urls, path_id, offset, length, {(0, 2): b"\\x00hi"})
meta = ArrayMeta(shape=(2, 6), chunks=(1, 2), dtype=np.dtype("<f4"))
group = RefGroup(members={"v": RefArray(meta, manifest)})
assert "pandas" not in sys.modules, "pandas imported before the write"
refzarr.write(group, sys.argv[1], version=int(sys.argv[2]))
print(sorted(name for name in sys.modules if name.split(".")[0] == "pandas")[:3])
"""


@pytest.mark.parametrize("version", [0, 1])
def test_a_json_write_does_not_import_pandas(tmp_path: Path, version: int) -> None:
    """pyarrow's ``pa.array`` / Python scalars in compute calls import pandas (~0.4 s CPU, most
    of a first write in a fresh process): the writer builds its Arrow arrays from buffers."""
    target = tmp_path / "set.json"
    command = [sys.executable, "-c", WRITE_IN_A_FRESH_PROCESS, str(target), str(version)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    namespace: dict[str, Any] = {"__name__": "built", "sys": sys}
    exec(WRITE_IN_A_FRESH_PROCESS.split("assert")[0], namespace)  # the same group, here
    assert target.read_bytes() == render_json(namespace["group"], version=version)
