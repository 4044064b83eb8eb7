"""A manifest owns its columns: nothing the caller still holds can change them after the
checks (not through a view of a writeable array, not after a trusted pickle), and columns that
are already the manifest's alone are not copied again."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from refzarr import ChunkManifest, ChunkRef
from refzarr.model import ManifestBlock
from refzarr.model.manifest import trusted_pickling

BAD_OFFSET = 2**63  # past MAX_OFFSET: refused by the checks


def _grid_columns(dtype: Any = np.uint64) -> tuple[Any, Any, Any]:
    return (
        np.zeros((2, 3), np.int32),
        np.arange(6, dtype=dtype).reshape(2, 3),
        np.ones((2, 3), dtype),
    )


@pytest.mark.parametrize("dtype", [np.uint64, np.int64], ids=["as stored", "converted"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_from_arrays_keeps_nothing_of_the_callers_arrays(dtype: Any, order: str) -> None:
    ids, offsets, lengths = (np.asarray(c, order=order) for c in _grid_columns(dtype))
    manifest = ChunkManifest.from_arrays(["a.nc"], ids, offsets, lengths)
    block = manifest.block(0)
    for column, given in zip(
        (block.path_id, block.offset, block.length), (ids, offsets, lengths), strict=True
    ):
        assert not np.shares_memory(column, given)
        assert column.base is None  # one copy, the manifest's own (no view of a temporary)
        assert not column.flags.writeable
    offsets[0, 0], ids[0, 1] = 999, 5  # the caller's arrays stay the caller's (writeable)
    assert manifest[0, 0] == ChunkRef("a.nc", 0, 1)
    assert manifest[0, 1] == ChunkRef("a.nc", 1, 1)


def _views() -> dict[str, tuple[Any, Any, Any]]:
    base = np.zeros((3, 8), np.uint64)
    base[1] = np.arange(8)
    buffer = bytearray(np.ones(8, np.uint64).tobytes())
    return {
        "slice of a writeable array": (np.zeros(8, np.int32), base[1], np.ones(8, np.uint64)),
        "view of a view": (np.zeros(8, np.int32), base[1:2].ravel()[:], np.ones(8, np.uint64)),
        "writeable buffer": (
            np.zeros(8, np.int32),
            np.arange(8, dtype=np.uint64),
            np.frombuffer(buffer, np.uint64),
        ),
    }


@pytest.mark.parametrize("case", list(_views()))
def test_blocks_copy_views_of_writeable_memory(case: str) -> None:
    ids, offsets, lengths = _views()[case]
    block = ManifestBlock(0, ("a.nc",), ids, offsets, lengths, {})
    manifest = ChunkManifest.from_block((8,), block)
    for given in (offsets, lengths):
        if given.base is not None:
            assert not np.shares_memory(block.offset, given)
            assert not np.shares_memory(block.length, given)
    base = offsets.base
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, np.ndarray):
        base[...] = BAD_OFFSET  # the caller writes through its own array after the checks
    if isinstance(lengths.base, bytearray):
        lengths.base[:8] = bytes(8)
    assert manifest[3] == ChunkRef("a.nc", 3, 1)
    with trusted_pickling():
        copy = pickle.loads(pickle.dumps(manifest))
    assert copy[3] == ChunkRef("a.nc", 3, 1)


def test_owned_and_read_only_columns_are_not_copied() -> None:
    ids = np.zeros(8, np.int32)
    offsets = np.arange(8, dtype=np.uint64)
    shared = np.ones(16, np.uint64)
    shared.flags.writeable = False
    lengths = shared[:8]  # a view of memory nobody can write
    data = np.frombuffer(np.arange(8, dtype=np.uint64).tobytes(), np.uint64)  # over bytes
    block = ManifestBlock(0, ("a.nc",), ids, offsets, lengths, {})
    assert block.path_id is ids
    assert block.offset is offsets
    assert block.length is lengths
    assert not ids.flags.writeable  # taken: read-only from now on, for the caller too
    other = ManifestBlock(0, ("a.nc",), np.zeros(8, np.int32), data, np.ones(8, np.uint64), {})
    assert other.offset is data
