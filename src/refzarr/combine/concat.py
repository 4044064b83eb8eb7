"""Concatenating the pieces of one variable (one per file, on a grid of files) into one
array: manifest columns concatenated, path ids remapped into one URL table, and the chunk
grid along each concatenated axis made regular when it is, rectilinear when it is not.

No per-chunk Python: the work is a few numpy calls per file, plus one per inlined chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.combine.checks import check_same, combined_fill
from refzarr.errors import IncompatibleError, RefFormatError
from refzarr.model import ArrayMeta, ChunkManifest, ManifestBlock, RectilinearAxis, RefArray

__all__ = ["Placement", "concat_arrays"]

Describe = Callable[[Sequence[int]], str]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the pieces of one variable go.

    Parameters
    ----------
    grid_shape
        Number of pieces along each concatenated dimension; the pieces are given in C order
        of this grid.
    axes
        For each grid dimension, the axis of the combined array it runs along.
    new_names
        Names of the new dimensions (stacking), which become the combined array's first
        axes in this order; the other axes keep the pieces' order after them.
    """

    grid_shape: tuple[int, ...]
    axes: tuple[int, ...]
    new_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Axis:
    """The combined chunking along one concatenated axis."""

    length: int
    chunk: int
    rect: RectilinearAxis | None
    starts: np.ndarray[Any, np.dtype[np.int64]]  # first chunk of each slab (grid + 1 values)


def concat_arrays(
    pieces: Sequence[RefArray], placement: Placement, describe: Describe, what: str
) -> RefArray:
    """One array from pieces laid out by ``placement``.

    ``describe(piece indices)`` names the files of pieces in errors; ``what`` the variable.

    Raises
    ------
    IncompatibleError
        When the pieces differ in dtype, codecs, CF packing attributes, dimension names,
        shape or chunking along an axis not concatenated, or fill value; or when pieces in
        one slab of the grid differ in length or chunking along the concatenated axis.
    """
    metas = [piece.meta for piece in pieces]
    first = metas[0]
    n_new = len(placement.new_names)
    if n_new and first.dimension_names is None:
        raise IncompatibleError(
            f"{what}: cannot stack along new dimensions {list(placement.new_names)}: the "
            f"array has no dimension names (in {describe([0])})"
        )
    concatenated = {a - n_new for a in placement.axes if a >= n_new}
    fixed = [a for a in range(first.ndim) if a not in concatenated]
    check_same(metas, fixed, describe, what)
    grid = np.arange(len(pieces)).reshape(placement.grid_shape)
    axes = [
        _new_axis(placement.grid_shape[g])
        if axis < n_new
        else _along(metas, grid, g, axis - n_new, describe, what)
        for g, axis in enumerate(placement.axes)
    ]
    meta = _meta(first, placement, axes, combined_fill(pieces, describe, what))
    manifest = _manifest(pieces, placement, axes, meta.grid_shape)
    return RefArray(meta, manifest)


def _new_axis(count: int) -> _Axis:
    return _Axis(count, 1, None, np.arange(count + 1, dtype=np.int64))


def _along(
    metas: Sequence[ArrayMeta],
    grid: np.ndarray[Any, Any],
    g: int,
    axis: int,
    describe: Describe,
    what: str,
) -> _Axis:
    """The chunking along ``axis`` of the slabs of grid dimension ``g``."""
    slabs = np.moveaxis(grid, g, 0).reshape(grid.shape[g], -1)
    if slabs.shape[1] > 1:
        _check_slabs(metas, slabs, axis, describe, what)
    chosen = [metas[int(k)] for k in slabs[:, 0]]
    lengths = np.array([m.shape[axis] for m in chosen], dtype=np.int64)
    chunks = np.array([m.chunks[axis] for m in chosen], dtype=np.int64)
    irregular = any(m.rectilinear is not None and m.rectilinear[axis] is not None for m in chosen)
    c = int(chunks[0])
    if not irregular and (chunks == c).all() and not (lengths[:-1] % c).any():
        counts = -(-lengths // c)
        return _Axis(int(lengths.sum()), c, None, _starts(counts))
    sizes: list[np.ndarray[Any, Any]] = []
    stored: list[np.ndarray[Any, Any]] = []
    for m in chosen:
        rect = None if m.rectilinear is None else m.rectilinear[axis]
        bounds = m.chunk_bounds(axis)
        sizes.append(np.diff(bounds))
        stored.append(
            np.asarray(rect.stored)
            if rect is not None
            else np.full(len(bounds) - 1, m.chunks[axis])
        )
    counts = np.array([len(s) for s in sizes], dtype=np.int64)
    all_stored = np.concatenate(stored).astype(np.int64)
    rect = RectilinearAxis(tuple(np.concatenate(sizes).tolist()), tuple(all_stored.tolist()))
    chunk = int(all_stored.max()) if all_stored.size else c
    return _Axis(int(lengths.sum()), chunk, rect, _starts(counts))


def _starts(counts: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.int64]]:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _check_slabs(
    metas: Sequence[ArrayMeta],
    slabs: np.ndarray[Any, Any],
    axis: int,
    describe: Describe,
    what: str,
) -> None:
    """Pieces side by side in one slab must agree on length and chunking along ``axis``."""
    for row in slabs:
        first = metas[int(row[0])]
        want = (first.shape[axis], tuple(first.chunk_bounds(axis)), first.chunks[axis])
        for k in row[1:].tolist():
            m = metas[k]
            if (m.shape[axis], tuple(m.chunk_bounds(axis)), m.chunks[axis]) != want:
                raise IncompatibleError(
                    f"{what}: {describe([int(row[0])])} and {describe([k])} hold the same "
                    f"coordinate values but differ in length or chunking along axis {axis} "
                    f"({first.shape[axis]} in chunks of {first.chunks[axis]} vs "
                    f"{m.shape[axis]} in chunks of {m.chunks[axis]}): files side by side on "
                    "the grid must be chunked alike"
                )


