"""The version 1 B-tree chunk index reader: h5py's ``chunk_iter`` result exactly, or None.

Every case compares ``read_btree_chunks`` with the chunks h5py's ``DatasetID.chunk_iter``
reports, as sets of (chunk coordinates, byte offset, size, filter mask): written files of
every shape the reader covers (which must take the fast path), files it does not cover
(which must give None), damaged files (None, and the scan as without the reader) and every
dataset of the corpus (None or equal).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from h5kit import CORPUS, CORPUS_FILES, corpus_h5_files, write_h5

import refzarr
from refzarr.scan.hdf5 import btree as hdf5_btree
from refzarr.scan.hdf5 import layout as hdf5_layout
from refzarr.scan.hdf5 import ohdr as hdf5_ohdr
from refzarr.scan.hdf5.btree import read_btree_chunks

Chunk = tuple[tuple[int, ...], int, int, int]

LIBVER = {"earliest": "earliest", "v108": ("v108", "v108")}
"""Bounds h5py writes with: object headers version 1, or version 2 (as netCDF-4 writes)."""


def chunk_iter_set(ds: h5py.Dataset) -> set[Chunk]:
    """Every chunk h5py reports: (coordinates in chunk units, offset, size, filter mask)."""
    found: list[Any] = []
    ds.id.chunk_iter(found.append)
    chunks = ds.chunks
    return {
        (
            tuple(o // c for o, c in zip(info.chunk_offset, chunks, strict=True)),
            int(info.byte_offset),
            int(info.size),
            int(info.filter_mask),
        )
        for info in found
    }


def fast_set(ds: h5py.Dataset, read_range: Any = None) -> set[Chunk] | None:
    """The fast reader's chunks as a set (None when it declined); no chunk listed twice."""
    got = read_btree_chunks(ds, read_range, min_chunks=0)
    if got is None:
        return None
    n = len(got.offsets)
    assert got.coords.shape == (n, ds.ndim)
    dtypes = (got.coords.dtype, got.offsets.dtype, got.sizes.dtype, got.masks.dtype)
    assert dtypes == (np.int64, np.uint64, np.uint64, np.uint32)
    chunks = {
        (tuple(int(c) for c in got.coords[k]), int(got.offsets[k]), int(got.sizes[k]), int(m))
        for k, m in enumerate(got.masks)
    }
    assert len(chunks) == n
    return chunks


def chunked_datasets(f: h5py.File) -> Iterator[h5py.Dataset]:
    found: list[h5py.Dataset] = []
    f.visititems(
        lambda _, obj: (
            found.append(obj) if isinstance(obj, h5py.Dataset) and obj.chunks is not None else None
        )
    )
    yield from found


def assert_fast_everywhere(path: Path) -> None:
    """Every chunked dataset of ``path`` takes the fast path and equals chunk_iter."""
    with h5py.File(path, "r") as f:
        datasets = list(chunked_datasets(f))
        assert datasets
        for ds in datasets:
            got = fast_set(ds)
            assert got is not None, ds.name
            assert got == chunk_iter_set(ds), ds.name


# -- files the reader covers ----------------------------------------------------------------------


def _shapes(f: h5py.File) -> None:
    rng = np.random.default_rng(0)
    f.create_dataset("d1", data=rng.random(1000), chunks=(64,), compression="gzip")
    f.create_dataset("d2", data=rng.random((37, 41)).astype("f4"), chunks=(8, 5))
    f.create_dataset(
        "d3", data=np.arange(5 * 6 * 7, dtype=">i2").reshape(5, 6, 7), chunks=(2, 3, 4)
    )
    d4 = np.arange(3 * 4 * 5 * 6, dtype="u8").reshape(3, 4, 5, 6)
    f.create_dataset("d4", data=d4, chunks=(2, 2, 2, 5), compression="lzf", shuffle=True)
    f.create_dataset("fletcher", data=rng.random((20, 20)), chunks=(7, 7), fletcher32=True)
    f.create_dataset("one_chunk", data=np.arange(10), chunks=(10,))
    f.create_dataset("bigger_chunk", data=np.arange(10), chunks=(100,), maxshape=(None,))
    f.create_dataset("compound", data=np.zeros(50, dtype="i4,f8"), chunks=(7,))
    f.create_dataset("strings", data=np.array([b"ab", b"cde"] * 20), chunks=(6,))
    ordered = f.create_dataset(  # object header v2: times, message creation order
        "ordered", data=np.arange(30), chunks=(4,), track_order=True, track_times=True
    )
    for k in range(40):  # enough attributes for continuation blocks
        ordered.attrs[f"a{k}"] = np.arange(k)
    g = f.create_group("g/h")
    g.create_dataset("nested", data=np.ones((9, 9)), chunks=(4, 4), compression=1)


