"""One Parquet record file (``refs.<i>.parq``) decoded into numpy columns, vectorised.

A record file lists consecutive chunk entries in rows with the columns ``path`` (URL, plain or
dictionary-encoded, nullable), ``offset`` and ``size`` (integers) and ``raw`` (inline bytes,
nullable). Any column may be absent or Parquet-null-typed (writers that build the table from an
all-null pandas column produce that); both read as all-null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from refzarr.errors import RefFormatError
from refzarr.formats.parquet.arrow import int_values, validity
from refzarr.model.manifest import MAX_OFFSET

__all__ = ["COLUMNS", "RecordColumns", "decode_record"]

COLUMNS = ("path", "offset", "size", "raw")
"""The columns of a record file a reader uses; others are ignored."""

_TEXT = (pa.types.is_string, pa.types.is_large_string)
_BYTES = (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_fixed_size_binary)


@dataclass(frozen=True, slots=True, eq=False)
class RecordColumns:
    """The rows of one record file.

    ``path_id`` indexes ``paths`` (unique, non-empty URLs) or is -1 where the path is null;
    ``offset``/``size`` are 0 where null (``missing_range`` marks rows whose path is set but
    whose offset or size is null); ``raw`` maps a row number to its inline bytes.
    """

    rows: int
    paths: tuple[str, ...]
    path_id: npt.NDArray[np.int32]
    offset: npt.NDArray[np.uint64]
    size: npt.NDArray[np.uint64]
    missing_range: npt.NDArray[np.bool_]
    raw: dict[int, bytes]


def decode_record(data: bytes, *, where: str, max_rows: int | None = None) -> RecordColumns:
    """Decode the bytes of a record file.

    Parameters
    ----------
    data
        The whole Parquet file.
    where
        The file as users see it, for messages.
    max_rows
        The most rows the file may hold (the set's record size), checked before its columns
        are read; None: not checked.

    Returns
    -------
    RecordColumns
        Its rows, column-wise (only ``path``, ``offset``, ``size`` and ``raw`` are read).

    Raises
    ------
    RefFormatError
        Not a Parquet file, a column of the wrong type, a negative or too large integer, or an
        empty path; the message names ``where`` and the row. Also, before any column is
        decoded, more rows than ``max_rows`` or columns that would decompress to more than
        `MAX_EXPANSION` times the file's size (and `EXPANSION_FLOOR`).
    """
    table = _read_table(data, where, max_rows)
    rows = table.num_rows
    names = set(table.column_names)
    if "path" in names:
        paths, path_id = _path_column(_column(table, "path", where), where)
    else:
        paths, path_id = (), np.full(rows, -1, dtype=np.int32)
    offset, offset_null = _int_column(table, "offset", where)
    size, size_null = _int_column(table, "size", where)
    raw = _raw_column(_column(table, "raw", where), where) if "raw" in names else {}
    return RecordColumns(
        rows=rows,
        paths=paths,
        path_id=path_id,
        offset=offset,
        size=size,
        missing_range=(path_id >= 0) & (offset_null | size_null),
        raw=raw,
    )


MAX_EXPANSION = 100
"""How many times its own size a record file's columns may decompress to (beyond
`EXPANSION_FLOOR`): a 34 KB record file holding one inlined 1 GiB value of zeros took 10 s
and 4 GB, one of 2 MB declaring 2^27 rows 99 s and 7.5 GB, before their errors."""

EXPANSION_FLOOR = 2**26
"""Bytes any record file's columns may decompress to, whatever its size (64 MiB)."""


def _read_table(data: bytes, where: str, max_rows: int | None = None) -> pa.Table:
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        present = [c for c in COLUMNS if c in parquet.schema_arrow.names]
        _check_declared(parquet.metadata, present, len(data), max_rows, where)
        return parquet.read(columns=present, use_threads=False)  # one file: threads cost more
    except RefFormatError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise RefFormatError(f"{where}: not a readable Parquet record file ({exc})") from exc


def _check_declared(
    metadata: Any, columns: list[str], size: int, max_rows: int | None, where: str
) -> None:
    """RefFormatError when the file's footer declares more rows than a record holds, or
    columns decompressing to more than `MAX_EXPANSION` times its ``size`` bytes."""
    rows = metadata.num_rows
    if max_rows is not None and rows > max_rows:
        raise RefFormatError(
            f"{where}: the record file declares {rows:,} rows, but the set's records hold "
            f"{max_rows:,} references each: it is damaged (not read)"
        )
    bound = max(EXPANSION_FLOOR, MAX_EXPANSION * size)
    declared = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for k in range(row_group.num_columns):
            column = row_group.column(k)
            if column.path_in_schema.split(".", 1)[0] in columns:
                declared += max(0, column.total_uncompressed_size)
    if declared > bound:
        raise RefFormatError(
            f"{where}: the record file ({size:,} bytes) declares columns of {declared:,} "
            f"bytes, more than {MAX_EXPANSION} times its size (a damaged file or a "
            "decompression bomb): not read"
        )


