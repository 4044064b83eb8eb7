"""Small manifest blocks are checked in plain Python: same verdicts and messages as numpy's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refzarr import ChunkManifest, RefFormatError
from refzarr.model import INLINED, MISSING, WHOLE_FILE, ManifestBlock
from refzarr.model.manifest import SMALL_BLOCK, _check_entries, _check_entries_small

_EDGES = [0, 1, 7, 2**63 - 1, 2**63, int(WHOLE_FILE) - 1, int(WHOLE_FILE)]
"""Offsets and lengths at the edges of what the checks accept."""


def _verdict(check: Any, block: Any) -> Any:
    try:
        return check(block)
    except RefFormatError as exc:
        return str(exc)


class _Unchecked:
    """The fields of a block, without the construction that checks them."""

    def __init__(self, start: int, paths: tuple[str, ...], columns: list[Any]) -> None:
        self.start, self.paths = start, paths
        self.path_id = np.asarray([c[0] for c in columns], dtype=np.int32)
        self.offset = np.asarray([c[1] for c in columns], dtype=np.uint64)
        self.length = np.asarray([c[2] for c in columns], dtype=np.uint64)


entries = st.tuples(
    st.integers(-4, 3),
    st.sampled_from(_EDGES) | st.integers(0, 2**64 - 1),
    st.sampled_from(_EDGES) | st.integers(0, 2**64 - 1),
)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 100),
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True),
    st.lists(entries, max_size=SMALL_BLOCK),
)
def test_small_block_checks_agree_with_numpy(
    start: int, paths: list[str], columns: list[Any]
) -> None:
    block = _Unchecked(start, tuple(paths), columns)
    assert _verdict(_check_entries_small, block) == _verdict(_check_entries, block)


def _padded(n: int, entry: tuple[int, int, int]) -> tuple[Any, ...]:
    """Columns of ``n`` missing chunks, then ``entry``."""
    ids = [MISSING] * n + [entry[0]]
    offsets = np.asarray([0] * n + [entry[1]], dtype=np.uint64)
    lengths = np.asarray([0] * n + [entry[2]], dtype=np.uint64)
    return ids, offsets, lengths


@pytest.mark.parametrize("n", [0, SMALL_BLOCK])  # one block checked by each path
@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ((-3, 0, 0), r"path ids must lie in \[-2, 1\), got -3 \.\. "),
        ((1, 0, 1), r"path ids must lie in \[-2, 1\), got -?1 \.\. 1$"),
        ((0, 2**63, 1), "offsets must be at most 9223372036854775807"),
        ((0, 0, 2**63), "lengths must be at most 9223372036854775807"),
        ((0, 1, int(WHOLE_FILE)), "whole-file reference must have offset 0"),
        ((MISSING, 4, 0), "missing and inlined chunks must have offset 0"),
        ((INLINED, 0, 0), "inlined chunk bytes do not match"),
    ],
)
def test_either_path_gives_the_same_error(
    n: int, entry: tuple[int, int, int], message: str
) -> None:
    ids, offsets, lengths = _padded(n, entry)
    with pytest.raises(RefFormatError, match=message):
        ChunkManifest.from_arrays(["u"], ids, offsets, lengths)


@pytest.mark.parametrize("n", [SMALL_BLOCK, SMALL_BLOCK + 1])
def test_inlined_numbers_count_from_the_block_start(n: int) -> None:
    ids = np.full(n, MISSING, np.int32)
    ids[-1] = INLINED
    zeros = np.zeros(n, np.uint64)
    block = ManifestBlock(100, (), ids, zeros, zeros.copy(), {100 + n - 1: b"x"})
    assert dict(block.inlined) == {100 + n - 1: b"x"}
