"""ArrayReader: any basic selection equals what h5py reads; missing chunks are fill values;
unreadable chunks raise, never fill values."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refzarr
from refzarr import ChunkDecodeError, ChunkFetchError, RefArray
from refzarr.codecs.inflate import CAN_FILL
from refzarr.io import FetchPolicy, RangeReader
from refzarr.model import ChunkManifest
from refzarr.reader import ArrayReader
from refzarr.reader import array as array_module
from refzarr.reader.tiles import consecutive_tiles, tile_numbers
from roundtrip import kerchunk_hdf5_refs

SHAPE, CHUNKS = (13, 10, 7), (4, 3, 7)


def _write(path: Path) -> Path:
    rng = np.random.default_rng(1)
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "gz",
            data=rng.normal(size=SHAPE).astype(">f4"),
            chunks=CHUNKS,
            compression="gzip",
            shuffle=True,
        )
        sparse = f.create_dataset("sparse", shape=(20, 20), chunks=(5, 5), dtype="i2", fillvalue=-7)
        sparse[0:5, 0:5] = 1
        sparse[12, 19] = 3
        f.create_dataset("plain", data=np.arange(50, dtype="u8").reshape(5, 10))
        f.create_dataset("scalar", data=np.float64(2.5))
        f.create_dataset("tiny", data=np.arange(6, dtype="i1"), chunks=(4,))
        # every chunk whole: decoded in batches straight into the output
        f.create_dataset(
            "even", data=rng.normal(size=(8, 6, 14)), chunks=(4, 3, 7), compression="gzip"
        )
        # chunks of 64 KiB spanning the trailing dimensions: decoded in place in the output
        f.create_dataset(
            "rows",
            data=rng.normal(size=(6, 128, 128)).astype("<f4"),
            chunks=(1, 128, 128),
            compression="gzip",
            shuffle=True,
        )
    return path


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, refzarr.RefGroup]:
    path = _write(tmp_path_factory.mktemp("reader") / "data.h5")
    return path, refzarr.read(kerchunk_hdf5_refs(path, inline_threshold=40))


def _reader(group: refzarr.RefGroup, name: str) -> ArrayReader:
    array = group[name]
    assert isinstance(array, RefArray)
    return ArrayReader(array, name, RangeReader(), threads=2)


def _expected(path: Path, name: str, selection: Any) -> np.ndarray:
    """numpy's answer; a trailing ``...`` keeps 0-d results arrays (as the reader returns)."""
    chosen = selection if isinstance(selection, tuple) else (selection,)
    if Ellipsis not in chosen:
        chosen = (*chosen, ...)
    with h5py.File(path, "r") as f:
        return np.asarray(f[name][()])[chosen]


def _assert_same(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected, strict=True)


@pytest.mark.parametrize("name", ["gz", "sparse", "plain", "scalar", "tiny", "even", "rows"])
def test_whole_arrays_equal_h5py(source: tuple[Path, refzarr.RefGroup], name: str) -> None:
    path, group = source
    _assert_same(_reader(group, name)[...], _expected(path, name, ...))


def _slices(size: int) -> st.SearchStrategy[Any]:
    bound = st.integers(-size - 2, size + 2) | st.none()
    step = st.integers(-4, 4).filter(lambda s: s != 0) | st.none()
    index = st.integers(-size, size - 1) if size else st.nothing()
    return st.builds(slice, bound, bound, step) | index


