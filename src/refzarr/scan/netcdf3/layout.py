"""Where each netCDF3 variable's values lie: shapes, the record size, the record count, and the
chunk grid of every variable as numpy columns (no Python object per record).

Sizes are computed as netCDF-C computes them (the header's ``vsize`` is ignored: it overflows
for large variables): a variable's slab (its values, or one record's) is padded to 4 bytes,
the record size is the sum of the record variables' padded slabs, except that the slab of a
file's only record variable is not padded. Every chunk must lie inside the file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from refzarr.errors import ScanError
from refzarr.scan.netcdf3.header import STREAMING, Header, Variable
from refzarr.scan.netcdf3.types import ITEMSIZES, NC_TYPES

__all__ = ["CHUNK_BYTES", "Placement", "Records", "place_variables"]

CHUNK_BYTES = 64 * 2**20
"""Contiguous data (a non-record variable, or the records of a file's only record variable)
larger than this is cut into chunks of whole rows along its first dimension."""


@dataclass(frozen=True, slots=True)
class Records:
    """The record section: record dimension index (None: none), record count, record size,
    where the first record starts and how many record variables there are."""

    dimension: int | None
    numrecs: int
    recsize: int
    begin: int
    variables: int


class Placement(NamedTuple):
    """One variable's array: shape, chunk shape, dimension names and chunk byte ranges.

    ``offsets`` is shaped like the chunk grid; every chunk is ``length`` bytes long.
    """

    variable: Variable
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dimension_names: tuple[str, ...]
    offsets: np.ndarray[Any, np.dtype[np.uint64]]
    length: int
    is_record: bool


def place_variables(
    header: Header, file_size: int, where: str, chunk_bytes: int = CHUNK_BYTES
) -> tuple[Records, list[Placement]]:
    """The record section and every variable's placement, in file order.

    Raises
    ------
    ScanError
        When dimension ids, data offsets or the record count are inconsistent with the header
        or with the file's size (names ``where``, the variable and what is wrong).
    """
    record_dim = _record_dimension(header, where)
    slabs = [_slab(header, v, record_dim, where) for v in header.variables]
    records = _records(header, slabs, record_dim, file_size, where)
    _check_overlaps(header, slabs, records.numrecs, where)
    return records, [
        _place(header, v, slab, records, file_size, where, chunk_bytes)
        for v, slab in zip(header.variables, slabs, strict=True)
    ]


class _Slab(NamedTuple):
    """A variable's shape without the record axis, its bytes and whether it is a record one."""

    inner: tuple[int, ...]
    nbytes: int
    is_record: bool

    @property
    def padded(self) -> int:
        return self.nbytes + (-self.nbytes % 4)


def _record_dimension(header: Header, where: str) -> int | None:
    found = [k for k, d in enumerate(header.dimensions) if d.length == 0]
    if len(found) > 1:
        names = [header.dimensions[k].name for k in found]
        raise ScanError(
            f"{where}: dimensions {names} all have length 0 (unlimited); netCDF3 allows one "
            "record dimension: the header is damaged"
        )
    return found[0] if found else None


def _slab(header: Header, var: Variable, record_dim: int | None, where: str) -> _Slab:
    dimids = var.dimids
    dims = header.dimensions
    if dimids and (max(dimids) >= len(dims) or record_dim in dimids[1:]):
        _bad_dimensions(header, var, record_dim, where)
    is_record = bool(dimids) and dimids[0] == record_dim
    inner = tuple([dims[d].length for d in (dimids[1:] if is_record else dimids)])
    nbytes = math.prod(inner) * ITEMSIZES[var.nc_type]
    if nbytes >= 2**63:  # no file holds it (and its size may be too long to print)
        raise ScanError(
            f"{where}: variable {var.name!r} declares {len(inner)} dimensions of more than "
            "2**63 bytes in all, more than any file holds: the header is damaged"
        )
    return _Slab(inner, nbytes, is_record)


def _bad_dimensions(header: Header, var: Variable, record_dim: int | None, where: str) -> None:
    ndim = len(header.dimensions)
    for position, dimid in enumerate(var.dimids):
        if dimid >= ndim:
            raise ScanError(
                f"{where}: variable {var.name!r} names dimension id {dimid}, but the file has "
                f"{ndim} dimensions: the header is damaged"
            )
        if dimid == record_dim and position > 0:
            raise ScanError(
                f"{where}: variable {var.name!r} has the record dimension "
                f"{header.dimensions[dimid].name!r} at position {position}; netCDF3 allows it "
                "first only: the header is damaged"
            )


def _records(
    header: Header, slabs: list[_Slab], record_dim: int | None, file_size: int, where: str
) -> Records:
    rec = [(v, s) for v, s in zip(header.variables, slabs, strict=True) if s.is_record]
    fixed = [(v, s) for v, s in zip(header.variables, slabs, strict=True) if not s.is_record]
    if not rec:
        numrecs = 0 if header.numrecs == STREAMING else header.numrecs
        return Records(record_dim, numrecs, 0, file_size, 0)
    recsize = rec[0][1].nbytes if len(rec) == 1 else sum(s.padded for _, s in rec)
    begin = rec[0][0].begin
    if fixed and fixed[-1][0].begin + fixed[-1][1].padded > begin:
        raise ScanError(
            f"{where}: the record variables start at byte {begin}, inside the last non-record "
            f"variable {fixed[-1][0].name!r} (bytes {fixed[-1][0].begin}.."
            f"{fixed[-1][0].begin + fixed[-1][1].nbytes}): the header is damaged"
        )
    # where the last data byte of a record lies (the last record need not be padded)
    data_end = max(v.begin - begin + s.nbytes for v, s in rec)
    numrecs = header.numrecs
    if numrecs == STREAMING:
        numrecs = _streaming_count(file_size - begin, recsize, data_end)
    elif numrecs and begin + (numrecs - 1) * recsize + data_end > file_size:
        held = _streaming_count(file_size - begin, recsize, data_end)
        raise ScanError(
            f"{where}: the header says {numrecs} records of {recsize} bytes from byte {begin}, "
            f"but the file ({file_size} bytes) holds only {held}: it is truncated or its "
            "record count is damaged"
        )
    return Records(record_dim, numrecs, recsize, begin, len(rec))


def _check_overlaps(header: Header, slabs: list[_Slab], numrecs: int, where: str) -> None:
    """Raise when a variable starts inside the one before it of its kind (non-record, then
    record variables, in header order, each slab padded to 4 bytes), as netCDF-C checks
    (``NC_check_voffs``): their references would read another variable's bytes. Record
    variables are checked only when there are records; without any, none of their bytes is
    referenced (scipy then writes them all at one offset, files netCDF-C refuses)."""
    for record in (False, True) if numrecs else (False,):
        end, before = 0, None
        for var, slab in zip(header.variables, slabs, strict=True):
            if slab.is_record != record:
                continue
            if before is not None and var.begin < end:
                raise ScanError(
                    f"{where}: variable {var.name!r} starts at byte {var.begin}, before the "
                    f"end of variable {before.name!r} (bytes {before.begin}..{end}), which "
                    "precedes it in the header: the header is damaged"
                )
            end, before = var.begin + slab.padded, var


def _streaming_count(available: int, recsize: int, data_end: int) -> int:
    """Records held in ``available`` bytes (a streamed file: count from its size)."""
    if available <= 0 or recsize <= 0:
        return 0
    full, tail = divmod(available, recsize)
    return full + int(tail >= data_end)


def _place(
    header: Header,
    var: Variable,
    slab: _Slab,
    records: Records,
    file_size: int,
    where: str,
    chunk_bytes: int,
) -> Placement:
    dtype = NC_TYPES[var.nc_type][0]
    dims = header.dimensions
    names = tuple([dims[d].name for d in var.dimids])
    if var.begin < header.size:
        raise ScanError(
            f"{where}: variable {var.name!r} starts at byte {var.begin}, inside the header "
            f"(which ends at byte {header.size}): the header is damaged"
        )
    if slab.is_record:
        shape = (records.numrecs, *slab.inner)
        if records.variables == 1:  # the file's only record variable: records contiguous
            chunks, offsets, length = _contiguous(var, shape, slab.nbytes, file_size, chunk_bytes)
        else:
            chunks, offsets, length = _per_record(var, shape, records)
    else:
        shape = slab.inner
        if var.begin + slab.nbytes > file_size:
            raise ScanError(
                f"{where}: variable {var.name!r} needs bytes {var.begin}..{var.begin + slab.nbytes}"
                f", beyond the file's end ({file_size} bytes): it is truncated or its header is "
                "damaged"
            )
        row = slab.nbytes // shape[0] if shape else slab.nbytes
        chunks, offsets, length = _contiguous(var, shape, row, file_size, chunk_bytes)
    return Placement(var, dtype, shape, chunks, names, offsets, length, slab.is_record)


Layout = tuple[tuple[int, ...], "np.ndarray[Any, np.dtype[np.uint64]]", int]


def _per_record(var: Variable, shape: tuple[int, ...], records: Records) -> Layout:
    """One chunk per record, ``recsize`` apart."""
    chunks = (1, *shape[1:])
    offsets = _offsets(var.begin, records.recsize, shape[0], len(shape))
    return chunks, offsets, math.prod(chunks) * _itemsize(var)


def _offsets(first: int, step: int, count: int, ndim: int) -> Any:
    """``count`` offsets ``step`` apart from ``first``, shaped as a chunk grid along the first
    of ``ndim`` axes (one offset without numpy arithmetic: a small file's usual case)."""
    if count == 1:
        flat = np.array([first], dtype=np.uint64)
    else:
        flat = np.arange(count, dtype=np.uint64) * np.uint64(step) + np.uint64(first)
    return flat.reshape((count,) + (1,) * (ndim - 1)) if ndim > 1 else flat


def _contiguous(
    var: Variable, shape: tuple[int, ...], row: int, file_size: int, chunk_bytes: int
) -> Layout:
    """Contiguous rows of ``row`` bytes from ``var.begin``: one chunk, or whole rows each."""
    itemsize = _itemsize(var)
    if not shape:
        return (), np.full((), var.begin, dtype=np.uint64), itemsize
    n = shape[0]
    rows = _rows_per_chunk(n, row, chunk_bytes, var.begin, file_size)
    offsets = _offsets(var.begin, rows * row, math.ceil(n / rows), len(shape))
    return (max(rows, 1), *shape[1:]), offsets, rows * row


def _rows_per_chunk(n: int, row: int, limit: int, begin: int, file_size: int) -> int:
    """Rows per chunk: all when they fit in ``limit``, else a divisor of ``n`` near the limit
    or, when there is none, as many as fit with the last chunk's range running on past the
    data (allowed while it stays inside the file; Zarr ignores those bytes)."""
    if n * row <= limit or n == 0:
        return max(n, 1)
    most = max(1, limit // row)
    divisor = _largest_divisor(n, most)
    if 2 * divisor >= most:
        return divisor
    if begin + math.ceil(n / most) * most * row <= file_size:
        return most
    return divisor


def _largest_divisor(n: int, most: int) -> int:
    best = 1
    for small in range(1, math.isqrt(n) + 1):
        if n % small == 0:
            for d in (small, n // small):
                if best < d <= most:
                    best = d
    return best


def _itemsize(var: Variable) -> int:
    return ITEMSIZES[var.nc_type]
