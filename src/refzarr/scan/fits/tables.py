"""Table HDUs: binary tables and random groups as 1-D structured arrays of big-endian rows
(``TDIM`` cells shaped), ASCII tables parsed by the ``refzarr.fits_ascii`` codec, and
variable-length columns decoded and held inline when small."""

from __future__ import annotations

from typing import Any

import numpy as np
from astropy.io import fits

from refzarr.codecs.fits import FitsAsciiTable
from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.model import ArrayMeta, ChunkManifest, RefArray
from refzarr.model.manifest import share_bytes
from refzarr.scan.fits.context import HduScan
from refzarr.scan.fits.header import header_attributes, stored_dtype

__all__ = ["ascii_table_array", "binary_table_array", "groups_array"]


def binary_table_array(
    scan: HduScan, index: int, hdu: Any, name: str, where: str
) -> RefArray | None:
    """A binary table as a structured array of rows, or None when it has no rows."""
    header = hdu.header
    rows, width = int(header["NAXIS2"]), int(header["NAXIS1"])
    if rows == 0 or width == 0:
        return None
    dtype = _row_dtype(hdu.columns, width, where)
    offset = scan.data_location(index, rows * width + int(header.get("PCOUNT", 0)), where)
    variable = [c.name for c in hdu.columns if _is_variable(c)]
    attrs = _table_attributes(header, hdu.columns, index)
    dims = (scan.dims.name(f"{name}_row", rows, name),)
    if variable:
        return _inlined_variable_table(scan, hdu, name, where, variable, attrs, dims)
    chunks, manifest = scan.contiguous(offset, (rows,), width)
    meta = ArrayMeta((rows,), chunks, dtype, None, (), attrs, dims)
    return RefArray(meta, manifest)


def ascii_table_array(
    scan: HduScan, index: int, hdu: Any, name: str, where: str
) -> RefArray | None:
    """An ASCII table whose rows the ``refzarr.fits_ascii`` codec parses into numbers."""
    header = hdu.header
    rows, width = int(header["NAXIS2"]), int(header["NAXIS1"])
    if rows == 0 or width == 0:
        return None
    offset = scan.data_location(index, rows * width, where)
    fields = [
        (c.name, np.dtype(c.dtype).str, int(c.start) - 1, int(c.format.width), c.null)
        for c in hdu.columns
    ]
    codec = FitsAsciiTable(width, fields)
    chunks, manifest = scan.contiguous(offset, (rows,), width, within_padding=True, pad=b" ")
    attrs = _table_attributes(header, hdu.columns, index)
    dims = (scan.dims.name(f"{name}_row", rows, name),)
    meta = ArrayMeta((rows,), chunks, codec.dtype, None, (codec.get_config(),), attrs, dims)
    return RefArray(meta, manifest)


def groups_array(scan: HduScan, index: int, hdu: Any, name: str, where: str) -> RefArray | None:
    """A random-groups HDU: one structured element per group (parameters, then ``DATA``)."""
    header = hdu.header
    stored_dtype(header, where)
    groups = int(header.get("GCOUNT", 1))
    dtype = _big_endian(np.dtype(hdu.columns.dtype))
    if groups == 0 or dtype.itemsize == 0:
        return None
    offset = scan.data_location(index, groups * dtype.itemsize, where)
    chunks, manifest = scan.contiguous(offset, (groups,), dtype.itemsize)
    attrs = header_attributes(header)
    attrs["fits_hdu"] = index
    dims = (scan.dims.name(f"{name}_group", groups, name),)
    meta = ArrayMeta((groups,), chunks, dtype, None, (), attrs, dims)
    return RefArray(meta, manifest)


def _big_endian(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """A structured dtype with every numeric field big-endian (as FITS stores them)."""
    return dtype.newbyteorder(">")


def _row_dtype(columns: Any, width: int, where: str) -> np.dtype[Any]:
    """The stored row: astropy's column dtypes, big-endian, ``NAXIS1`` bytes."""
    dtype = _big_endian(np.dtype(columns.dtype))
    if dtype.itemsize != width:
        raise ScanError(
            f"{where}: its columns (TFORMn) take {dtype.itemsize} bytes per row, NAXIS1 says "
            f"{width}; the header is damaged"
        )
    return dtype


def _is_variable(column: Any) -> bool:
    """Whether a column holds variable-length arrays (``P``/``Q`` formats)."""
    return str(column.format).lstrip("0123456789")[:1] in ("P", "Q")


def _table_attributes(header: fits.Header, columns: Any, index: int) -> dict[str, Any]:
    """The header's cards, ``fits_hdu``, and per field its ``TSCAL``/``TZERO``/``TNULL``."""
    attrs = header_attributes(header)
    attrs["fits_hdu"] = index
    fields: dict[str, dict[str, Any]] = {}
    for k, column in enumerate(columns, start=1):
        scaling = {
            key: header[f"{key}{k}"] for key in ("TSCAL", "TZERO", "TNULL") if f"{key}{k}" in header
        }
        if scaling:
            fields[column.name] = scaling
    if fields:
        attrs["fits_fields"] = fields
    return attrs


def _inlined_variable_table(
    scan: HduScan,
    hdu: Any,
    name: str,
    where: str,
    variable: list[str],
    attrs: dict[str, Any],
    dims: tuple[str, ...],
) -> RefArray:
    """A table with variable-length columns, decoded by astropy and held inline: each such
    column padded to its longest cell, its lengths in a field ``<column>_length``."""
    data = hdu.data
    rows = len(data)
    longest = {c: max((len(cell) for cell in data[c]), default=0) for c in variable}
    fields: list[tuple[Any, ...]] = []
    for column in hdu.columns:
        if column.name in variable:
            element = _big_endian(np.asarray(data[column.name][0]).dtype) if rows else "u1"
            fields.append((column.name, element, (longest[column.name],)))
            fields.append((f"{column.name}_length", ">i8"))
        else:
            fields.append((column.name, *_field_spec(np.dtype(hdu.columns.dtype), column.name)))
    dtype = np.dtype(fields)
    if rows * dtype.itemsize > scan.inline_decoded:
        raise UnsupportedFeatureError(
            f"{where}: variable-length columns {variable} decode to "
            f"{rows * dtype.itemsize} bytes, more than inline_decoded={scan.inline_decoded}; "
            "raise inline_decoded to hold them in the reference set"
        )
    out = np.zeros(rows, dtype=dtype)
    raw = np.asarray(data)
    for column in hdu.columns:
        if column.name in variable:
            for row, cell in enumerate(data[column.name]):
                out[column.name][row, : len(cell)] = cell
                out[f"{column.name}_length"][row] = len(cell)
        else:
            out[column.name] = raw[column.name]
    attrs = {**attrs, "fits_variable_length": variable}
    meta = ArrayMeta((rows,), (max(rows, 1),), dtype, None, (), attrs, dims)
    return RefArray(meta, ChunkManifest.one_inlined(share_bytes(out.tobytes())))


def _field_spec(dtype: np.dtype[Any], name: str) -> tuple[Any, ...]:
    """``(dtype, shape)`` or ``(dtype,)`` of one field, big-endian."""
    field = dtype.fields[name][0] if dtype.fields else dtype
    base = field.base.newbyteorder(">") if field.base.kind not in "SUV" else field.base
    return (base, field.shape) if field.shape else (base,)