def _meta(first: ArrayMeta, placement: Placement, axes: list[_Axis], fill: Any) -> ArrayMeta:
    n_new = len(placement.new_names)
    shape = [1] * n_new + list(first.shape)
    chunks = [1] * n_new + list(first.chunks)
    own: Sequence[RectilinearAxis | None] = first.rectilinear or [None] * first.ndim
    rect: list[RectilinearAxis | None] = [None] * n_new
    rect.extend(own)
    for axis, info in zip(placement.axes, axes, strict=True):
        shape[axis], chunks[axis], rect[axis] = info.length, info.chunk, info.rect
    names = first.dimension_names
    return first.replace(
        shape=tuple(shape),
        chunks=tuple(chunks),
        rectilinear=tuple(rect) if any(r is not None for r in rect) else None,
        fill_value=fill,
        dimension_names=None if names is None else placement.new_names + names,
    )


def _manifest(
    pieces: Sequence[RefArray],
    placement: Placement,
    axes: list[_Axis],
    grid_shape: tuple[int, ...],
) -> ChunkManifest:
    manifests = [piece.manifest for piece in pieces]
    if any(m.sparse for m in manifests):  # mostly unwritten grids: never their whole columns
        return _written_manifest(manifests, placement, axes, grid_shape)
    blocks = [_flat(m) for m in manifests]
    counts = np.fromiter((b.path_id.shape[0] for b in blocks), np.int64, len(blocks))
    paths, path_id = _path_ids(blocks, counts)
    offset = np.concatenate([b.offset for b in blocks])
    length = np.concatenate([b.length for b in blocks])
    columns = [_arrange(c, manifests, placement, counts) for c in (path_id, offset, length)]
    for column in columns:
        if column.shape != grid_shape:  # the pieces' chunk grids do not tile the result
            raise IncompatibleError(
                f"the pieces' chunk grids do not tile the combined grid {grid_shape}"
            )
    inlined = _inlined(manifests, blocks, placement, axes, grid_shape)
    path_ids, offsets, lengths = (column.reshape(-1) for column in columns)
    block = ManifestBlock(0, paths, path_ids, offsets, lengths, inlined)
    return ChunkManifest.from_block(grid_shape, block)


def _written_manifest(
    manifests: Sequence[ChunkManifest],
    placement: Placement,
    axes: list[_Axis],
    grid_shape: tuple[int, ...],
) -> ChunkManifest:
    """The combined manifest from the pieces' written entries only: the cost is what they
    hold, and the result is sparse again when it is mostly unwritten."""
    table: dict[str, int] = {}
    coords, ids, offsets, lengths = [], [], [], []
    inlined: dict[tuple[int, ...], bytes] = {}
    for k, manifest in enumerate(manifests):
        shift = _shift(manifest, k, placement, axes)
        written = manifest.written_entries()
        referenced = written.path_id >= 0
        remap = np.array([table.setdefault(u, len(table)) for u in written.paths], np.int64)
        coords.append(_indices(written.numbers[referenced], manifest, shift))
        ids.append(remap[written.path_id[referenced]])
        offsets.append(written.offset[referenced])
        lengths.append(written.length[referenced])
        lead = (0,) * (shift.size - len(manifest.grid_shape))  # new (stacking) axes
        for index, data in manifest.inlined.items():
            at = zip(lead + index, shift.tolist(), strict=True)
            inlined[tuple(i + s for i, s in at)] = data
    try:
        return ChunkManifest.from_entries(
            grid_shape,
            np.concatenate(coords),
            list(table),
            np.concatenate(ids),
            np.concatenate(offsets),
            np.concatenate(lengths),
            inlined,
            where="combined",
        )
    except RefFormatError as exc:  # a piece's chunk outside the combined grid
        raise IncompatibleError(
            f"the pieces' chunk grids do not tile the combined grid {grid_shape}: {exc}"
        ) from None


def _shift(
    manifest: ChunkManifest, k: int, placement: Placement, axes: list[_Axis]
) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Where piece ``k``'s chunk (0, ...) lies in the combined grid."""
    n_new = len(placement.new_names)
    cell = np.unravel_index(k, placement.grid_shape)
    shift = np.zeros(n_new + len(manifest.grid_shape), dtype=np.int64)
    for g, axis in enumerate(placement.axes):
        shift[axis] = int(axes[g].starts[int(cell[g])])
    return shift


