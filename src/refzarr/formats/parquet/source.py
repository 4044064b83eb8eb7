"""Lazy manifest blocks of one array of a Parquet reference set: one record file per block.

Row semantics (fsspec's): ``raw`` set -> inline bytes (wins over ``path``); ``path`` set with
offset 0 and size 0 -> the whole file; ``path`` set otherwise -> a byte range; ``path`` and
``raw`` null -> a missing chunk, unless offset or size is non-zero, which is a reference into
the default ``target`` (a Version 0 ``[null, offset, size]``). A record file may be shorter
than its record (the rest is missing) or padded past it (the padding must be empty).
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from refzarr.errors import RefFormatError
from refzarr.formats.parquet.records import RecordColumns, decode_record
from refzarr.formats.source import remote_call
from refzarr.model.manifest import INLINED, MISSING, WHOLE_FILE, ManifestBlock
from refzarr.model.sparse import check_dense

__all__ = [
    "COMPLETE_KEY",
    "ParquetManifestSource",
    "check_record",
    "record_columns",
    "record_file_name",
    "whole_file",
]

COMPLETE_KEY = "every_record_written"
"""``.zmetadata`` key (true) of sets whose every record file exists, so an absent one is an
error rather than unwritten chunks (fsspec ignores keys it does not know)."""


def record_file_name(number: int) -> str:
    """The file name of record ``number`` (``refs.<number>.parq``)."""
    return f"refs.{number}.parq"


def whole_file(fs: Any, path: str) -> bytes:
    """The whole of a small file of the set in one GET: ``start=0`` asks s3fs for a ranged
    read; without it s3fs sends a HEAD first, to split large files into parallel parts."""
    try:
        data: bytes = fs.cat_file(path, start=0)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        data = fs.cat_file(path)  # empty: S3 refuses any range of it (416), not the whole
    return data


class ParquetManifestSource:
    """Loads the record files of one array as manifest blocks (a `ManifestSource`).

    Parameters
    ----------
    fs
        fsspec filesystem holding the reference set.
    directory
        Path of the array's directory on ``fs``.
    shown
        The same directory as users see it, for messages.
    array
        The array's path in the hierarchy, for messages.
    record_size
        References per record file (``.zmetadata`` ``record_size``).
    nchunks
        Number of chunks of the array.
    target
        URL for rows with a null path but a byte range.
    overrides
        Chunk number -> inline bytes for chunk keys stored in ``.zmetadata``; these win over
        the record files.
    every_record_written
        The writer wrote every record file (refzarr does): an absent one is an error. Otherwise
        an absent record file holds no written chunks, as fsspec writes them.
    """

    def __init__(
        self,
        fs: Any,
        directory: str,
        shown: str,
        *,
        array: str,
        record_size: int,
        nchunks: int,
        target: str | None,
        overrides: Mapping[int, bytes] | None = None,
        every_record_written: bool = False,
    ) -> None:
        # a record's block holds record_size entries however few rows its file has
        check_dense(min(record_size, nchunks), f"{shown}: record_size {record_size:,}")
        self._fs = fs
        self._directory = directory
        self._shown = shown
        self._array = array
        self._record_size = record_size
        self._nchunks = nchunks
        self._target = target
        self._overrides = dict(overrides or {})
        self._every_record_written = every_record_written
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # the lock stays behind (a dask worker's copy makes its own)
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def block_size(self) -> int:
        """References per record file."""
        return self._record_size

    def where(self, number: int) -> str:
        """Record file ``number`` as users see it."""
        return f"{self._shown}/{record_file_name(number)}"

    def load_record(self, number: int) -> RecordColumns | None:
        """The decoded rows of record ``number``; None when the array has no record files."""
        path = f"{self._directory}/{record_file_name(number)}"
        try:
            data = remote_call(
                self._fs, f"{self.where(number)}: reading it", lambda: whole_file(self._fs, path)
            )
        except FileNotFoundError:
            if self._every_record_written:
                raise RefFormatError(
                    f"{self.where(number)}: record file of array {self._array!r} is absent, "
                    "but this reference set was written with every record file: it is "
                    "damaged (rewrite it from its source)"
                ) from None
            return None  # fsspec writes no file for a record none of whose chunks was written
        return decode_record(data, where=self.where(number), max_rows=self._record_size)

    def load_block(self, number: int) -> ManifestBlock:
        """Block ``number``: the entries of record file ``number``."""
        start = number * self._record_size
        expected = max(0, min(self._record_size, self._nchunks - start))
        record = self.load_record(number) if expected else None
        columns = _Columns.missing(expected)
        if record is not None:
            columns = record_columns(
                record, expected=expected, target=self._target, where=self.where(number)
            )
        for chunk, data in self._overrides.items():
            if start <= chunk < start + expected:
                columns.set_inline(chunk - start, data)
        return columns.block(start)


class _Columns:
    """Mutable block columns under construction."""

    def __init__(
        self,
        paths: list[str],
        path_id: npt.NDArray[np.int32],
        offset: npt.NDArray[np.uint64],
        length: npt.NDArray[np.uint64],
        inlined: dict[int, bytes],
    ) -> None:
        self.paths = paths
        self.path_id = path_id
        self.offset = offset
        self.length = length
        self.inlined = inlined  # block-relative row -> bytes

    @classmethod
    def missing(cls, n: int) -> _Columns:
        zeros = np.zeros(n, dtype=np.uint64)
        return cls([], np.full(n, MISSING, dtype=np.int32), zeros, zeros.copy(), {})

    def set_inline(self, row: int, data: bytes) -> None:
        self.path_id[row] = INLINED
        self.offset[row] = 0
        self.length[row] = 0
        self.inlined[row] = data

    def block(self, start: int) -> ManifestBlock:
        inlined = {start + row: data for row, data in self.inlined.items()}
        return ManifestBlock(
            start, tuple(self.paths), self.path_id, self.offset, self.length, inlined
        )


def record_columns(
    record: RecordColumns, *, expected: int, target: str | None, where: str
) -> _Columns:
    """The manifest columns of the first ``expected`` rows of a record file."""
    check_record(record, expected, where)
    n = min(record.rows, expected)
    pid = record.path_id[:n].copy()
    offset, size = record.offset[:n], record.size[:n]
    paths = list(record.paths)
    targeted = (pid < 0) & ((offset != 0) | (size != 0))
    if targeted.any():
        pid[targeted] = _target_id(paths, target, int(np.argmax(targeted)), where)
    present = pid >= 0
    whole = present & (offset == 0) & (size == 0)
    columns = _Columns.missing(expected)
    columns.paths = paths
    columns.path_id[:n] = pid
    columns.offset[:n] = np.where(present, offset, 0)
    columns.length[:n] = np.where(whole, WHOLE_FILE, np.where(present, size, 0))
    for row, data in record.raw.items():
        if row < n:
            columns.set_inline(row, data)
    return columns


def _target_id(paths: list[str], target: str | None, row: int, where: str) -> int:
    if target is None:
        raise RefFormatError(
            f"{where}: row {row} has a byte range but no path, and no default target was "
            "given (pass target=...)"
        )
    if target not in paths:
        paths.append(target)
    return paths.index(target)


def check_record(record: RecordColumns, expected: int, where: str) -> None:
    """Rows with a path need a range; rows past the record's chunks (padding) must be empty."""
    wrong = record.missing_range[:expected]
    if wrong.any():
        row = int(np.argmax(wrong))
        raise RefFormatError(f"{where}: row {row} has a path but a null offset or size")
    if record.rows <= expected:
        return
    extra = slice(expected, None)
    filled = (record.path_id[extra] >= 0) | (record.offset[extra] != 0) | (record.size[extra] != 0)
    rows = [row for row in record.raw if row >= expected]
    if filled.any():
        rows.append(expected + int(np.argmax(filled)))
    if rows:
        row = min(rows)
        raise RefFormatError(
            f"{where}: row {row} holds a reference, but the record covers only {expected} "
            "chunks of the array (more references than the chunk grid has)"
        )
