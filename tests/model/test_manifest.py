"""ChunkManifest: construction checks, immutability, equality, lazy blocks, column round trips."""

from __future__ import annotations

import pickle
import re
from dataclasses import FrozenInstanceError
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from refzarr import ChunkManifest, ChunkRef, RefFormatError
from refzarr.model import INLINED, MISSING, WHOLE_FILE, ManifestBlock
from strategies import MAX_OFFSET, grid_shapes, manifests

U64 = np.uint64


def _small() -> ChunkManifest:
    """2x2 grid: a byte range, a whole file, an inlined chunk and a missing one."""
    return ChunkManifest.from_arrays(
        ["s3://b/a.nc", "s3://b/b.nc"],
        [[0, 1], [INLINED, MISSING]],
        [[10, 0], [0, 0]],
        np.array([[20, WHOLE_FILE], [0, 0]], dtype=np.uint64),
        {(1, 0): b"\x00\x01"},
    )


def _block(start: int = 0, n: int = 2, **changes: Any) -> ManifestBlock:
    fields: dict[str, Any] = {
        "start": start,
        "paths": ("u",),
        "path_id": np.zeros(n, np.int32),
        "offset": np.zeros(n, np.uint64),
        "length": np.ones(n, np.uint64),
        "inlined": {},
    }
    fields.update(changes)
    return ManifestBlock(**fields)


# -- lookup -------------------------------------------------------------------------------------


def test_entries_are_references_whole_files_inlined_bytes_or_none() -> None:
    m = _small()
    assert m[0, 0] == ChunkRef("s3://b/a.nc", 10, 20)
    assert m[0, 1] == ChunkRef("s3://b/b.nc", 0, None)
    assert m[1, 0] == b"\x00\x01"
    assert m[1, 1] is None
    assert m.grid_shape == (2, 2)
    assert m.nchunks == 4


def test_one_dimensional_manifests_take_an_int_index() -> None:
    m = ChunkManifest.from_arrays(["u"], [0, MISSING], [5, 0], [6, 0])
    assert m[0] == ChunkRef("u", 5, 6)
    assert m[np.int64(1)] is None


def test_zero_dimensional_manifest_has_one_chunk_at_the_empty_index() -> None:
    m = ChunkManifest.from_arrays(["u"], np.int32(0), U64(3), U64(4))
    assert m.grid_shape == ()
    assert m.nchunks == 1
    assert m[()] == ChunkRef("u", 3, 4)


def test_zero_dimensional_inlined_chunk() -> None:
    m = ChunkManifest.from_arrays([], np.int32(INLINED), U64(0), U64(0), {(): b"x"})
    assert m[()] == b"x"
    assert m.inlined == {(): b"x"}


def test_grid_without_chunks() -> None:
    m = ChunkManifest.missing((0, 3))
    assert m.nchunks == 0
    assert m.path_id.shape == (0, 3)
    assert m.inlined == {}


@pytest.mark.parametrize("index", [(2, 0), (0, -1), (0,), (0, 0, 0), 5])
def test_index_outside_the_grid_is_an_index_error(index: Any) -> None:
    with pytest.raises(IndexError, match="outside grid"):
        _small()[index]


def test_offsets_and_lengths_reach_two_to_the_63_minus_one() -> None:
    m = ChunkManifest.from_arrays(["u"], [0], [MAX_OFFSET], [MAX_OFFSET])
    assert m[0] == ChunkRef("u", MAX_OFFSET, MAX_OFFSET)
    assert m.offset.dtype == np.uint64


def test_missing_manifest_has_only_missing_chunks() -> None:
    m = ChunkManifest.missing((2, 3))
    assert (m.path_id == MISSING).all()
    assert m.paths == ()
    assert all(m[i, j] is None for i in range(2) for j in range(3))