def _column(table: pa.Table, name: str, where: str) -> pa.Array:
    try:
        column = table.column(name)
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    except (pa.ArrowException, ValueError) as exc:
        raise RefFormatError(f"{where}: column {name!r} cannot be read ({exc})") from exc


def _path_column(column: pa.Array, where: str) -> tuple[tuple[str, ...], npt.NDArray[np.int32]]:
    """Unique URL table and int32 ids (-1 for null) of the ``path`` column."""
    if pa.types.is_null(column.type):
        return (), np.full(len(column), -1, dtype=np.int32)
    if not pa.types.is_dictionary(column.type):
        if not any(check(column.type) for check in _TEXT + _BYTES):
            raise RefFormatError(
                f"{where}: column 'path' must hold strings, found Parquet type {column.type}"
            )
        if column.null_count == len(column):  # no row refers to a file (all inlined)
            return (), np.full(len(column), -1, dtype=np.int32)
        column = pc.dictionary_encode(column)
    values = _as_text(column.dictionary, where)
    indices = _ids(column.indices)
    urls = values.to_pylist()
    if None in urls or len(set(urls)) != len(urls):
        # duplicate or null dictionary entries: map every entry to its first occurrence
        unique = pc.unique(values.drop_null())
        remap = _ids(pc.index_in(values, value_set=unique))
        indices = np.where(indices >= 0, remap[np.maximum(indices, 0)], -1)
        urls = unique.to_pylist()
    paths = tuple(urls)
    if "" in paths and (indices == paths.index("")).any():
        row = int(np.argmax(indices == paths.index("")))
        raise RefFormatError(f"{where}: row {row} has an empty path (a URL is required)")
    return paths, indices.astype(np.int32)


def _ids(indices: pa.Array) -> npt.NDArray[np.int64]:
    """Integer indices as int64, -1 where null."""
    values = int_values(indices).astype(np.int64)
    if not indices.null_count:
        return values
    return np.where(validity(indices), values, -1)


def _as_text(values: pa.Array, where: str) -> pa.Array:
    if any(check(values.type) for check in _TEXT):
        return values
    if not any(check(values.type) for check in _BYTES):
        raise RefFormatError(
            f"{where}: column 'path' must hold strings, found dictionary of {values.type}"
        )
    try:
        return pc.cast(values, pa.string())
    except (pa.ArrowException, ValueError) as exc:
        raise RefFormatError(f"{where}: column 'path' holds text that is not UTF-8") from exc


def _int_column(
    table: pa.Table, name: str, where: str
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.bool_]]:
    """Non-negative uint64 values (0 where null) and the null mask of an integer column."""
    rows = table.num_rows
    if name not in table.column_names:
        return np.zeros(rows, dtype=np.uint64), np.ones(rows, dtype=bool)
    column = _column(table, name, where)
    if pa.types.is_null(column.type):
        return np.zeros(rows, dtype=np.uint64), np.ones(rows, dtype=bool)
    if not pa.types.is_integer(column.type):
        raise RefFormatError(
            f"{where}: column {name!r} must hold integers, found Parquet type {column.type}"
        )
    valid = validity(column)
    values = int_values(column)
    if column.null_count:
        values = np.where(valid, values, 0)
    if values.size and values.min() < 0:
        row = int(np.argmin(values))
        raise RefFormatError(f"{where}: row {row} has a negative {name} ({values[row]})")
    if values.size and values.max() > MAX_OFFSET:
        row = int(np.argmax(values))
        raise RefFormatError(
            f"{where}: row {row} has {name} {values[row]}, more than the largest {MAX_OFFSET}"
        )
    return values.astype(np.uint64), ~valid


def _raw_column(column: pa.Array, where: str) -> dict[int, bytes]:
    """Row number -> bytes for every non-null value of the ``raw`` column."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_null(column.type):
        return {}
    text = any(check(column.type) for check in _TEXT)
    if not text and not any(check(column.type) for check in _BYTES):
        raise RefFormatError(
            f"{where}: column 'raw' must hold bytes, found Parquet type {column.type}"
        )
    valid = validity(column)
    if not valid.any():
        return {}
    rows = np.flatnonzero(valid)
    values = column.filter(column.is_valid()).to_pylist()
    if text:
        values = [v.encode("utf-8") for v in values]
    return dict(zip(rows.tolist(), values, strict=True))