selections = st.tuples(*[_slices(n) for n in SHAPE]).flatmap(
    lambda full: st.integers(0, 3).map(lambda k: full[:k])
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(selection=selections, ellipsis=st.booleans())
def test_basic_selections_equal_numpy(
    source: tuple[Path, refzarr.RefGroup], selection: tuple[Any, ...], ellipsis: bool
) -> None:
    path, group = source
    chosen: Any = (*selection, ...) if ellipsis else selection
    _assert_same(_reader(group, "gz")[chosen], _expected(path, "gz", chosen))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(selection=st.tuples(*[_slices(n) for n in (8, 6, 14)]))
def test_selections_of_whole_chunks_equal_numpy(
    source: tuple[Path, refzarr.RefGroup], selection: tuple[Any, ...]
) -> None:
    path, group = source
    reader = _reader(group, "even")
    assert (reader.batch is not None) is CAN_FILL  # libdeflate (refzarr[codecs]) decodes batches
    _assert_same(reader[selection], _expected(path, "even", selection))


@pytest.mark.parametrize(
    "selection", [..., (slice(1, 5),), (slice(None, None, -1),), (3,), (slice(2, 4), 5)]
)
def test_chunks_decoded_in_place_equal_numpy(
    source: tuple[Path, refzarr.RefGroup], selection: tuple[Any, ...]
) -> None:
    path, group = source
    reader = _reader(group, "rows")
    job = reader._job(...)
    if CAN_FILL:  # the whole array is one run of tiles
        assert job.tiled is not None
        assert job.entries is not None
        assert consecutive_tiles(job.tiled, tile_numbers(job.axes, job.entries.coords)) is not None
    _assert_same(reader[selection], _expected(path, "rows", selection))


@pytest.mark.parametrize(("name", "damaged"), [("even", (1, 0, 1)), ("rows", (2, 0, 0))])
def test_one_damaged_chunk_among_whole_ones_raises_naming_it(
    source: tuple[Path, refzarr.RefGroup], name: str, damaged: tuple[int, ...]
) -> None:
    _, group = source
    array = group[name]
    assert isinstance(array, RefArray)
    m = array.manifest
    lengths = m.length.copy()
    lengths[damaged] -= 3  # the chunk loses its checksum
    cut = ChunkManifest.from_arrays(m.paths, m.path_id, m.offset, lengths, {})
    reader = ArrayReader(_with_manifest(array, cut), name, RangeReader(), threads=2)
    key = ".".join(map(str, damaged))
    with pytest.raises(ChunkDecodeError, match=rf"{name}/{key}: decoding failed"):
        reader[...]
    _assert_same(reader[:1], _reader(group, name)[:1])  # the other chunks read the same


def test_sparse_selection_reads_fill_value_only_for_unwritten(
    source: tuple[Path, refzarr.RefGroup],
) -> None:
    path, group = source
    got = _reader(group, "sparse")[3:13, 2:20:4]
    _assert_same(got, _expected(path, "sparse", (slice(3, 13), slice(2, 20, 4))))
    assert (got == -7).any()
    assert (got == 1).any()


def test_bad_indices_raise(source: tuple[Path, refzarr.RefGroup]) -> None:
    reader = _reader(source[1], "gz")
    with pytest.raises(IndexError, match="out of bounds"):
        reader[13]
    with pytest.raises(IndexError, match="too many indices"):
        reader[0, 0, 0, 0]
    with pytest.raises(IndexError, match="only integers, slices"):
        reader[[0, 1]]


def _with_manifest(array: RefArray, manifest: ChunkManifest) -> RefArray:
    return RefArray(array.meta, manifest)


def test_unreachable_chunk_raises_never_fill(
    source: tuple[Path, refzarr.RefGroup], tmp_path: Path
) -> None:
    _, group = source
    array = group["gz"]
    assert isinstance(array, RefArray)
    m = array.manifest
    gone = ChunkManifest.from_arrays(
        [str(tmp_path / "gone.h5")], np.zeros_like(m.path_id), m.offset, m.length, {}
    )
    reader = ArrayReader(_with_manifest(array, gone), "gz", RangeReader())
    with pytest.raises(ChunkFetchError, match=r"gone\.h5.*gz/0\.0\.0"):
        reader[0]


def test_wrong_bytes_raise_a_decode_error_naming_the_key(
    source: tuple[Path, refzarr.RefGroup],
) -> None:
    _, group = source
    array = group["gz"]
    assert isinstance(array, RefArray)
    m = array.manifest
    shifted = ChunkManifest.from_arrays(m.paths, m.path_id, m.offset + np.uint64(1), m.length, {})
    reader = ArrayReader(_with_manifest(array, shifted), "gz", RangeReader())
    with pytest.raises(ChunkDecodeError, match=r"gz/\d+\.\d+\.\d+"):
        reader[...]


def test_merged_reads_use_few_blocks(source: tuple[Path, refzarr.RefGroup]) -> None:
    path, group = source
    array = group["gz"]
    assert isinstance(array, RefArray)
    # no merging at all still reads correctly
    policy = FetchPolicy(max_gap=0, max_block=1, concurrency=1, attempts=1)
    reader = ArrayReader(array, "gz", RangeReader(local_policy=policy), threads=1)
    _assert_same(reader[...], _expected(path, "gz", ...))


class _CountedPool(ThreadPoolExecutor):
    made = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        type(self).made += 1
        super().__init__(*args, **kwargs)


@pytest.mark.parametrize(
    ("name", "selection", "pools"),
    [
        ("rows", (2,), 0),  # one chunk (a dask task's read): decoded in the calling thread
        ("gz", (slice(0, 4), slice(0, 3)), 0),
        ("tiny", (...,), 0),  # inlined chunks: one batch
        ("gz", (...,), 1),  # chunks in several blocks: decoded on a pool
    ],
)
def test_a_read_of_one_decoding_task_starts_no_threads(
    source: tuple[Path, refzarr.RefGroup],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    selection: tuple[Any, ...],
    pools: int,
) -> None:
    path, group = source
    monkeypatch.setattr(_CountedPool, "made", 0)
    monkeypatch.setattr(array_module, "ThreadPoolExecutor", _CountedPool)
    policy = FetchPolicy(max_gap=0, max_block=1, concurrency=2, attempts=1)  # a block per chunk
    array = group[name]
    assert isinstance(array, RefArray)
    reader = ArrayReader(array, name, RangeReader(local_policy=policy), threads=2)
    _assert_same(reader[selection], _expected(path, name, selection))
    assert _CountedPool.made == pools
