"""An array's chunk manifest from the store's listing: its chunk keys parsed into chunk indices,
each chunk referenced whole (offset 0, the listed size); unlisted chunks are missing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import ScanError
from refzarr.model import ChunkManifest
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

    def parse(self, keys: Sequence[str], ndim: int) -> tuple[list[int], list[tuple[int, ...]]]:
        """The positions in ``keys`` of chunk keys, and their chunk indices (other keys,
        such as metadata documents, are left out)."""
        positions: list[int] = []
        indices: list[tuple[int, ...]] = []
        head = f"c{self.separator}" if self.prefix else ""
        scalar = "c" if self.prefix else "0"
        for k, key in enumerate(keys):
            if ndim == 0:
                if key == scalar:
                    positions.append(k)
                    indices.append(())
                continue
            if not key.startswith(head):
                continue
            parts = key[len(head) :].split(self.separator)
            if len(parts) == ndim and all(p.isdigit() and p.isascii() for p in parts):
                positions.append(k)
                indices.append(tuple(int(p) for p in parts))
        return positions, indices


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
    names, sizes = listing.under(path)
    positions, indices = keys.parse(names, len(grid))
    inside = [k for k, index in enumerate(indices) if _within(index, grid)]
    chosen = np.asarray([positions[k] for k in inside], dtype=np.int64)
    coords = np.asarray([indices[k] for k in inside], dtype=np.int64).reshape(
        len(inside), len(grid)
    )
    chunk_sizes = sizes[chosen] if chosen.size else np.zeros(0, dtype=np.uint64)
    chunk_names = [names[k] for k in chosen.tolist()]
    _check_sizes(chunk_names, chunk_sizes, rule, path, where)
    small = chunk_sizes < inline_threshold
    inlined = _inlined(listing, path, chunk_names, coords, small)
    keep = ~small
    urls = [listing.url_of(_join(path, n)) for n, k in zip(chunk_names, keep, strict=True) if k]
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


def _within(index: tuple[int, ...], grid: tuple[int, ...]) -> bool:
    return all(i < n for i, n in zip(index, grid, strict=True))


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
