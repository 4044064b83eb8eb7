"""Placing files on the grid of the combined dataset: each file's slab along every
concatenated dimension, found by sorting the files' coordinate values, with duplicates,
overlaps, holes and values out of order reported by file name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import IncompatibleError

__all__ = ["DimKeys", "Layout", "place_files"]

Describe = Callable[[Sequence[int]], str]


@dataclass(frozen=True)
class DimKeys:
    """Every file's coordinate values along one dimension.

    Parameters
    ----------
    dim
        The dimension's name.
    lengths
        Each file's length along it (1 for a new dimension).
    values
        All files' values, concatenated in input order (``lengths[k]`` values for file
        ``k``), or None to keep the input order (no coordinate values).
    """

    dim: str
    lengths: np.ndarray[Any, np.dtype[np.int64]]
    values: np.ndarray[Any, Any] | None


@dataclass(frozen=True)
class Layout:
    """The files on the combined grid.

    Parameters
    ----------
    shape
        Number of slabs along each dimension.
    ranks
        ``(files, dims)``: each file's slab along each dimension.
    cells
        The grid (``shape``) of file indices.
    values
        Per dimension, the combined coordinate values in slab order (None without values).
    """

    shape: tuple[int, ...]
    ranks: np.ndarray[Any, np.dtype[np.int64]]
    cells: np.ndarray[Any, np.dtype[np.int64]]
    values: tuple[np.ndarray[Any, Any] | None, ...]


def place_files(keys: Sequence[DimKeys], count: int, describe: Describe) -> Layout:
    """Each file's slab along every dimension; IncompatibleError names conflicting files."""
    positional = [k.dim for k in keys if k.values is None]
    if positional and len(keys) > 1:
        raise IncompatibleError(
            f"files on a grid of {[k.dim for k in keys]} need coordinate values along every "
            f"dimension to be placed, and {positional} have none: give coords for them (a "
            "regular expression on the URL, an attribute or a callable)"
        )
    ranks = np.zeros((count, len(keys)), dtype=np.int64)
    values: list[np.ndarray[Any, Any] | None] = []
    for d, key in enumerate(keys):
        if key.values is None:
            ranks[:, d] = np.arange(count)
            values.append(None)
            continue
        ranks[:, d], combined = _slabs(key, describe)
        values.append(combined)
    shape = tuple(int(ranks[:, d].max()) + 1 if count else 0 for d in range(len(keys)))
    cells = _cells(ranks, shape, keys, values, describe)
    return Layout(shape, ranks, cells, tuple(values))


def _slabs(key: DimKeys, describe: Describe) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Each file's slab rank along one dimension and the values in slab order."""
    values = key.values
    assert values is not None
    _reject_nan(values, key, describe)
    if (key.lengths == 1).all():  # one value per file: one vectorized sort
        try:
            unique, inverse = np.unique(values, return_inverse=True)
        except TypeError as exc:
            raise IncompatibleError(
                f"coordinate values along {key.dim!r} cannot be ordered: {exc}"
            ) from exc
        return inverse.reshape(-1).astype(np.int64), unique
    return _slabs_of_runs(key, values, describe)


