"""Declared-shape bombs: a few hundred bytes (JSON, Parquet) or an HDF5 file with nothing
written can declare 2**27 .. 2**62 chunks. Opening, reading, scanning and writing them cost
what they hold (their keys, their written chunks), in time and in memory; what would need the
whole grid in memory is refused with a RefFormatError naming the limit and how to raise it."""

from __future__ import annotations

import json
import pickle
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr

import refzarr
from refzarr.model import ChunkManifest
from refzarr.model import sparse as sparse_module
from timebound import finish_within

MEMORY_BOUND = 64 * 2**20  # bytes a bounded operation may allocate (Python + numpy)
TIME_BOUND = 30.0  # seconds: about 30x what each takes here, for a loaded machine
HARD_TIMEOUT = 120.0


def bounded(call: Callable[[], Any]) -> Any:
    """``call()`` in a thread (`finish_within`), its time and its peak of traced allocations
    bounded."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        result, error = finish_within(HARD_TIMEOUT, call)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < TIME_BOUND
    assert peak < MEMORY_BOUND, f"allocated {peak / 2**20:.0f} MiB"
    if error is not None:
        raise error
    return result


def bomb(shape: list[int], chunks: list[int], **refs: Any) -> dict[str, Any]:
    zarray = {
        "shape": shape,
        "chunks": chunks,
        "dtype": "<i4",
        "fill_value": 7,
        "order": "C",
        "filters": None,
        "compressor": None,
        "zarr_format": 2,
    }
    dims = json.dumps({"_ARRAY_DIMENSIONS": [f"d{k}" for k in range(len(shape))]})
    documents = {".zgroup": '{"zarr_format":2}', "a/.zarray": json.dumps(zarray), "a/.zattrs": dims}
    return {"version": 1, "refs": {**documents, **refs}}


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("data") / "data.bin"
    path.write_bytes(np.arange(8, dtype="<i4").tobytes())
    return path.as_uri()


@pytest.mark.parametrize("exponent", [27, 40, 62])
def test_a_small_json_declaring_a_huge_grid_reads_what_it_holds(
    tmp_path: Path, data_file: str, exponent: int
) -> None:
    n = 2**exponent
    refs = bomb([n], [1], **{"a/0": [data_file, 4, 4], "a/5": "base64:AQAAAA=="})
    path = tmp_path / "bomb.json"
    path.write_text(json.dumps(refs, separators=(",", ":")))
    assert path.stat().st_size < 500
    for read in (lambda: refzarr.read(path), lambda: refzarr.from_kerchunk(refs)):
        group = bounded(read)
        assert group["a"].manifest.sparse
        assert group["a"].manifest.count_written() == 2
    ds = bounded(lambda: refzarr.open_dataset(group))
    values = bounded(lambda: ds["a"][:7].values)
    np.testing.assert_array_equal(values, [1, np.nan, np.nan, np.nan, np.nan, 1, np.nan])
    assert bounded(lambda: zarr.open_array(refzarr.ReferenceStore(group), path="a")[n - 1]) == 7
    out = tmp_path / "out.json"
    bounded(lambda: refzarr.write(group, out))
    assert refzarr.read(out)["a"].manifest == group["a"].manifest


def test_a_huge_two_dimensional_grid(tmp_path: Path, data_file: str) -> None:
    refs = bomb([2**31, 2**31], [1, 1], **{"a/3.4": [data_file, 0, 4]})
    group = bounded(lambda: refzarr.from_kerchunk(refs))
    assert group["a"].manifest[3, 4] == (data_file, 0, 4)
    assert group["a"].manifest[4, 3] is None


@pytest.mark.parametrize("shape", [[2**63], [2**40, 2**40], [10**30]])
def test_grids_past_any_chunk_number_are_refused(tmp_path: Path, shape: list[int]) -> None:
    path = tmp_path / "bomb.json"
    path.write_text(json.dumps(bomb(shape, [1] * len(shape))))
    with pytest.raises(refzarr.RefFormatError, match=r"bomb\.json") as info:
        bounded(lambda: refzarr.read(path))
    assert "MemoryError" not in str(info.value)


def test_what_needs_the_whole_grid_is_refused_with_the_limit(tmp_path: Path) -> None:
    """The whole-grid columns of a sparse grid (`refzarr.to_kerchunk` and combine no longer
    need them: tests/hostile/test_sparse_whole_grid.py)."""
    group = refzarr.from_kerchunk(bomb([2**30], [1], **{"a/1": "base64:AQAAAA=="}))
    with pytest.raises(refzarr.RefFormatError, match=r"1,073,741,824 manifest entries") as info:
        bounded(lambda: group["a"].manifest.path_id)
    assert "set_max_dense_entries" in str(info.value)


@pytest.fixture
def dense_limit() -> Iterator[None]:
    yield
    sparse_module.set_max_dense_entries(sparse_module.MAX_DENSE_ENTRIES)


def test_the_limit_is_configurable(dense_limit: None) -> None:
    group = refzarr.from_kerchunk(bomb([2**21], [1], **{"a/1": "base64:AQAAAA=="}))
    sparse_module.set_max_dense_entries(2**20)
    with pytest.raises(refzarr.RefFormatError, match="over the limit of 1,048,576"):
        _ = group["a"].manifest.offset
    sparse_module.set_max_dense_entries(2**21)
    assert group["a"].manifest.path_id[1] == -2  # inlined
    with pytest.raises(ValueError, match="positive integer"):
        sparse_module.set_max_dense_entries(0)


# -- Parquet ----------------------------------------------------------------------------------


@pytest.fixture
def parquet_bomb(tmp_path: Path, data_file: str) -> Callable[[int, int], Path]:
    def make(n: int, record_size: int) -> Path:
        target = tmp_path / f"bomb-{n}-{record_size}.parq"
        refzarr.write(
            refzarr.from_kerchunk(bomb([10], [1], **{"a/0": [data_file, 4, 4]})),
            target,
            record_size=10,
        )
        zmetadata = json.loads((target / ".zmetadata").read_text())
        zmetadata["metadata"]["a/.zarray"]["shape"] = [n]
        zmetadata["record_size"] = record_size
        (target / ".zmetadata").write_text(json.dumps(zmetadata))
        return target

    return make


def test_a_parquet_set_declaring_a_huge_grid_reads_what_it_holds(
    parquet_bomb: Callable[[int, int], Path],
) -> None:
    target = parquet_bomb(2**40, 10)
    group = bounded(lambda: refzarr.read(target))
    values = bounded(lambda: refzarr.open_dataset(group)["a"][:3].values)
    np.testing.assert_array_equal(values, [1, np.nan, np.nan])


@pytest.mark.parametrize("record_size", [2**25, 10**12])
def test_a_huge_parquet_record_size_is_refused(
    parquet_bomb: Callable[[int, int], Path], record_size: int
) -> None:
    target = parquet_bomb(2**40, record_size)
    with pytest.raises(refzarr.RefFormatError, match=f"record_size {record_size:,}") as info:
        bounded(lambda: refzarr.open_dataset(target)["a"][:3].values)
    assert "set_max_dense_entries" in str(info.value)


# -- HDF5 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("written", [False, True])
def test_scanning_an_hdf5_file_declaring_a_huge_grid(tmp_path: Path, written: bool) -> None:
    path = tmp_path / "huge.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("x", shape=(2**32,), chunks=(1,), dtype="<i4", fillvalue=-1)
        if written:
            ds[12] = 42
    group = bounded(lambda: refzarr.scan(path))
    manifest = group["x"].manifest
    assert manifest.sparse
    assert manifest.count_written() == int(written)
    ds = refzarr.open_dataset(group, mask_and_scale=False)
    assert bounded(lambda: ds["x"][10:14].values).tolist() == [-1, -1, 42 if written else -1, -1]
    bounded(lambda: refzarr.write(group, tmp_path / "huge.json"))


# -- the sparse manifest itself ---------------------------------------------------------------


def test_a_sparse_manifest_equals_its_dense_twin() -> None:
    grid = (2**21,)
    numbers = np.array([3, 2**20, 2**21 - 1], np.int64)
    coords = numbers[:, None]
    sparse = ChunkManifest.from_entries(
        grid, coords, ["u", "v"], [0, 1, 0], [1, 2, 3], [4, 5, 6], {(7,): b"x"}
    )
    assert sparse.sparse
    assert pickle.loads(pickle.dumps(sparse)) == sparse
    sparse_module.set_max_dense_entries(2**22)
    try:
        ids, offsets, lengths = sparse.path_id, sparse.offset, sparse.length
        inlined, paths = sparse.inlined, sparse.paths
    finally:
        sparse_module.set_max_dense_entries(sparse_module.MAX_DENSE_ENTRIES)
    dense = ChunkManifest.from_arrays(paths, ids, offsets, lengths, inlined)
    assert not dense.sparse
    assert dense == sparse
    assert sparse[2**20] == ("v", 2, 5)
    assert sparse[7] == b"x"
    assert sparse[8] is None
    blocks = list(sparse.iter_written_blocks())
    assert [b.start for b in blocks] == [0, 2**20, 2**21 - 2**16]
    assert sum(int((b.path_id != -1).sum()) for b in blocks) == 4


def test_writing_a_huge_sparse_grid_as_parquet_is_refused(tmp_path: Path) -> None:
    group = refzarr.from_kerchunk(bomb([2**40], [1], **{"a/1": "base64:AQAAAA=="}))
    with pytest.raises(refzarr.RefFormatError, match="array 'a' written as Parquet"):
        bounded(lambda: refzarr.write(group, tmp_path / "out.parq"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("every", [16, 64])
def test_a_large_grid_read_from_json_equals_the_per_key_reader(
    tmp_path: Path, data_file: str, every: int
) -> None:
    n = (
        2**20 + 2**16
    )  # held dense when one chunk in 16 (and one more) is written, sparse for one in 64
    keys = {f"a/{k}": [data_file, 4 * (k % 2), 4] for k in range(0, n, every)}
    refs = bomb([n], [1], **keys, **{"a/1": "base64:AQAAAA=="})
    path = tmp_path / "large.json"
    path.write_text(json.dumps(refs))
    group = refzarr.read(path)
    assert group["a"].manifest.sparse is (every == 64)
    assert group["a"].manifest == refzarr.from_kerchunk(refs)["a"].manifest
    assert group["a"].manifest.count_written() == len(keys) + 1
