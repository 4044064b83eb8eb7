"""Planning an append to a Parquet reference set without reading its manifests.

`refzarr.combine` runs twice, on small stand-ins of the existing set: once on the coordinate
along the dimension (and its CF bounds) in full, which checks duplicate, overlapping and
unordered values exactly as combining everything would; once on the whole hierarchy with every
other array along the dimension cut to its last chunks (as many positions as the least common
multiple of their chunk lengths along it; a placeholder manifest marks the last chunk), which
runs every other check (dtypes, codecs, fill values, CF packing, chunking, dimension names,
variables expected identical, read in full). The placeholder shows where the existing data
landed: only when it comes first (an append at the end) is the plan made; then each growing
array's new chunks follow its existing ones in C order, so only its last record file and new
ones change.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refzarr.combine import combine
from refzarr.combine.coordinate import inlined_array
from refzarr.combine.keys import find_array
from refzarr.combine.values import read_values
from refzarr.formats.parquet.tables import joined_entries
from refzarr.model import (
    MISSING,
    ChunkManifest,
    ChunkRef,
    ManifestBlock,
    RefArray,
    RefGroup,
)
from refzarr.model.frozen import thaw_json

__all__ = ["PLACEHOLDER", "AppendPlan", "NotFast", "plan_append"]

PLACEHOLDER = "refzarr-append-placeholder://existing-set"
"""The URL the stand-in of an existing array's last chunk refers to (never written)."""


class NotFast(Exception):
    """The append cannot be made by writing new record files only; the message says why."""


@dataclass(frozen=True)
class AppendPlan:
    """What an append writes.

    Parameters
    ----------
    group
        The combined hierarchy (growing arrays' manifests load the existing record files
        before ``grown[path]`` lazily and build the rest from the new data).
    grown
        Growing array path -> its first record file written (earlier ones stay as they are).
    rewritten
        Arrays whose record files are all written (the coordinate along the dimension and
        its bounds, read in full for the checks anyway).
    appended
        Growing array path -> the source of its manifest's blocks.
    """

    group: RefGroup
    grown: dict[str, int]
    rewritten: tuple[str, ...]
    appended: dict[str, AppendedSource] = field(default_factory=dict)


def plan_append(
    existing: RefGroup,
    new: RefGroup,
    dim: str,
    *,
    record_size: int,
    urls: Sequence[str],
    storage_options: Mapping[str, Any] | None,
) -> AppendPlan:
    """Check ``new`` against ``existing`` as combine would and plan the files to write.

    ``existing``'s manifests must be lazy with blocks of ``record_size`` entries (a Parquet
    set read by `read_parquet`); only the coordinate along ``dim`` (and its bounds) and the
    arrays without ``dim`` (compared with ``new``'s) are read.

    Raises
    ------
    NotFast
        When the append is not one of new record files at the end (the message says why).
    IncompatibleError
        As combine raises it (the caller then combines everything to report it exactly).
    """
    _same_structure(existing, new)
    coordinate = find_array(existing, dim)
    whole = _whole_arrays(existing, coordinate)
    growing = _growing(existing, dim, whole)
    length = _length(existing, growing, coordinate, dim)
    tail = math.lcm(*(_array(existing, p).meta.chunks[0] for p in growing))
    parts = {path: _stand_in(_array(existing, path), tail) for path in growing}
    combined_whole = None
    if coordinate is not None:
        parts[coordinate] = _coordinate_tail(existing, coordinate, tail, urls, storage_options)
        pair = [_only(existing, whole), _only(new, whole)]
        combined_whole = combine(
            pair, concat_dims=[dim], urls=urls, storage_options=storage_options
        )
    leftover = [p for p in whole if p != coordinate]
    pair = [_rebuilt(existing, parts, leftover), _rebuilt(new, {}, leftover)]
    combined = combine(pair, concat_dims=[dim], urls=urls, storage_options=storage_options)
    arrays: dict[str, RefArray] = {}
    grown: dict[str, int] = {}
    appended: dict[str, AppendedSource] = {}
    for path in growing:
        appended[path] = _grown(existing, combined, path, tail, record_size)
        arrays[path] = _appended(appended[path], _array(combined, path), length, tail)
        grown[path] = appended[path].old // record_size
    for path, array in existing.arrays():
        if path not in growing and path not in whole:
            _unchanged(combined, path, array)
    if combined_whole is not None:
        arrays.update(_regular(combined_whole))
    final = _assembled(existing, combined, arrays, "")
    return AppendPlan(_with_sources(final, combined), grown, tuple(whole), appended)


def _array(group: RefGroup, path: str) -> RefArray:
    node = group[path]
    assert isinstance(node, RefArray)
    return node


# -- what the existing set holds ------------------------------------------------------------


