"""Virtual chunks as columns for Icechunk 2.x's ``store.set_virtual_refs_arr`` (used only when
the installed Icechunk has it; Icechunk 1.x gets `VirtualChunkSpec` objects).

``set_virtual_refs_arr(array_path, chunk_grid_shape, locations, offsets, lengths, *,
validate_containers, arr_offset, checksum)`` takes one box of the chunk grid (its shape, and
its corner as ``arr_offset``), flat C-order columns over every chunk of the box (an empty
location: no reference) and ONE checksum for the whole call. So the chunks are grouped by
their file's checksum, each group written as the bounding box of its chunks: a file's chunks
form a slab in the usual combination, and the boxes add up to about the number of chunks.
When they would add up to far more (files interleaved in the grid), or the calls would be
many with a few chunks each (a file of one chunk per array, each file its own checksum: a
call costs about ten chunk specs), the caller writes `VirtualChunkSpec` objects instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

__all__ = ["MAX_BOX_RATIO", "MIN_CHUNKS_PER_CALL", "ArrCall", "Columns", "arr_calls"]

MAX_BOX_RATIO = 4
"""The boxes may hold at most this many slots per referenced chunk (plus a small allowance),
else `arr_calls` gives up (the columns would cost more than the objects they replace)."""

_ALLOWANCE = 1024

MIN_CHUNKS_PER_CALL = 8
"""Past `_FEW_CALLS`, the calls must write this many chunks each on average, else
`arr_calls` gives up: Icechunk 2.3 takes about as long for one ``set_virtual_refs_arr`` call
as for ten `VirtualChunkSpec` objects in one ``set_virtual_refs`` call (20,000 files of one
chunk, each with its own checksum: 0.20 s CPU in calls of one chunk, 0.05 s as specs)."""

_FEW_CALLS = 16

Checksum = str | datetime | None


@dataclass(frozen=True, slots=True)
class Columns:
    """An array's referenced chunks: flat chunk numbers in the grid, an index into ``urls``
    (absolute URLs), byte offsets and lengths (whole-file lengths resolved)."""

    numbers: np.ndarray[Any, np.dtype[np.int64]]
    url_ids: np.ndarray[Any, np.dtype[np.int64]]
    urls: Sequence[str]
    offsets: np.ndarray[Any, np.dtype[np.uint64]]
    lengths: np.ndarray[Any, np.dtype[np.uint64]]


@dataclass(frozen=True, slots=True)
class ArrCall:
    """The arguments of one ``set_virtual_refs_arr`` call (after ``array_path``)."""

    chunk_grid_shape: tuple[int, ...]
    arr_offset: tuple[int, ...]
    locations: list[str]
    offsets: np.ndarray[Any, np.dtype[np.uint64]]
    lengths: np.ndarray[Any, np.dtype[np.uint64]]
    checksum: Checksum

    @property
    def has_gaps(self) -> bool:
        """Whether some slot of the box holds no reference (an empty location)."""
        return "" in self.locations


def arr_calls(
    grid: tuple[int, ...],
    columns: Columns,
    checksums: Mapping[str, Checksum],
    shift: Sequence[int] = (),
) -> list[ArrCall] | None:
    """The calls that write ``columns`` (chunk indices moved by ``shift``), one per checksum
    (``checksums``: URL -> ETag, modification time or None; a URL not there has none); None
    when the boxes would hold more than `MAX_BOX_RATIO` slots per chunk, or the calls
    fewer than `MIN_CHUNKS_PER_CALL` chunks each (beyond a few calls)."""
    count = columns.numbers.size
    if not count:
        return []
    keys, key_of_url = _checksum_keys(columns.urls, checksums)
    labels = key_of_url[columns.url_ids]
    order = np.argsort(labels, kind="stable")
    found, starts = np.unique(labels[order], return_index=True)
    if found.size > _FEW_CALLS and found.size * MIN_CHUNKS_PER_CALL > count:
        return None
    coords = _coords(grid, columns.numbers)
    groups = np.split(order, starts[1:])
    boxes = [_box(coords[g]) for g in groups]
    if sum(int(np.prod(high - low)) for low, high in boxes) > MAX_BOX_RATIO * count + _ALLOWANCE:
        return None
    moved = np.asarray(shift or [0] * len(grid), dtype=np.int64)
    return [
        _call(coords[g], g, box, columns, keys[int(k)], moved)
        for k, g, box in zip(found, groups, boxes, strict=True)
    ]


def _checksum_keys(
    urls: Sequence[str], checksums: Mapping[str, Checksum]
) -> tuple[list[Checksum], np.ndarray[Any, np.dtype[np.int64]]]:
    """The distinct checksums, and each URL's position among them."""
    keys: list[Checksum] = []
    position: dict[Checksum, int] = {}
    of_url = np.empty(len(urls), dtype=np.int64)
    for k, url in enumerate(urls):
        value = checksums.get(url)
        if value not in position:
            position[value] = len(keys)
            keys.append(value)
        of_url[k] = position[value]
    return keys, of_url


def _coords(grid: tuple[int, ...], numbers: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if not grid:
        return np.zeros((numbers.size, 0), dtype=np.int64)
    return np.stack(np.unravel_index(numbers, grid), axis=1).astype(np.int64)


def _box(coords: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    return coords.min(axis=0), coords.max(axis=0) + 1


def _call(
    coords: np.ndarray[Any, Any],
    rows: np.ndarray[Any, Any],
    box: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]],
    columns: Columns,
    checksum: Checksum,
    shift: np.ndarray[Any, Any],
) -> ArrCall:
    low, high = box
    shape = tuple(int(n) for n in high - low)
    volume = int(np.prod(shape)) if shape else 1
    slots = np.ravel_multi_index(tuple((coords - low).T), shape) if shape else np.zeros(1, int)
    urls = np.asarray(columns.urls, dtype=object)
    locations = np.full(volume, "", dtype=object)
    locations[slots] = urls[columns.url_ids[rows]]
    offsets = np.zeros(volume, dtype=np.uint64)
    lengths = np.zeros(volume, dtype=np.uint64)
    offsets[slots] = columns.offsets[rows]
    lengths[slots] = columns.lengths[rows]
    corner = tuple(int(c) for c in low + shift)
    return ArrCall(shape, corner, locations.tolist(), offsets, lengths, checksum)
