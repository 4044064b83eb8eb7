"""Chunk grids whose chunks differ in length along an axis (rectilinear), as combine makes them.

Concatenating files whose length along the concat axis is not a multiple of their chunk
length, or whose chunk lengths differ, gives an axis whose chunks are not all alike. Each
chunk along such an axis has two lengths: ``sizes`` (how many positions of the array it
holds) and ``stored`` (the length it was encoded with: HDF5 pads a file's edge chunk to the
full chunk length, so a decoded chunk may be longer than the data it holds; its first
``sizes[i]`` positions are the data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import RefFormatError
from refzarr.model.pickling import tuple_state

__all__ = ["RectilinearAxis", "regular_bounds"]


@tuple_state
@dataclass(frozen=True, slots=True)
class RectilinearAxis:
    """The chunks along one axis of an irregular chunk grid.

    Parameters
    ----------
    sizes
        Number of array positions each chunk holds, in order (each at least 1).
    stored
        The length each chunk was encoded with along this axis (at least its size): a
        decoded chunk has this length, and its first ``sizes[i]`` positions are data.
    """

    sizes: tuple[int, ...]
    stored: tuple[int, ...]

    def __post_init__(self) -> None:
        sizes, stored = _ints(self.sizes, "sizes"), _ints(self.stored, "stored")
        if len(sizes) != len(stored):
            raise RefFormatError(
                f"a rectilinear axis needs one stored length per chunk: {len(sizes)} sizes, "
                f"{len(stored)} stored lengths"
            )
        bad = [k for k, (n, s) in enumerate(zip(sizes, stored, strict=True)) if not 1 <= n <= s]
        if bad:
            k = bad[0]
            raise RefFormatError(
                f"chunk {k} of a rectilinear axis holds {sizes[k]} positions but is stored "
                f"with length {stored[k]}: sizes must be at least 1 and at most the stored length"
            )
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "stored", stored)

    @property
    def length(self) -> int:
        """The array's length along this axis (the sum of the chunk sizes)."""
        return sum(self.sizes)

    def bounds(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Where each chunk starts, and the axis length last (``len(sizes) + 1`` values)."""
        out = np.zeros(len(self.sizes) + 1, dtype=np.int64)
        np.cumsum(self.sizes, out=out[1:])
        return out

    def is_regular(self, chunk: int) -> bool:
        """Whether this axis is a regular grid of ``chunk``-long chunks (edge chunk last)."""
        if any(s != chunk for s in self.stored):
            return False
        return all(n == chunk for n in self.sizes[:-1])


def regular_bounds(length: int, chunk: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Chunk starts of a regular axis of ``length`` in chunks of ``chunk``, then ``length``."""
    starts = np.arange(0, length, chunk, dtype=np.int64)
    return np.append(starts, np.int64(length))


def _ints(values: Sequence[int], name: str) -> tuple[int, ...]:
    if isinstance(values, str | bytes):
        raise RefFormatError(f"rectilinear {name} must be integers, got {values!r}")
    try:
        items = tuple(values)
    except TypeError as exc:
        raise RefFormatError(f"rectilinear {name} must be a sequence of integers: {exc}") from exc
    # int() would truncate 2.5 to 2 in silence; booleans are ints to Python but not lengths
    bad = [v for v in items if isinstance(v, bool) or not isinstance(v, int | np.integer)]
    if bad:
        raise RefFormatError(f"rectilinear {name} must be integers, got {bad[0]!r}")
    return tuple(int(v) for v in items)