def _same_structure(existing: RefGroup, new: RefGroup) -> None:
    def shape(group: RefGroup) -> tuple[set[str], set[str]]:
        return {p for p, _ in group.arrays()}, {p for p, _ in group.groups()}

    if shape(existing) != shape(new):
        raise NotFast("the new data holds other variables or groups than the existing set")


def _whole_arrays(existing: RefGroup, coordinate: str | None) -> list[str]:
    """The coordinate along the dimension and its CF bounds (read and rewritten whole)."""
    if coordinate is None:
        return []
    out = [coordinate]
    bounds = _array(existing, coordinate).meta.attributes.get("bounds")
    if isinstance(bounds, str) and bounds:
        prefix = coordinate.rpartition("/")[0]
        path = f"{prefix}/{bounds}" if prefix else bounds
        if path in existing and isinstance(existing[path], RefArray) and path != coordinate:
            out.append(path)
    return out


def _growing(existing: RefGroup, dim: str, whole: list[str]) -> list[str]:
    """The arrays along ``dim`` (other than ``whole``): ``dim`` leading, grids regular."""
    out = []
    for path, array in existing.arrays():
        names = array.meta.dimension_names or ()
        if path in whole or dim not in names:
            continue
        if names[0] != dim:
            raise NotFast(f"{dim!r} is not the leading dimension of {path!r} {names}")
        if not array.meta.is_regular:
            raise NotFast(f"array {path!r} has an irregular chunk grid")
        if not array.manifest.nchunks:
            raise NotFast(f"array {path!r} has no chunks")
        out.append(path)
    if not out:
        raise NotFast(f"no array besides its coordinate lies along {dim!r}")
    return out


def _length(existing: RefGroup, growing: list[str], coordinate: str | None, dim: str) -> int:
    lengths = {_array(existing, p).meta.shape[0] for p in growing}
    if coordinate is not None:
        lengths.add(_array(existing, coordinate).meta.shape[0])
    if len(lengths) != 1:
        raise NotFast(f"the existing set's arrays disagree on the length of {dim!r}")
    (length,) = lengths
    for path in growing:
        chunk = _array(existing, path).meta.chunks[0]
        if length % chunk:
            raise NotFast(
                f"the existing set's last chunk of {path!r} along {dim!r} is partial "
                f"({length} is no multiple of {chunk})"
            )
    return int(length)


# -- the stand-ins ------------------------------------------------------------------------


def _stand_in(array: RefArray, tail: int) -> RefArray:
    """``array`` cut to its last ``tail`` positions, every chunk missing but the last, which
    refers to `PLACEHOLDER` (to find where the existing data lands)."""
    meta = array.meta.replace(shape=(tail, *array.meta.shape[1:]))
    grid = meta.grid_shape
    ids = np.full(grid, MISSING, dtype=np.int32)
    lengths = np.zeros(grid, dtype=np.uint64)
    ids.flat[-1] = 0
    lengths.flat[-1] = 1
    return RefArray(meta, ChunkManifest.from_arrays([PLACEHOLDER], ids, lengths * 0, lengths))


def _coordinate_tail(
    existing: RefGroup,
    path: str,
    tail: int,
    urls: Sequence[str],
    storage_options: Mapping[str, Any] | None,
) -> RefArray:
    """The existing coordinate's last ``tail`` values (read), inlined, its metadata kept."""
    node = _array(existing, path)
    (values,) = read_values([node], lambda _: f"{urls[0]}: {path}", storage_options)
    meta = node.meta
    names = meta.dimension_names or ()
    return inlined_array(np.asarray(values)[-tail:], names, thaw_json(meta.attributes), meta)


def _only(group: RefGroup, paths: Sequence[str]) -> RefGroup:
    """``group`` holding only the arrays at ``paths`` (and the groups leading to them)."""
    return _pruned(group, set(paths), "", keep=True)


def _rebuilt(group: RefGroup, parts: Mapping[str, RefArray], dropped: Sequence[str]) -> RefGroup:
    """``group`` with the arrays at ``parts`` replaced and those at ``dropped`` left out."""
    return _pruned(group, set(dropped), "", keep=False, parts=parts)


def _pruned(
    group: RefGroup,
    chosen: set[str],
    prefix: str,
    *,
    keep: bool,
    parts: Mapping[str, RefArray] | None = None,
) -> RefGroup:
    members: dict[str, RefArray | RefGroup] = {}
    for name, member in group.members.items():
        path = f"{prefix}{name}"
        if isinstance(member, RefGroup):
            inner = _pruned(member, chosen, f"{path}/", keep=keep, parts=parts)
            if inner.members or not keep:
                members[name] = inner
        elif (path in chosen) == keep:
            members[name] = (parts or {}).get(path, member)
    return RefGroup(group.attributes, members, sources=group.sources if not prefix else None)


# -- the result ---------------------------------------------------------------------------


