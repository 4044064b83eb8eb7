"""Basic selections (integers, slices of any step, ``...``) mapped onto a chunk grid.

A regular axis (every chunk the same length) maps positions to chunks by division; an axis
whose chunks differ in length (a rectilinear grid) by a binary search of the chunk starts.

An integer or a step-1 slice of a regular axis (what a dashboard's point and window reads are)
is mapped by arithmetic alone (`Axis.one` and `Axis.run`): the same `Axis` as the general
mapping, without its sorting and searching of position arrays (tens of microseconds per axis
per read).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Axis", "normalize_selection"]


@dataclass(frozen=True, slots=True)
class Axis:
    """One dimension of a selection mapped onto the chunk grid.

    The regions are plain lists of ints, and slices are made when asked for: a selection of
    many chunks keeps no Python object per chunk alive (their churn triggers full garbage
    collections, tens of milliseconds each in a process holding xarray and an S3 client).

    Attributes
    ----------
    size
        Number of selected positions.
    chunk_ids
        The chunks that hold selected positions, ascending.
    step
        The distance between selected positions (1 or more).
    finish
        Applied to the assembled output: ``slice(None)``, ``slice(None, None, -1)`` for a
        negative step, or ``0`` for an integer index (the axis is dropped).
    tiles
        Per chunk of ``chunk_ids``: -1 unless the chunk is selected whole (regular grid, step
        1), else its number among those, which lie side by side in the output from
        ``tile_base`` on, ``chunk`` positions each (``tile_count`` of them).
    """

    size: int
    chunk_ids: np.ndarray[Any, np.dtype[np.int64]]
    step: int
    finish: slice | int
    tiles: np.ndarray[Any, np.dtype[np.int64]]
    tile_base: int
    tile_count: int
    chunk: int
    _at: dict[int, int]  # chunk id -> its place in the lists below
    _out_low: list[int]
    _out_high: list[int]
    _first: list[int]
    _last: list[int]

    @classmethod
    def of(
        cls,
        indices: np.ndarray[Any, np.dtype[np.int64]],
        step: int,
        chunk: int,
        finish: slice | int,
        bounds: np.ndarray[Any, np.dtype[np.int64]] | None = None,
    ) -> Axis:
        """The axis selecting ascending ``indices`` (spaced ``step``).

        The chunks are ``chunk`` long, or, when ``bounds`` is given, chunk ``i`` covers
        positions ``bounds[i]`` up to ``bounds[i + 1]`` (chunk starts, then the axis length).
        """
        if bounds is None:
            ids = np.unique(indices // chunk)
            starts = ids * chunk
            ends = starts + chunk
        else:
            ids = np.unique(np.searchsorted(bounds, indices, side="right") - 1)
            starts = bounds[ids]
            ends = bounds[ids + 1]
        lows = np.searchsorted(indices, starts)
        highs = np.searchsorted(indices, ends)
        first = indices[lows] - starts  # every chunk listed holds a selected position
        last = indices[highs - 1] - starts
        at = {chunk_id: place for place, chunk_id in enumerate(ids.tolist())}
        tiles = np.full(len(ids), -1, dtype=np.int64)
        whole = (first == 0) & (last == chunk - 1) if bounds is None and step == 1 else None
        base = 0
        if whole is not None and whole.any():  # the chunks selected whole are consecutive
            base = int(lows[whole][0])
            tiles[whole] = (lows[whole] - base) // chunk
        return cls(
            len(indices),
            ids,
            step,
            finish,
            tiles,
            base,
            int(np.count_nonzero(tiles >= 0)),
            chunk,
            at,
            lows.tolist(),
            highs.tolist(),
            first.tolist(),
            last.tolist(),
        )

    @classmethod
    def one(cls, index: int, chunk: int, finish: slice | int) -> Axis:
        """The axis selecting position ``index`` alone (``0 <= index``) of a regular axis:
        what `of` gives for ``[index]`` (step 1), by arithmetic (`run` of one position)."""
        return cls.run(index, index + 1, chunk, finish)

    @classmethod
    def run(cls, start: int, stop: int, chunk: int, finish: slice | int = slice(None)) -> Axis:
        """The axis selecting positions ``start .. stop - 1`` (``0 <= start < stop``) of a
        regular axis: what `of` gives for them (step 1), by arithmetic.

        Only the first and the last chunk can be selected in part; every chunk between is
        selected whole, so the tiles are those chunks counted from the first whole one.
        """
        low_id, high_id = start // chunk, (stop - 1) // chunk
        count = high_id - low_id + 1
        first = start - low_id * chunk
        last = stop - 1 - high_id * chunk
        head_whole = first == 0 and (count > 1 or last == chunk - 1)
        tail_whole = last == chunk - 1 and (count > 1 or first == 0)
        lows = [0, *range(low_id * chunk + chunk - start, stop - start, chunk)]
        highs = [*lows[1:], stop - start]
        firsts = [first, *([0] * (count - 1))]
        lasts = [*([chunk - 1] * (count - 1)), last]
        whole_from = 0 if head_whole else 1
        whole_to = count if tail_whole else count - 1  # chunks whole_from .. whole_to - 1
        tile_count = max(whole_to - whole_from, 0)
        tiles = np.full(count, -1, dtype=np.int64)
        tiles[whole_from : whole_from + tile_count] = np.arange(tile_count, dtype=np.int64)
        return cls(
            stop - start,
            np.arange(low_id, high_id + 1, dtype=np.int64),
            1,
            finish,
            tiles,
            lows[whole_from] if tile_count else 0,
            tile_count,
            chunk,
            dict(zip(range(low_id, high_id + 1), range(count), strict=True)),
            lows,
            highs,
            firsts,
            lasts,
        )

    def in_output(self, chunk_id: int) -> slice:
        """Where the selected positions of chunk ``chunk_id`` go in the output."""
        place = self._at[chunk_id]
        return slice(self._out_low[place], self._out_high[place])

    def in_chunk(self, chunk_id: int) -> slice:
        """Which positions of chunk ``chunk_id`` are selected."""
        place = self._at[chunk_id]
        return slice(self._first[place], self._last[place] + 1, self.step)


def normalize_selection(
    selection: Any,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    bounds: Sequence[np.ndarray[Any, np.dtype[np.int64]] | None] | None = None,
) -> list[Axis]:
    """One `Axis` per dimension of an array for a basic numpy selection.

    Parameters
    ----------
    selection
        Integers, slices of any step and at most one ``...``.
    shape, chunks
        The array's shape and chunk shape.
    bounds
        For a rectilinear grid, per axis: None where the axis is regular, else the chunk
        starts followed by the axis length (`ArrayMeta.chunk_bounds`). None: every axis
        is regular.

    Raises
    ------
    IndexError
        For indices out of range, too many indices, or advanced (array) indexing.
    """
    items = list(selection) if isinstance(selection, tuple) else [selection]
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at : at + 1] = [slice(None)] * (len(shape) - len(items) + 1)
    if len(items) > len(shape):
        raise IndexError(f"too many indices: {len(items)} for an array of {len(shape)} dims")
    items += [slice(None)] * (len(shape) - len(items))
    edges = bounds if bounds is not None else [None] * len(shape)
    return [_axis(item, n, c, b) for item, n, c, b in zip(items, shape, chunks, edges, strict=True)]


def _axis(
    item: Any, size: int, chunk: int, bounds: np.ndarray[Any, np.dtype[np.int64]] | None
) -> Axis:
    if isinstance(item, slice):
        start, stop, step = item.indices(size)
        if step == 1 and bounds is None and start < stop:
            return Axis.run(start, stop, chunk)
        if step > 0:
            selected = np.arange(start, stop, step, dtype=np.int64)
            return Axis.of(selected, step, chunk, slice(None), bounds)
        ascending = np.arange(start, stop, step, dtype=np.int64)[::-1].copy()
        return Axis.of(ascending, -step, chunk, slice(None, None, -1), bounds)
    try:
        index = operator.index(item)
    except TypeError:
        raise IndexError(
            f"only integers, slices and '...' select from a referenced array, not {item!r}"
        ) from None
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for an axis of size {size}")
    index %= size
    if bounds is None:
        return Axis.one(index, chunk, 0)
    return Axis.of(np.array([index], dtype=np.int64), 1, chunk, 0, bounds)