def _slabs_of_runs(
    key: DimKeys, values: np.ndarray[Any, Any], describe: Describe
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Files holding several values each: slabs are the distinct runs, ordered by their
    first value (ascending, or descending when the files' values descend)."""
    starts = np.concatenate([[0], np.cumsum(key.lengths)])
    runs: dict[bytes, int] = {}
    members: list[int] = []  # one file per slab
    slab_of = np.empty(len(key.lengths), dtype=np.int64)
    for k in range(len(key.lengths)):
        run = values[starts[k] : starts[k + 1]]
        slab = runs.setdefault(run.tobytes() + str(run.size).encode(), len(runs))
        if slab == len(members):
            members.append(k)
        slab_of[k] = slab
    parts = [values[starts[k] : starts[k + 1]] for k in members]
    descending = _descending(parts)
    for k, part in zip(members, parts, strict=True):
        if not _monotonic(part, descending):
            raise IncompatibleError(
                f"the values along {key.dim!r} in {describe([k])} are not strictly "
                f"{'de' if descending else 'in'}creasing ({_few(part)}): a file's positions "
                "cannot be reordered; rewrite the file or combine along another dimension"
            )
    nonempty = [s for s, p in enumerate(parts) if p.size]
    firsts = np.array([parts[s][0] for s in nonempty])
    order = [nonempty[i] for i in np.argsort(firsts, kind="stable").tolist()]
    if descending:
        order.reverse()
    order += [s for s, p in enumerate(parts) if not p.size]
    rank = np.empty(len(parts), dtype=np.int64)
    rank[order] = np.arange(len(order))
    combined = np.concatenate([parts[s] for s in order])
    _check_boundaries(
        key, [parts[s] for s in order], [members[s] for s in order], descending, describe
    )
    return rank[slab_of], combined


def _descending(parts: list[np.ndarray[Any, Any]]) -> bool:
    for part in parts:
        if part.size >= 2 and part[0] != part[1]:
            return bool(part[1] < part[0])
    return False


def _monotonic(part: np.ndarray[Any, Any], descending: bool) -> bool:
    if part.size < 2:
        return True
    steps = part[1:] < part[:-1] if descending else part[1:] > part[:-1]
    return bool(np.all(steps))


def _check_boundaries(
    key: DimKeys,
    parts: list[np.ndarray[Any, Any]],
    files: list[int],
    descending: bool,
    describe: Describe,
) -> None:
    """Consecutive slabs must not overlap or share a value."""
    for j in range(1, len(parts)):
        before, after = parts[j - 1], parts[j]
        if not before.size or not after.size:
            continue
        ok = after[0] < before[-1] if descending else after[0] > before[-1]
        if ok:
            continue
        shared = np.intersect1d(before, after)
        what = (
            f"the same values ({_few(shared)})"
            if shared.size
            else f"overlapping ranges ({_few(before[[0, -1]])} and {_few(after[[0, -1]])})"
        )
        raise IncompatibleError(
            f"duplicate coordinate values along {key.dim!r}: {describe([files[j - 1]])} and "
            f"{describe([files[j]])} hold {what}; one of them would hide the other: leave "
            "the duplicate file out"
        )


def _cells(
    ranks: np.ndarray[Any, Any],
    shape: tuple[int, ...],
    keys: Sequence[DimKeys],
    values: Sequence[np.ndarray[Any, Any] | None],
    describe: Describe,
) -> np.ndarray[Any, Any]:
    """The grid of file indices: one file per cell, no cell empty."""
    count = ranks.shape[0]
    flat = np.ravel_multi_index(tuple(ranks.T), shape) if count else np.zeros(0, np.int64)
    cells = np.full(int(np.prod(shape)), -1, dtype=np.int64)
    order = np.argsort(flat, kind="stable")
    twice = np.flatnonzero(flat[order][1:] == flat[order][:-1])
    if twice.size:
        a, b = int(order[twice[0]]), int(order[twice[0] + 1])
        where = ", ".join(
            f"{k.dim}={_value_at(k, v, ranks[:, d], int(ranks[a, d]))}"
            for d, (k, v) in enumerate(zip(keys, values, strict=True))
        )
        raise IncompatibleError(
            f"duplicate coordinate values: {describe([a])} and {describe([b])} both hold "
            f"{where}; one would hide the other: leave the duplicate file out"
        )
    cells[flat] = np.arange(count)
    empty = np.flatnonzero(cells < 0)
    if empty.size:
        index = np.unravel_index(int(empty[0]), shape)
        where = ", ".join(
            f"{k.dim}={_value_at(k, v, ranks[:, d], int(i))}"
            for d, (k, v, i) in enumerate(zip(keys, values, index, strict=True))
        )
        raise IncompatibleError(
            f"the files do not fill a complete grid of {[k.dim for k in keys]} "
            f"({count} files for {int(np.prod(shape))} places): no file holds {where}; "
            "add the missing file or leave out the incomplete row"
        )
    return cells.reshape(shape)


def _value_at(
    key: DimKeys, values: np.ndarray[Any, Any] | None, ranks: np.ndarray[Any, Any], rank: int
) -> str:
    """The coordinate values of slab ``rank`` in words."""
    if values is None or key.values is None:
        return f"<position {rank}>"
    if (key.lengths == 1).all():
        return str(values[rank])
    file = int(np.flatnonzero(ranks == rank)[0])
    start = int(key.lengths[:file].sum())
    run = key.values[start : start + int(key.lengths[file])]
    if run.size == 1:
        return str(run[0])
    return f"{run[0]}..{run[-1]} ({run.size} values)"


def _reject_nan(values: np.ndarray[Any, Any], key: DimKeys, describe: Describe) -> None:
    if values.dtype.kind in "fcmM":
        bad = np.isnan(values)
        if bad.any():
            file = int(np.searchsorted(np.cumsum(key.lengths), np.flatnonzero(bad)[0], "right"))
            raise IncompatibleError(
                f"{describe([file])} has a missing (NaN/NaT) coordinate value along "
                f"{key.dim!r}: files cannot be placed by it"
            )


def _few(values: np.ndarray[Any, Any]) -> str:
    shown = ", ".join(str(v) for v in values[:3].tolist())
    return shown + (", ..." if values.size > 3 else "")
