"""Planning byte-range reads: group requests by file and merge neighbours into blocks.

Everything here is arithmetic on numpy columns; no I/O. A `ReadPlan` says which blocks to fetch
(url, start, end) and where each request's bytes sit inside its block, so the fetched blocks can
be split back into one buffer per request, in request order.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Block", "ReadPlan", "plan_reads"]

IntArray = np.ndarray[Any, np.dtype[np.int64]]


@dataclass(frozen=True, slots=True)
class Block:
    """One contiguous range of one file to fetch: bytes ``[start, end)`` of ``url``."""

    url: str
    start: int
    end: int

    @property
    def length(self) -> int:
        """Number of bytes in the block."""
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """Blocks to fetch, and for every request its block and its offset inside the block.

    Attributes
    ----------
    blocks
        The blocks, grouped by URL and ordered by start within a URL.
    block_of
        For request ``i``, the index of its block in ``blocks``.
    offset_in_block
        For request ``i``, where its bytes start inside its block.
    lengths
        For request ``i``, its length in bytes.
    """

    blocks: tuple[Block, ...]
    block_of: IntArray
    offset_in_block: IntArray
    lengths: IntArray

    @property
    def fetched_bytes(self) -> int:
        """Total bytes the plan fetches (requested bytes plus merged gaps)."""
        return sum(block.length for block in self.blocks)


def plan_reads(
    urls: Sequence[str],
    offsets: Sequence[int] | np.ndarray[Any, Any],
    lengths: Sequence[int] | np.ndarray[Any, Any],
    *,
    max_gap: int,
    max_block: int,
) -> ReadPlan:
    """Merge requests for nearby ranges of the same file into blocks.

    Two ranges of one file share a block when the gap between them is at most ``max_gap`` bytes
    and the block stays within ``max_block`` bytes (a single request larger than ``max_block`` is
    a block of its own). Overlapping and repeated ranges share a block.

    Parameters
    ----------
    urls, offsets, lengths
        One entry per request.
    max_gap
        Largest number of unrequested bytes read to save a request.
    max_block
        Largest block, in bytes, made by merging.

    Returns
    -------
    ReadPlan
    """
    starts = np.asarray(offsets, dtype=np.int64).reshape(-1)
    sizes = np.asarray(lengths, dtype=np.int64).reshape(-1)
    if not len(urls) == len(starts) == len(sizes):
        raise ValueError(
            f"urls, offsets and lengths differ in length: {len(urls)}, {len(starts)}, {len(sizes)}"
        )
    if (starts < 0).any() or (sizes < 0).any():
        raise ValueError("byte ranges need non-negative offsets and lengths")
    count = len(starts)
    block_of = np.zeros(count, dtype=np.int64)
    offset_in_block = np.zeros(count, dtype=np.int64)
    blocks: list[Block] = []
    if count == 0:
        return ReadPlan((), block_of, offset_in_block, sizes)
    if count == 1:  # one range: one block (a point read)
        start = int(starts[0])
        block = Block(urls[0], start, start + int(sizes[0]))
        return ReadPlan((block,), block_of, offset_in_block, sizes)
    url_ids, table = _factorize(urls)
    order = np.lexsort((starts, url_ids))
    for group in _runs(url_ids[order]):
        members = order[group]
        url = table[int(url_ids[members[0]])]
        for first, last in _merge(starts[members], sizes[members], max_gap, max_block):
            chosen = members[first:last]
            start = int(starts[chosen].min())
            end = int((starts[chosen] + sizes[chosen]).max())
            block_of[chosen] = len(blocks)
            offset_in_block[chosen] = starts[chosen] - start
            blocks.append(Block(url, start, end))
    return ReadPlan(tuple(blocks), block_of, offset_in_block, sizes)


def _factorize(urls: Sequence[str]) -> tuple[IntArray, list[str]]:
    """Integer ids for the URLs (first-seen order) and the table of distinct URLs."""
    ids: dict[str, int] = {}
    codes = np.fromiter((ids.setdefault(url, len(ids)) for url in urls), np.int64, len(urls))
    return codes, list(ids)


def _runs(sorted_ids: IntArray) -> list[slice]:
    """Slices of equal consecutive values."""
    edges = np.flatnonzero(np.diff(sorted_ids)) + 1
    bounds = [0, *edges.tolist(), len(sorted_ids)]
    return [slice(a, b) for a, b in itertools.pairwise(bounds)]


def _merge(
    starts: IntArray, sizes: IntArray, max_gap: int, max_block: int
) -> list[tuple[int, int]]:
    """``(first, last)`` index runs of ranges (sorted by start) that form one block each."""
    ends = starts + sizes
    reach = np.maximum.accumulate(ends)
    # a new block where the gap from everything before exceeds max_gap
    breaks = np.flatnonzero(starts[1:] - reach[:-1] > max_gap) + 1
    bounds = [0, *breaks.tolist(), len(starts)]
    runs: list[tuple[int, int]] = []
    for first, last in itertools.pairwise(bounds):
        if reach[last - 1] - starts[first] <= max_block:
            runs.append((first, last))
        else:
            runs.extend(_split_by_size(starts, ends, first, last, max_block))
    return runs


def _split_by_size(
    starts: IntArray, ends: IntArray, first: int, last: int, max_block: int
) -> list[tuple[int, int]]:
    """Greedy split of one gap-free run into blocks of at most ``max_block`` bytes."""
    runs = []
    block_first, block_start, block_end = first, int(starts[first]), int(ends[first])
    for k in range(first + 1, last):
        start, end = int(starts[k]), int(ends[k])
        if max(block_end, end) - block_start > max_block:
            runs.append((block_first, k))
            block_first, block_start, block_end = k, start, end
        else:
            block_end = max(block_end, end)
    runs.append((block_first, last))
    return runs