def _indices(
    numbers: np.ndarray[Any, Any], manifest: ChunkManifest, shift: np.ndarray[Any, Any]
) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Chunk numbers of a piece as indices into the combined grid."""
    grid = manifest.grid_shape
    index = np.zeros((numbers.size, shift.size), dtype=np.int64)
    if grid:
        index[:, shift.size - len(grid) :] = np.stack(np.unravel_index(numbers, grid), axis=1)
    index += shift
    return index


def _path_ids(
    blocks: Sequence[ManifestBlock], counts: np.ndarray[Any, Any]
) -> tuple[tuple[str, ...], np.ndarray[Any, np.dtype[np.int32]]]:
    """One URL table for every piece, and the pieces' path ids (in piece order) into it."""
    table: dict[str, int] = {}
    remaps = [[table.setdefault(url, len(table)) for url in b.paths] for b in blocks]
    ids = np.concatenate([b.path_id for b in blocks])
    if all(len(remap) <= 1 for remap in remaps):  # one file per piece: the usual case
        # a piece's ids are then 0 (its file), MISSING or INLINED; with no file only the latter
        files = np.array([remap[0] if remap else 0 for remap in remaps], dtype=np.int32)
        out = np.repeat(files, counts)
        if ids.size and ids.min() < 0:
            np.copyto(out, ids, where=ids < 0)
        return tuple(table), out
    bases = _starts(np.array([len(remap) for remap in remaps], dtype=np.int64))
    shifted = ids + np.repeat(bases[:-1], counts)
    # shifted ids of MISSING / INLINED entries may be -1 or -2: the two padding entries
    lookup = np.array([*(i for remap in remaps for i in remap), 0, 0], dtype=np.int32)
    return tuple(table), np.where(ids >= 0, lookup[shifted], ids).astype(np.int32)


def _flat(manifest: ChunkManifest) -> ManifestBlock:
    """All of a manifest's entries as one block (its own block when it has one)."""
    if manifest.nblocks == 1:
        return manifest.block(0)
    return ManifestBlock(
        0,
        manifest.paths,
        manifest.path_id.ravel(),
        manifest.offset.ravel(),
        manifest.length.ravel(),
        {n: b for block in manifest.iter_blocks() for n, b in block.inlined.items()},
    )


def _arrange(
    column: np.ndarray[Any, Any],
    manifests: Sequence[ChunkManifest],
    placement: Placement,
    counts: np.ndarray[Any, Any],
) -> np.ndarray[Any, Any]:
    """The flat per-piece columns placed into the combined chunk grid."""
    n_new = len(placement.new_names)
    lead = (1,) * n_new
    if placement.axes == (0,):  # one axis, the outermost: C order is piece order
        tail = manifests[0].grid_shape[1 - n_new :] if manifests[0].grid_shape else ()
        # rows counted, not -1: a grid with no chunks along another axis has no -1 to infer
        rows = len(manifests) if n_new else sum(m.grid_shape[0] for m in manifests)
        return column.reshape((rows, *tail))
    parts = np.split(column, np.cumsum(counts)[:-1])
    blocks = [p.reshape(lead + m.grid_shape) for p, m in zip(parts, manifests, strict=True)]
    cells = np.empty(len(blocks), dtype=object)
    for k, block in enumerate(blocks):  # one by one: numpy would broadcast a list of arrays
        cells[k] = block
    return _join(cells.reshape(placement.grid_shape), placement.axes)


def _join(cells: np.ndarray[Any, Any], axes: tuple[int, ...]) -> np.ndarray[Any, Any]:
    if not axes:  # an element of the object grid: one piece's block
        return cells
    parts = [_join(cells[k], axes[1:]) for k in range(cells.shape[0])]
    return np.concatenate(parts, axis=axes[0])


def _inlined(
    manifests: Sequence[ChunkManifest],
    blocks: Sequence[ManifestBlock],
    placement: Placement,
    axes: list[_Axis],
    grid_shape: tuple[int, ...],
) -> dict[int, bytes]:
    """Every piece's inlined chunks, by their chunk number (C order) in the combined grid."""
    n_new = len(placement.new_names)
    out: dict[int, bytes] = {}
    cells = np.unravel_index(np.arange(len(manifests)), placement.grid_shape)
    for k, (manifest, block) in enumerate(zip(manifests, blocks, strict=True)):
        if not block.inlined:
            continue
        grid = manifest.grid_shape
        shift = np.zeros(n_new + len(grid), dtype=np.int64)
        for g, axis in enumerate(placement.axes):
            shift[axis] = int(axes[g].starts[int(cells[g][k])])
        numbers = np.fromiter(block.inlined, dtype=np.int64, count=len(block.inlined))
        index = np.zeros((numbers.size, n_new + len(grid)), dtype=np.int64)
        if grid:
            index[:, n_new:] = np.stack(np.unravel_index(numbers, grid), axis=1)
        at = np.ravel_multi_index(tuple((index + shift).T), grid_shape)  # never 0-d: concatenated
        out.update(zip(at.tolist(), block.inlined.values(), strict=True))
    return out