def _sparse(f: h5py.File) -> None:
    ds = f.create_dataset("sparse", shape=(100, 100), dtype="i4", chunks=(10, 10), fillvalue=-1)
    ds[0:10, 0:10] = 1
    ds[55, 99] = 2
    ds[99, 0] = 3
    f.create_dataset("never_written", shape=(10, 10), dtype="f4", chunks=(5, 5))


def _unlimited(f: h5py.File) -> None:
    ds = f.create_dataset("grow", shape=(0, 6), maxshape=(None, None), dtype="f8", chunks=(4, 4))
    for step in range(1, 6):
        ds.resize((step * 3, 6))
        ds[-3:] = step
    ds.resize((15, 9))  # wider: the new column chunks are never written
    shrink = f.create_dataset("shrink", data=np.arange(100.0), maxshape=(None,), chunks=(7,))
    shrink.resize((30,))  # chunks past the new extent are freed


@pytest.mark.parametrize("libver", ["earliest", "v108"])
@pytest.mark.parametrize("writer", [_shapes, _sparse, _unlimited], ids=["shapes", "sparse", "grow"])
def test_fast_reader_equals_chunk_iter(
    tmp_path: Path, writer: Callable[[h5py.File], None], libver: str
) -> None:
    """Layout message version 3 (object headers v1 with earliest, v2 with v108)."""
    path = write_h5(tmp_path / "f.h5", writer, libver=LIBVER[libver])
    assert_fast_everywhere(path)


def test_empty_index_gives_no_chunks(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "e.h5", _sparse, libver="earliest")
    with h5py.File(path, "r") as f:
        got = read_btree_chunks(f["never_written"], min_chunks=0)
        assert got is not None
        assert got.coords.shape == (0, 2)
        assert len(got.offsets) == len(got.sizes) == len(got.masks) == 0


