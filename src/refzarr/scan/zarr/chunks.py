"""An array's chunk manifest from the store's listing: its chunk keys parsed into chunk indices,
each chunk referenced whole (offset 0, the listed size); unlisted chunks are missing."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.model import ChunkManifest
from refzarr.model.manifest import MAX_CHUNKS
from refzarr.scan.zarr.listing import StoreListing

__all__ = ["ChunkKeys", "SizeRule", "chunk_manifest"]


@dataclass(frozen=True, slots=True)
class ChunkKeys:
    """How an array names its chunks below its own path.

    Parameters
    ----------
    separator
        Between the parts of a chunk index (``"."`` or ``"/"``).
    prefix
        ``True`` for Zarr v3's ``default`` encoding (``c/0/1``, ``c`` for a 0-d array), False
        for Zarr v2 keys (``0.1``, ``0`` for a 0-d array).
    """

    separator: str
    prefix: bool

    def parse(
        self, keys: Sequence[str], ndim: int
    ) -> tuple[np.ndarray[Any, np.dtype[np.int64]], np.ndarray[Any, np.dtype[np.int64]]]:
        """The positions in ``keys`` of chunk keys, and their chunk indices (one row each);
        other keys, such as metadata documents, are left out. Vectorised: a store's array
        may have millions of chunks."""
        if ndim == 0:
            scalar = "c" if self.prefix else "0"
            found = np.asarray([k == scalar for k in keys], dtype=bool)
            positions = np.flatnonzero(found)
            return positions, np.zeros((positions.size, 0), dtype=np.int64)
        head = f"c{self.separator}" if self.prefix else ""
        candidates = np.asarray([k.startswith(head) and k[:1] != "." for k in keys], dtype=bool)
        positions = np.flatnonzero(candidates)
        bodies = [keys[k][len(head) :] for k in positions.tolist()]
        if not bodies:
            return positions, np.zeros((0, ndim), dtype=np.int64)
        text = np.asarray(bodies, dtype=str)
        sep = self.separator
        valid = (
            (np.strings.count(text, sep) == ndim - 1)
            & np.strings.isdecimal(np.strings.replace(text, sep, ""))
            & ~np.strings.startswith(text, sep)
            & ~np.strings.endswith(text, sep)
            & (np.strings.find(text, sep + sep) < 0)
        )
        chosen = [b for b, ok in zip(bodies, valid.tolist(), strict=True) if ok]
        parts = np.asarray(sep.join(chosen).split(sep) if chosen else [], dtype=str)
        try:
            flat = parts.astype(np.int64)
        except (ValueError, OverflowError):  # an index past int64: outside any grid
            flat = np.asarray([min(int(p), 2**62) for p in parts.tolist()], dtype=np.int64)
        indices = flat.reshape(len(chosen), ndim)
        return positions[valid], indices


@dataclass(frozen=True, slots=True)
class SizeRule:
    """What a stored chunk's size must be, as far as the codecs tell.

    Parameters
    ----------
    exact
        The only possible size (uncompressed chunks), or None when the codecs compress.
    minimum
        The least possible size (a shard's index; 1 otherwise: no codec stores 0 bytes).
    """

    exact: int | None = None
    minimum: int = 1


def chunk_manifest(
    listing: StoreListing,
    path: str,
    grid: tuple[int, ...],
    keys: ChunkKeys,
    rule: SizeRule,
    inline_threshold: int,
    where: str,
) -> ChunkManifest:
    """The manifest of the array at ``path`` from the store's listing.

    Chunk keys outside the grid (left by a resize) are ignored, as zarr does.

    Raises
    ------
    ScanError
        When a chunk's size cannot be right for the array's codecs (names the key).
    """
    if math.prod(grid) > MAX_CHUNKS:  # before any column is built from the grid
        raise UnsupportedFeatureError(
            f"{where}: its shape and chunks make a grid of {grid} chunks, more than a reference "
            f"set can number ({MAX_CHUNKS:,} = 2**62); its metadata may be damaged"
        )
    names, sizes = listing.under(path)
    positions, indices = keys.parse(names, len(grid))
    inside = (indices < np.asarray(grid, dtype=np.int64)).all(axis=1)
    chosen, coords = positions[inside], indices[inside]
    chunk_sizes = sizes[chosen] if chosen.size else np.zeros(0, dtype=np.uint64)
    chunk_names = [names[k] for k in chosen.tolist()]
    _check_sizes(chunk_names, chunk_sizes, rule, path, where)
    small = chunk_sizes < inline_threshold
    inlined = _inlined(listing, path, chunk_names, coords, small)
    keep = ~small
    urls = listing.urls_of([_join(path, n) for n, k in zip(chunk_names, keep, strict=True) if k])
    return ChunkManifest.from_entries(
        grid,
        coords[keep],
        urls,
        np.arange(len(urls)),
        np.zeros(len(urls), dtype=np.uint64),
        chunk_sizes[keep],
        inlined,
        where=where,
    )


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def _check_sizes(
    names: list[str],
    sizes: np.ndarray[Any, np.dtype[np.uint64]],
    rule: SizeRule,
    path: str,
    where: str,
) -> None:
    if rule.exact is not None:
        wrong = np.flatnonzero(sizes != rule.exact)
        expected = f"an uncompressed chunk is exactly {rule.exact} bytes"
    else:
        wrong = np.flatnonzero(sizes < rule.minimum)
        expected = f"a stored chunk holds at least {rule.minimum} bytes"
    if wrong.size:
        k = int(wrong[0])
        raise ScanError(
            f"{where}: chunk {_join(path, names[k])!r} is {int(sizes[k])} bytes, but {expected} "
            f"for its codecs ({wrong.size} chunk(s) of a wrong size; damaged or partly written "
            "store?)"
        )


def _inlined(
    listing: StoreListing,
    path: str,
    names: list[str],
    coords: np.ndarray[Any, np.dtype[np.int64]],
    small: np.ndarray[Any, np.dtype[np.bool_]],
) -> dict[tuple[int, ...], bytes]:
    chosen = np.flatnonzero(small).tolist()
    if not chosen:
        return {}
    data = listing.read([_join(path, names[k]) for k in chosen])
    return {tuple(coords[k].tolist()): d for k, d in zip(chosen, data, strict=True)}
