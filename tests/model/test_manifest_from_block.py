"""`ChunkManifest.from_block`: one checked block used as it is (no copy), its size checked
against the grid; blocks bigger than the plain-Python limit get the same verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from refzarr import ChunkManifest, ChunkRef, RefFormatError
from refzarr.model import INLINED, MISSING, WHOLE_FILE, ManifestBlock


def _block(n: int) -> ManifestBlock:
    return ManifestBlock(
        0,
        ("a.tif",),
        np.zeros(n, np.int32),
        np.arange(n, dtype=np.uint64),
        np.ones(n, np.uint64),
        {},
    )


def test_from_block_uses_the_columns_as_they_are() -> None:
    block = _block(6)
    manifest = ChunkManifest.from_block((2, 3), block)
    assert manifest.block(0) is block
    assert manifest[1, 2] == ChunkRef("a.tif", 5, 1)
    assert not block.offset.flags.writeable


def test_from_block_checks_the_grid() -> None:
    with pytest.raises(RefFormatError, match="must hold entries"):
        ChunkManifest.from_block((2, 2), _block(6))


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ((0, 2**63, 1), "offsets must be at most"),
        ((0, 0, 2**63), "lengths must be at most"),
        ((0, 5, int(WHOLE_FILE)), "whole-file reference must have offset 0"),
        ((MISSING, 3, 0), "missing and inlined chunks must have offset 0"),
        ((INLINED, 0, 4), "missing and inlined chunks must have offset 0"),
        ((1, 0, 1), "path ids must lie in"),
    ],
)
def test_big_blocks_refuse_what_small_blocks_refuse(
    entry: tuple[int, int, int], message: str
) -> None:
    n = 1000  # past SMALL_BLOCK: the numpy checks
    ids = np.zeros(n, np.int32)
    offsets = np.arange(n, dtype=np.uint64)
    lengths = np.ones(n, np.uint64)
    ids[-1], offsets[-1], lengths[-1] = entry
    with pytest.raises(RefFormatError, match=message):
        ManifestBlock(0, ("a.tif",), ids, offsets, lengths, {})


def test_big_blocks_accept_whole_files_missing_and_inlined_chunks() -> None:
    n = 1000
    ids = np.zeros(n, np.int32)
    offsets = np.arange(n, dtype=np.uint64)
    lengths = np.ones(n, np.uint64)
    ids[:3] = [MISSING, INLINED, 0]
    offsets[:3] = [0, 0, 0]
    lengths[:3] = [0, 0, WHOLE_FILE]
    block = ManifestBlock(5, ("a.tif",), ids, offsets, lengths, {6: b"x"})
    assert dict(block.inlined) == {6: b"x"}