def test_filter_masks_of_chunks_written_raw(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        ds = f.create_dataset("m", shape=(4, 8), dtype="i4", chunks=(2, 4), compression="gzip")
        ds[...] = 7
        raw = np.arange(8, dtype="i4").tobytes()
        ds.id.write_direct_chunk((0, 4), raw, filter_mask=1)
        ds.id.write_direct_chunk((2, 0), raw, filter_mask=0xFFFFFFFF)

    path = write_h5(tmp_path / "m.h5", writer, libver="earliest")
    assert_fast_everywhere(path)
    with h5py.File(path, "r") as f:
        got = read_btree_chunks(f["m"], min_chunks=0)
        assert got is not None
        assert sorted(got.masks.tolist()) == [0, 0, 1, 0xFFFFFFFF]


def test_written_in_several_sessions(tmp_path: Path) -> None:
    path = tmp_path / "s.h5"
    with h5py.File(path, "w", libver="earliest") as f:
        f.create_dataset("t", shape=(0, 10), maxshape=(None, 10), chunks=(2, 5), dtype="i8")
    for session in range(4):
        with h5py.File(path, "a") as f:
            ds = f["t"]
            ds.resize((ds.shape[0] + 5, 10))
            ds[-5:] = session
            if session == 2:
                ds[0, 0] = 99  # rewrites a chunk: it may move
    assert_fast_everywhere(path)


def test_user_block(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "u.h5", _shapes, libver="earliest", userblock_size=1024)
    assert_fast_everywhere(path)


def _set_istore_k(fcpl: h5py.h5p.PropFCID, k: int) -> None:
    """``H5Pset_istore_k``, which h5py does not wrap (the library h5py links, via ctypes)."""
    setter = ctypes.CDLL(h5py.h5p.__file__).H5Pset_istore_k
    setter.argtypes = [ctypes.c_int64, ctypes.c_uint]
    setter.restype = ctypes.c_int
    assert setter(fcpl.id, k) >= 0


def _deep_file(path: Path, k: int, libver: str) -> Path:
    """Chunk B-trees with 2K = ``2 * k`` entries a node: a few hundred chunks, many levels."""
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    _set_istore_k(fcpl, k)
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    bounds = {
        "earliest": (h5py.h5f.LIBVER_EARLIEST, h5py.h5f.LIBVER_LATEST),
        "v108": (h5py.h5f.LIBVER_V18, h5py.h5f.LIBVER_V18),
    }[libver]
    fapl.set_libver_bounds(*bounds)
    fid = h5py.h5f.create(bytes(path), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)
    with h5py.File(fid) as f:
        f.create_dataset("line", data=np.arange(300), chunks=(1,))
        sparse = f.create_dataset("grid", shape=(40, 40), dtype="u1", chunks=(2, 3))
        sparse[::3, ::2] = 1
        f.create_dataset("packed", data=np.arange(2000.0), chunks=(3,), compression="gzip")
    return path


@pytest.mark.parametrize(("k", "libver"), [(2, "earliest"), (4, "earliest"), (3, "v108")])
def test_deep_trees(tmp_path: Path, k: int, libver: str) -> None:
    """Superblock version 1 (K stored) and version 2 (K in the superblock extension)."""
    path = _deep_file(tmp_path / "deep.h5", k, libver)
    assert_fast_everywhere(path)
    levels: list[int] = []
    read_level = hdf5_btree._read_level

    def spy(*args: Any) -> Any:
        levels.append(args[-1])
        return read_level(*args)

    with h5py.File(path, "r") as f, pytest.MonkeyPatch.context() as mp:
        mp.setattr(hdf5_btree, "_read_level", spy)
        assert read_btree_chunks(f["packed"], min_chunks=0) is not None
    assert max(levels) >= 3, levels


def test_the_scan_uses_it_and_matches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_h5(tmp_path / "s.h5", _shapes, libver="earliest")
    monkeypatch.setattr(hdf5_btree, "MIN_CHUNKS", 0)
    taken: list[bool] = []

    def spy(ds: h5py.Dataset, read_range: Any = None) -> Any:
        got = read_btree_chunks(ds, read_range)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(hdf5_layout, "read_btree_chunks", spy)
    fast = refzarr.scan(str(path))
    assert taken == [True] * 11  # every chunked dataset of _shapes
    monkeypatch.setattr(hdf5_layout, "read_btree_chunks", lambda ds, read_range=None: None)
    slow = refzarr.scan(str(path))
    assert_same_scan(fast, slow)


def test_small_grids_are_left_to_h5py(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "s.h5", _shapes, libver="earliest")
    with h5py.File(path, "r") as f:
        assert read_btree_chunks(f["d2"]) is None  # 40 chunks: chunk_iter is quicker
        assert read_btree_chunks(f["d2"], min_chunks=40) is not None


def assert_same_scan(fast: Any, slow: Any) -> None:
    fast_arrays, slow_arrays = dict(fast.arrays()), dict(slow.arrays())
    assert fast_arrays.keys() == slow_arrays.keys()
    for name, arr in fast_arrays.items():
        other = slow_arrays[name].manifest
        assert arr.manifest.paths == other.paths, name
        for column in ("path_id", "offset", "length"):
            np.testing.assert_array_equal(
                getattr(arr.manifest, column), getattr(other, column), err_msg=name
            )


# -- files it does not cover ----------------------------------------------------------------------


def test_other_chunk_indexes_give_none(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        data = np.arange(6 * 8, dtype="i4").reshape(6, 8)
        f.create_dataset("fixed_array", data=data, chunks=(2, 3))
        f.create_dataset("extensible", data=data, chunks=(2, 3), maxshape=(None, 8))
        f.create_dataset("btree_v2", data=data, chunks=(2, 3), maxshape=(None, None))
        f.create_dataset("single", data=data, chunks=(6, 8))

    path = write_h5(tmp_path / "latest.h5", writer, libver="latest")
    with h5py.File(path, "r") as f:
        for ds in chunked_datasets(f):
            assert read_btree_chunks(ds, min_chunks=0) is None, ds.name


def test_files_open_for_writing_or_in_memory_give_none(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "w.h5", _shapes, libver="earliest")
    with h5py.File(path, "r+") as f:
        assert read_btree_chunks(f["d2"], min_chunks=0) is None
    with h5py.File(path, "r", driver="core") as f:
        assert read_btree_chunks(f["d2"], min_chunks=0) is None
    with path.open("rb") as raw, h5py.File(raw, "r") as f:  # a file object, nothing to read it
        assert read_btree_chunks(f["d2"], min_chunks=0) is None


def test_file_objects_read_through_read_range(tmp_path: Path) -> None:
    """h5py reading a file object (remote files): the nodes are read with ``read_range``."""
    path = _deep_file(tmp_path / "deep.h5", 2, "earliest")
    with path.open("rb") as raw, h5py.File(raw, "r") as f:

        def read_range(offset: int, length: int) -> bytes:
            raw.seek(offset)
            return raw.read(length)

        datasets = list(chunked_datasets(f))
        for ds in datasets:
            got = fast_set(ds, read_range)
            assert got is not None, ds.name
            assert got == chunk_iter_set(ds), ds.name
        short = read_btree_chunks(datasets[0], lambda offset, length: b"", min_chunks=0)
        assert short is None


# -- damaged files --------------------------------------------------------------------------------


def _damage(data: bytearray, node: int, what: str) -> None:
    """Damage the chunk B-tree node at byte ``node`` (signature, level, count or a key)."""
    if what == "signature":
        data[node + 3] ^= 0x20
    elif what == "level":
        data[node + 5] += 1
    elif what == "entries":
        data[node + 6 : node + 8] = (1000).to_bytes(2, "little")
    elif what == "offset":  # the second key's first offset: off the chunk grid
        key = node + 24 + (8 + 8 * 3) + 8
        data[key + 8] ^= 0x01
    else:
        raise AssertionError(what)


@pytest.mark.parametrize("what", ["signature", "level", "entries", "offset"])
def test_damaged_node_gives_none_and_the_scan_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    def writer(f: h5py.File) -> None:
        f.create_dataset("t", data=np.arange(40 * 60, dtype="f4").reshape(40, 60), chunks=(4, 5))

    healthy = write_h5(tmp_path / "h.h5", writer, libver="earliest")
    data = bytearray(healthy.read_bytes())
    nodes = [k for k in range(len(data)) if data[k : k + 5] == b"TREE\x01"]
    assert len(nodes) >= 2  # a root and leaves
    _damage(data, nodes[-1], what)
    damaged = tmp_path / "d.h5"
    damaged.write_bytes(bytes(data))
    monkeypatch.setattr(hdf5_btree, "MIN_CHUNKS", 0)
    with h5py.File(damaged, "r") as f:
        assert read_btree_chunks(f["t"], min_chunks=0) is None
    fast = _scan_outcome(damaged)
    monkeypatch.setattr(hdf5_layout, "read_btree_chunks", lambda ds, read_range=None: None)
    slow = _scan_outcome(damaged)
    if isinstance(slow, BaseException):
        assert (type(fast), str(fast)) == (type(slow), str(slow))
    else:
        assert_same_scan(fast, slow)


def _scan_outcome(path: Path) -> Any:
    try:
        return refzarr.scan(str(path))
    except Exception as exc:  # compared, not raised
        return exc


# -- the corpus -----------------------------------------------------------------------------------


@pytest.mark.skipif(not CORPUS_FILES, reason=f"no HDF5 / netCDF4 corpus under {CORPUS}")
def test_corpus_none_or_equal() -> None:
    fast = 0
    for f in corpus_h5_files():
        for ds in chunked_datasets(f):
            try:
                expected = chunk_iter_set(ds)
            except (RuntimeError, OSError, ValueError):
                continue  # HDF5 cannot list them: the scanner reports it, not ours to check
            got = fast_set(ds)
            if got is not None:
                assert got == expected, f"{f.filename}{ds.name}"
                fast += 1
    assert fast > 0  # netCDF-4 files index chunks with version 1 B-trees


# -- object headers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("libver", "count", "size"), [("earliest", 40, 10), ("v108", 8, 500)], ids=["v1", "v2"]
)
def test_object_header_continuation_blocks_are_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, libver: str, count: int, size: int
) -> None:
    """Attributes overflow the header's first block (v1: raw blocks, v2: OCHK blocks)."""

    def writer(f: h5py.File) -> None:
        ds = f.create_dataset("x", data=np.arange(3000), chunks=(2,))
        for k in range(count):
            ds.attrs[f"a{k}"] = np.arange(size)

    path = write_h5(tmp_path / "o.h5", writer, libver=LIBVER[libver])
    followed: list[int] = []
    continuation = hdf5_ohdr._continuation

    def spy(*args: Any) -> bytes:
        followed.append(1)
        return continuation(*args)

    monkeypatch.setattr(hdf5_ohdr, "_continuation", spy)
    with h5py.File(path, "r") as f:
        fd = f.id.get_vfd_handle()

        def read(position: int, length: int) -> bytes:
            return os.pread(fd, length, position)

        sb = hdf5_ohdr.read_superblock(read, 0, path.stat().st_size)
        address = h5py.h5g.get_objinfo(f["x"].id).objno[0]
        assert hdf5_ohdr.find_message(read, sb, address, 0x99) is None  # every block read
        assert followed
        layout = hdf5_ohdr.find_message(read, sb, address, hdf5_ohdr.LAYOUT)
        assert layout is not None
        assert layout[:2] == b"\x03\x02"
    assert_fast_everywhere(path)
