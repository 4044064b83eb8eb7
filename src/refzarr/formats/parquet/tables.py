"""Manifest entries -> the Arrow table of one Parquet record file, vectorised.

Columns have explicit types, never Parquet null types (fastparquet reads an all-null
null-typed ``raw`` column as NaN, which fsspec then returns as chunk data): ``path`` string
(dictionary-encoded unless nearly every row has its own URL), ``offset`` and ``size`` int64,
``raw`` binary. A whole-file reference is ``(path, 0, 0)``, so a zero-length reference at
offset 0 is written as ``raw = b""`` (the same zero bytes, told apart from a whole file).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from refzarr.formats.parquet.arrow import binary_array, int_array, string_array
from refzarr.model.manifest import INLINED, WHOLE_FILE, ChunkManifest, ManifestBlock

__all__ = ["RECORD_SCHEMA", "EntrySlice", "entry_slices", "joined_entries", "record_table"]

RECORD_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string()),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("raw", pa.binary()),
    ]
)
"""Column names and types of a record file (``path`` may be dictionary-encoded)."""


@dataclass(frozen=True, slots=True)
class EntrySlice:
    """Manifest entries for chunk numbers ``start .. start + len(path_id)``."""

    start: int
    paths: Sequence[str]
    path_id: npt.NDArray[np.int32]
    offset: npt.NDArray[np.uint64]
    length: npt.NDArray[np.uint64]
    inlined: Mapping[int, bytes]


def entry_slices(manifest: ChunkManifest, record_size: int, first: int = 0) -> Iterator[EntrySlice]:
    """The entries of each record of ``record_size`` chunks from record ``first`` on, loading
    blocks as reached (blocks before the first record are not loaded)."""
    total, block_size = manifest.nchunks, manifest.block_size
    for low in range(first * record_size, total, record_size):
        high = min(total, low + record_size)
        numbers = range(low // block_size, (high - 1) // block_size + 1)
        if len(numbers) == 1:
            yield _piece(manifest.block(numbers[0]), low, high)
        else:
            yield joined_entries(low, [(manifest.block(n), low, high, 0) for n in numbers])


def _piece(block: ManifestBlock, low: int, high: int) -> EntrySlice:
    first = max(low, block.start) - block.start
    last = min(high, block.start + block.path_id.shape[0]) - block.start
    return EntrySlice(
        block.start + first,
        block.paths,
        block.path_id[first:last],
        block.offset[first:last],
        block.length[first:last],
        block.inlined,
    )


def joined_entries(start: int, pieces: Sequence[tuple[ManifestBlock, int, int, int]]) -> EntrySlice:
    """One slice, from chunk ``start`` on, of the rows ``[low, high)`` (chunk numbers of each
    piece's block) of ``(block, low, high, shift)`` pieces, each piece's chunks moved by its
    shift (its inlined chunks renumbered); the URL table holds only the URLs these rows use."""
    table: dict[str, int] = {}
    parts = [_piece(block, low, high) for block, low, high, _ in pieces]
    ids = []
    inlined: dict[int, bytes] = {}
    for part, (block, _, _, shift) in zip(parts, pieces, strict=True):
        if not part.path_id.shape[0]:
            continue
        referenced = part.path_id >= 0
        used = np.flatnonzero(np.bincount(part.path_id[referenced], minlength=len(block.paths)))
        remap = np.zeros(len(block.paths) + 1, np.int32)
        for i in used.tolist():
            remap[i] = table.setdefault(block.paths[i], len(table))
        ids.append(np.where(referenced, remap[np.maximum(part.path_id, 0)], part.path_id))
        for row in np.flatnonzero(part.path_id == INLINED).tolist():
            inlined[part.start + row + shift] = block.inlined[part.start + row]
    return EntrySlice(
        start,
        tuple(table),
        np.concatenate(ids).astype(np.int32),
        np.concatenate([p.offset for p in parts]),
        np.concatenate([p.length for p in parts]),
        inlined,
    )


def record_table(entries: EntrySlice) -> pa.Table:
    """The Arrow table of one record file (one row per chunk, in C order)."""
    ids, offset, length = entries.path_id, entries.offset, entries.length
    present = ids >= 0
    empty = present & (offset == 0) & (length == 0)
    referenced = present & ~empty
    sized = referenced & (length != WHOLE_FILE)
    columns = [
        _path_column(entries.paths, ids, referenced),
        int_array(np.where(referenced, offset, 0).astype(np.int64)),
        int_array(np.where(sized, length, 0).astype(np.int64)),
        _raw_column(entries, empty),
    ]
    schema = RECORD_SCHEMA.set(0, pa.field("path", columns[0].type))
    return pa.Table.from_arrays(columns, schema=schema)


def _path_column(
    paths: Sequence[str], ids: npt.NDArray[np.int32], referenced: npt.NDArray[np.bool_]
) -> pa.Array:
    """URLs of referenced rows (null elsewhere), with only the URLs this record uses."""
    count = int(referenced.sum())
    if count == 0:
        return pa.nulls(ids.shape[0], pa.string())
    used = np.bincount(ids[referenced], minlength=len(paths)) > 0
    remap = (np.cumsum(used) - 1).astype(np.int32)
    indices = np.where(referenced, remap[np.maximum(ids, 0)], 0).astype(np.int32)
    dictionary = string_array([paths[i] for i in np.flatnonzero(used).tolist()])
    column = pa.DictionaryArray.from_arrays(int_array(indices, referenced), dictionary)
    if 2 * len(dictionary) > count:
        # nearly one URL per row: a dictionary would only add the indices
        return column.dictionary_decode()
    return column


def _raw_column(entries: EntrySlice, empty: npt.NDArray[np.bool_]) -> pa.Array:
    """Inline bytes (and ``b""`` for zero-length references at offset 0), null elsewhere."""
    n = entries.path_id.shape[0]
    inline_rows = np.flatnonzero(entries.path_id == INLINED)
    if inline_rows.size == 0 and not empty.any():
        return pa.nulls(n, pa.binary())
    values = [entries.inlined[entries.start + row] for row in inline_rows.tolist()]
    empty_rows = np.flatnonzero(empty)
    values.extend([b""] * empty_rows.size)
    dense = binary_array(values)
    positions = np.zeros(n, dtype=np.int32)
    positions[np.concatenate([inline_rows, empty_rows])] = np.arange(len(values), dtype=np.int32)
    valid = np.zeros(n, dtype=bool)
    valid[inline_rows] = True
    valid[empty_rows] = True
    return dense.take(int_array(positions, valid))