def _grown(
    existing: RefGroup,
    combined: RefGroup,
    path: str,
    tail: int,
    record_size: int,
) -> AppendedSource:
    """The source of the appended array at ``path``'s manifest (lazy: existing record
    files, then new entries)."""
    old, joined = _array(existing, path), _array(combined, path)
    meta = joined.meta
    if not meta.is_regular or meta.chunks != old.meta.chunks:
        raise NotFast(f"array {path!r} would not keep its chunking (irregular grid)")
    rows = math.prod(old.meta.grid_shape[1:])
    tail_chunks = tail // old.meta.chunks[0] * rows
    mark = joined.manifest[
        tuple(int(i) for i in np.unravel_index(tail_chunks - 1, meta.grid_shape))
    ]
    if not (isinstance(mark, ChunkRef) and mark.url == PLACEHOLDER):
        raise NotFast("the new data does not follow the existing set along the dimension")
    old_chunks = old.manifest.nchunks
    return AppendedSource(old.manifest, joined.manifest, old_chunks, tail_chunks, record_size)


def _appended(source: AppendedSource, joined: RefArray, length: int, tail: int) -> RefArray:
    """The appended array (``length`` positions before, ``joined``'s after its first
    ``tail``), its manifest loading from ``source``."""
    meta = joined.meta
    final = meta.replace(shape=(length + meta.shape[0] - tail, *meta.shape[1:]))
    return RefArray(final, ChunkManifest.lazy(final.grid_shape, source))


def _regular(combined: RefGroup) -> Iterator[tuple[str, RefArray]]:
    """The combined coordinate and bounds, whose grids Parquet must be able to express."""
    for path, array in combined.arrays():
        if not array.meta.is_regular:
            raise NotFast(f"array {path!r} would have an irregular chunk grid")
        yield path, array


def _unchanged(combined: RefGroup, path: str, array: RefArray) -> None:
    """Arrays without the dimension come out of combine as the existing set's own."""
    node = combined[path]
    if not isinstance(node, RefArray) or node.meta != array.meta:
        raise NotFast(f"array {path!r} would change")


def _assembled(
    existing: RefGroup, combined: RefGroup, arrays: Mapping[str, RefArray], prefix: str
) -> RefGroup:
    """The existing set's hierarchy (member order kept), groups' attributes from combine."""
    node = combined[prefix.rstrip("/")] if prefix else combined
    assert isinstance(node, RefGroup)
    members: dict[str, RefArray | RefGroup] = {}
    for name, member in existing.members.items():
        path = f"{prefix}{name}"
        if isinstance(member, RefGroup):
            members[name] = _assembled(member, combined, arrays, f"{path}/")
        else:
            members[name] = arrays.get(path, member)
    return RefGroup(node.attributes, members)


def _with_sources(group: RefGroup, combined: RefGroup) -> RefGroup:
    return RefGroup(group.attributes, group.members, sources=combined.sources)


# -- manifests of appended arrays -----------------------------------------------------------


class AppendedSource:
    """Manifest blocks of an appended array: the existing set's record files before its
    ``old`` chunks end, the combined stand-in's entries from chunk ``tail`` on after them.

    Blocks are records of ``record_size`` chunks, like the existing manifest's."""

    def __init__(
        self,
        existing: ChunkManifest,
        joined: ChunkManifest,
        old: int,
        tail: int,
        record_size: int,
    ) -> None:
        self._existing = existing
        self._joined = joined
        self.old = old
        """Chunks of the existing array (the new ones follow)."""
        self._shift = old - tail  # joined chunk k (k >= tail) is chunk k + shift
        self._total = old + joined.nchunks - tail
        self.block_size = record_size

    def load_block(self, number: int) -> ManifestBlock:
        """Record ``number``: existing entries, then new ones."""
        start = number * self.block_size
        end = min(start + self.block_size, self._total)
        if end <= self.old:
            return self._existing.block(number)
        pieces: list[tuple[ManifestBlock, int, int, int]] = []
        if start < self.old:
            pieces.append((self._existing.block(number), start, self.old, 0))
        return _joined_block(start, pieces + self._new_pieces(number))

    def new_rows(self, number: int) -> ManifestBlock:
        """The new entries of record ``number`` (those after the existing chunks)."""
        return _joined_block(max(number * self.block_size, self.old), self._new_pieces(number))

    def _new_pieces(self, number: int) -> list[tuple[ManifestBlock, int, int, int]]:
        start = max(number * self.block_size, self.old)
        end = min((number + 1) * self.block_size, self._total)
        low, high = start - self._shift, end - self._shift
        size = self._joined.block_size
        return [
            (self._joined.block(k), low, high, self._shift)
            for k in range(low // size, (high - 1) // size + 1)
        ]


def _joined_block(start: int, pieces: list[tuple[ManifestBlock, int, int, int]]) -> ManifestBlock:
    """`joined_entries` as a block."""
    joined = joined_entries(start, pieces)
    return ManifestBlock(
        joined.start,
        tuple(joined.paths),
        joined.path_id,
        joined.offset,
        joined.length,
        joined.inlined,
    )