# -- construction errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((["u"], [0.5], [0], [1]), "path_id must be integers"),
        ((["u"], [0, 0], [0], [1, 1]), "must share one shape"),
        ((["u"], [0], [-1], [1]), "offset must be non-negative"),
        ((["u"], [0], [0], [-5]), "length must be non-negative"),
        ((["u"], [0], [0.5], [1]), "offset must be integers"),
        ((["u"], [2**31], [0], [1]), "path_id exceeds the int32 range"),
        ((["u"], [-3], [0], [0]), re.escape("path ids must lie in [-2, 1)")),
        ((["u"], [1], [0], [1]), re.escape("path ids must lie in [-2, 1)")),
        ((["u"], [0], [2**63], [1]), "offsets must be at most 9223372036854775807"),
        ((["u"], [0], [0], [2**63]), "lengths must be at most 9223372036854775807"),
        ((["u"], [0], [1], [WHOLE_FILE]), "whole-file reference must have offset 0"),
        ((["u"], [MISSING], [4], [0]), "missing and inlined chunks must have offset 0"),
        ((["u"], [INLINED], [0], [0]), "inlined chunk bytes do not match"),
        ((["u", "u"], [0], [0], [1]), "path table holds a URL twice"),
        (([""], [0], [0], [1]), "paths must be non-empty str"),
        (([b"u"], [0], [0], [1]), "paths must be non-empty str"),
    ],
)
def test_invalid_columns_are_rejected(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(RefFormatError, match=message):
        ChunkManifest.from_arrays(*args)


def test_inlined_chunk_outside_the_grid() -> None:
    with pytest.raises(RefFormatError, match=re.escape("inlined chunk index (3,) is outside")):
        ChunkManifest.from_arrays([], [INLINED], [0], [0], {(3,): b"x"})


def test_inlined_chunk_not_marked_inlined() -> None:
    with pytest.raises(RefFormatError, match="do not match the entries marked INLINED"):
        ChunkManifest.from_arrays(["u"], [0], [0], [1], {(0,): b"x"})


def test_inlined_data_must_be_bytes() -> None:
    with pytest.raises(RefFormatError, match="inlined chunk 0 must be bytes, got str"):
        ChunkManifest.from_arrays([], [INLINED], [0], [0], {(0,): "x"})  # type: ignore[dict-item]


def test_from_entries_scatters_coordinates_and_leaves_the_rest_missing() -> None:
    m = ChunkManifest.from_entries(
        (2, 3), [[1, 2], [0, 0]], ["x", "y", "z"], [2, 0], [5, 6], [7, 8], {(1, 0): b"i"}
    )
    assert m[1, 2] == ChunkRef("z", 5, 7)
    assert m[0, 0] == ChunkRef("x", 6, 8)
    assert m[1, 0] == b"i"
    assert m[0, 1] is None
    assert m.paths == ("x", "z")  # only the URLs this array uses


def test_from_entries_rejects_a_chunk_outside_the_grid_naming_where() -> None:
    with pytest.raises(RefFormatError, match=r"temp: chunk 2\.0 lies outside the chunk grid"):
        ChunkManifest.from_entries((2, 2), [[2, 0]], ["u"], [0], [0], [1], where="temp")


def test_from_entries_rejects_a_chunk_given_twice() -> None:
    with pytest.raises(RefFormatError, match=r"temp: chunk 0\.1 is given more than once"):
        ChunkManifest.from_entries(
            (2, 2), [[0, 1], [0, 1]], ["u"], [0, 0], [0, 0], [1, 1], where="temp"
        )


def test_from_entries_rejects_a_chunk_both_referenced_and_inlined() -> None:
    with pytest.raises(RefFormatError, match="chunk 1 is given more than once"):
        ChunkManifest.from_entries((2,), [[1]], ["u"], [0], [0], [1], {(1,): b"x"})


def test_negative_grid_shape() -> None:
    with pytest.raises(RefFormatError, match="chunk grid shape must be non-negative"):
        ChunkManifest.missing((-1,))


# -- immutability -------------------------------------------------------------------------------


@pytest.mark.parametrize("column", ["path_id", "offset", "length"])
def test_columns_are_read_only(column: str) -> None:
    values = getattr(_small(), column)
    with pytest.raises(ValueError, match="read-only"):
        values[0, 0] = 1


def test_inputs_are_copied() -> None:
    ids = np.array([0, 0])
    offsets = np.array([1, 2])
    inlined: dict[tuple[int, ...], bytes] = {}
    m = ChunkManifest.from_arrays(["u"], ids, offsets, [3, 4], inlined)
    ids[0], offsets[0] = MISSING, 99
    inlined[(0,)] = b"late"
    assert m[0] == ChunkRef("u", 1, 3)
    assert m.inlined == {}


def test_inlined_property_is_a_copy() -> None:
    m = _small()
    m.inlined[(1, 0)] = b"changed"
    assert m[1, 0] == b"\x00\x01"


def test_block_inlined_bytes_cannot_be_changed() -> None:
    """Regression: a block's inlined mapping was the manifest's own mutable dict."""
    m = _small()
    with pytest.raises(TypeError, match="does not support item assignment"):
        m.block(0).inlined[2] = b"changed"  # type: ignore[index]
    assert m[1, 0] == b"\x00\x01"


def test_block_fields_cannot_be_reassigned() -> None:
    with pytest.raises(FrozenInstanceError):
        _small().block(0).start = 1  # type: ignore[misc]


def test_manifest_attributes_cannot_be_set() -> None:
    m = _small()
    with pytest.raises(AttributeError):
        m.grid_shape = (1,)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        m.extra = 1  # type: ignore[attr-defined]


def test_manifest_pickles_and_stays_read_only() -> None:
    """Regression: the manifest's lock made it unpicklable (process pools, dask)."""
    m = _small()
    copy = pickle.loads(pickle.dumps(m))
    assert copy == m
    assert not copy.block(0).path_id.flags.writeable
    with pytest.raises(TypeError):
        copy.block(0).inlined[0] = b""


def test_unpickled_manifests_share_equal_large_inlined_chunks() -> None:
    """Every file of a scan_many holds the same loaded ``lat``: the parent keeps it once."""
    large, small = bytes(range(256)) * 8, b"\x01\x02"
    manifests = [
        ChunkManifest.from_arrays([], [-2, -2], [0, 0], [0, 0], {(0,): large, (1,): small})
        for _ in range(3)
    ]
    copies = [pickle.loads(pickle.dumps(m)) for m in manifests]  # one pickle each
    assert copies == manifests
    assert copies[0][0] == large
    assert copies[0][0] is copies[1][0] is copies[2][0]
    assert copies[0][1] == small
    other = bytes(reversed(large))
    changed = ChunkManifest.from_arrays([], [-2], [0], [0], {(0,): other})
    assert pickle.loads(pickle.dumps(changed))[0] == other


# -- equality -----------------------------------------------------------------------------------


def test_equality_compares_resolved_urls_not_path_tables() -> None:
    a = ChunkManifest.from_arrays(["x", "y"], [0, 1], [1, 2], [3, 4])
    b = ChunkManifest.from_arrays(["y", "unused", "x"], [2, 0], [1, 2], [3, 4])
    assert a == b


@pytest.mark.parametrize(
    "other",
    [
        ChunkManifest.from_arrays(["x"], [0, 0], [1, 2], [3, 4]),  # another URL
        ChunkManifest.from_arrays(["x", "y"], [0, 1], [1, 2], [3, 5]),  # another length
        ChunkManifest.from_arrays(["x", "y"], [0, 1], [0, 2], [3, 4]),  # another offset
        ChunkManifest.from_arrays(["x", "y"], [0, MISSING], [1, 0], [3, 0]),  # missing
        ChunkManifest.from_arrays(["x"], [0, INLINED], [1, 0], [3, 0], {(1,): b""}),  # inlined
        ChunkManifest.from_arrays(["x", "y"], [[0, 1]], [[1, 2]], [[3, 4]]),  # other grid
    ],
)
def test_any_different_entry_makes_manifests_unequal(other: ChunkManifest) -> None:
    assert ChunkManifest.from_arrays(["x", "y"], [0, 1], [1, 2], [3, 4]) != other


def test_whole_file_differs_from_a_byte_range() -> None:
    whole = ChunkManifest.from_arrays(["x"], [0], [0], [WHOLE_FILE])
    assert whole != ChunkManifest.from_arrays(["x"], [0], [0], [10])


def test_inlined_bytes_are_compared() -> None:
    a = ChunkManifest.from_arrays([], [INLINED], [0], [0], {(0,): b"a"})
    b = ChunkManifest.from_arrays([], [INLINED], [0], [0], {(0,): b"b"})
    assert a != b


def test_manifests_are_not_hashable_and_not_equal_to_other_types() -> None:
    with pytest.raises(TypeError):
        hash(_small())
    assert _small() != "manifest"


# -- lazy manifests -----------------------------------------------------------------------------


class CountingSource:
    """A ManifestSource over in-memory columns that records which blocks were loaded."""

    def __init__(self, urls: list[str], block_size: int) -> None:
        self.urls = urls
        self.block_size = block_size
        self.loaded: list[int] = []

    def load_block(self, number: int) -> ManifestBlock:
        self.loaded.append(number)
        start = number * self.block_size
        numbers = np.arange(start, min(start + self.block_size, len(self.urls)))
        # each block has its own path table, in its own order
        paths = tuple(dict.fromkeys(self.urls[n] for n in numbers[::-1]))
        ids = np.array([paths.index(self.urls[n]) for n in numbers], dtype=np.int32)
        return ManifestBlock(
            start, paths, ids, numbers.astype(np.uint64), np.ones_like(numbers, np.uint64), {}
        )


def _lazy(
    grid: tuple[int, ...] = (3, 4), block_size: int = 5
) -> tuple[ChunkManifest, CountingSource]:
    n = int(np.prod(grid))
    source = CountingSource([f"file-{k % 3}.nc" for k in range(n)], block_size)
    return ChunkManifest.lazy(grid, source), source


def test_lazy_manifest_loads_only_the_block_it_needs() -> None:
    m, source = _lazy()
    assert source.loaded == []
    assert m[2, 1] == ChunkRef("file-0.nc", 9, 1)  # chunk 9 is in block 1
    assert source.loaded == [1]
    assert m[2, 3] == ChunkRef("file-2.nc", 11, 1)
    assert source.loaded == [1, 2]
    assert "2/3 blocks loaded" in repr(m)


def test_lazy_manifest_caches_loaded_blocks() -> None:
    m, source = _lazy()
    m[0, 0]
    m[0, 1]
    m.block(0)
    assert source.loaded == [0]


def test_lazy_manifest_columns_merge_every_blocks_path_table() -> None:
    m, source = _lazy()
    assert sorted(source.loaded) == []
    urls = np.array(m.paths)[m.path_id]
    assert urls.tolist() == np.array([f"file-{k % 3}.nc" for k in range(12)]).reshape(3, 4).tolist()
    assert m.offset.ravel().tolist() == list(range(12))
    assert sorted(source.loaded) == [0, 1, 2]
    assert m.nblocks == 3


def test_lazy_manifest_equals_the_in_memory_one() -> None:
    m, _ = _lazy()
    n = 12
    paths = ["file-0.nc", "file-1.nc", "file-2.nc"]
    eager = ChunkManifest.from_arrays(
        paths,
        (np.arange(n) % 3).reshape(3, 4),
        np.arange(n).reshape(3, 4),
        np.ones((3, 4), dtype=np.uint64),
    )
    assert m == eager


def test_iter_blocks_loads_in_order() -> None:
    m, source = _lazy()
    assert [b.start for b in m.iter_blocks()] == [0, 5, 10]
    assert source.loaded == [0, 1, 2]


def test_block_number_outside_the_manifest() -> None:
    m, _ = _lazy()
    with pytest.raises(IndexError, match=r"block 3 outside 0\.\.2"):
        m.block(3)


def test_block_of_the_wrong_extent_is_rejected() -> None:
    class Wrong(CountingSource):
        def load_block(self, number: int) -> ManifestBlock:
            return _block(start=0, n=5)

    m = ChunkManifest.lazy((12,), Wrong([], 5))
    with pytest.raises(
        RefFormatError, match=r"manifest block 1 must hold entries 5\.\.9, got 5 entries from 0"
    ):
        m[7]


def test_source_block_size_must_be_positive() -> None:
    with pytest.raises(RefFormatError, match="block size must be positive, got 0"):
        ChunkManifest.lazy((2,), CountingSource(["a", "b"], 0))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"path_id": np.zeros(2, np.int64)}, "column 'path_id' must be 1-D int32 of length 2"),
        ({"offset": np.zeros(3, np.uint64)}, "column 'offset' must be 1-D uint64 of length 2"),
        ({"length": np.ones((2, 1), np.uint64)}, "column 'length' must be 1-D uint64"),
        ({"inlined": {0: b"x"}}, "inlined chunk bytes do not match"),
    ],
)
def test_malformed_blocks_are_rejected(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(RefFormatError, match=message):
        _block(**changes)


def test_block_inlined_keys_are_global_chunk_numbers() -> None:
    block = _block(
        start=10,
        path_id=np.array([0, INLINED], np.int32),
        offset=np.zeros(2, np.uint64),
        length=np.array([1, 0], np.uint64),
        inlined={11: b"x"},
    )
    assert dict(block.inlined) == {11: b"x"}


# -- property: columns survive construction -----------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(manifests())
def test_columns_rebuild_an_equal_manifest(m: ChunkManifest) -> None:
    again = ChunkManifest.from_arrays(m.paths, m.path_id, m.offset, m.length, m.inlined)
    assert again == m
    assert again.path_id.dtype == np.int32
    assert again.grid_shape == m.grid_shape


@settings(max_examples=60, deadline=None)
@given(manifests())
def test_entries_agree_with_columns(m: ChunkManifest) -> None:
    for index in np.ndindex(*m.grid_shape):
        entry, pid = m[index], int(m.path_id[index])
        if pid == MISSING:
            assert entry is None
        elif pid == INLINED:
            assert entry == m.inlined[index]
        else:
            assert isinstance(entry, ChunkRef)
            assert entry.url == m.paths[pid]
            assert entry.offset == int(m.offset[index])
            whole = m.length[index] == WHOLE_FILE
            assert entry.length == (None if whole else int(m.length[index]))


@settings(max_examples=40, deadline=None)
@given(manifests())
def test_pickle_round_trip(m: ChunkManifest) -> None:
    assert pickle.loads(pickle.dumps(m)) == m


@settings(max_examples=40, deadline=None)
@given(grid_shapes())
def test_missing_of_any_grid(grid: tuple[int, ...]) -> None:
    m = ChunkManifest.missing(grid)
    assert m.grid_shape == grid
    assert m == ChunkManifest.from_arrays(
        [], np.full(grid, MISSING), np.zeros(grid, int), np.zeros(grid, int)
    )


@pytest.mark.parametrize("ndim", [0, 1, 3])
def test_one_inlined_equals_from_arrays(ndim: int) -> None:
    grid = (1,) * ndim
    expected = ChunkManifest.from_arrays(
        [], np.full(grid, INLINED), np.zeros(grid, int), np.zeros(grid, int), {(0,) * ndim: b"abc"}
    )
    got = ChunkManifest.one_inlined(b"abc", ndim)
    assert got == expected
    assert got.grid_shape == grid
    assert got[(0,) * ndim] == b"abc"
