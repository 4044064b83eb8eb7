"""DAP4 types as numpy dtypes, and the text of DMR++ attributes and fill values as values.

The DMR++ writes numbers as text: attributes with the precision of the HDF5 handler, fill
values with C++'s default six significant digits (``build_dmrpp``), so a float fill value is
exact only when it has six digits or fewer (`fill_from_text` says how it recovers the others).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

import numpy as np

from refzarr.errors import ScanError, UnsupportedFeatureError

__all__ = [
    "NUMERIC_TYPES",
    "attribute_value",
    "compound_dtype",
    "fill_from_text",
    "numeric_dtype",
    "value_in_dtype",
]

NUMERIC_TYPES = {
    "Byte": "u1",
    "UInt8": "u1",
    "Int8": "i1",
    "Int16": "i2",
    "UInt16": "u2",
    "Int32": "i4",
    "UInt32": "u4",
    "Int64": "i8",
    "UInt64": "u8",
    "Float32": "f4",
    "Float64": "f8",
}
"""DAP4 numeric types and the numpy kind and size of each."""

_TEXT_TYPES = frozenset({"String", "URL", "Char"})

NETCDF_FILL_FLOAT = 9.9692099683868690e36
"""netCDF's default fill of float and double variables, which netCDF-C sets as the HDF5 fill
value; ``build_dmrpp`` writes it as ``9.96921e+36``."""


def numeric_dtype(type_name: str, byte_order: str | None, where: str) -> np.dtype[Any]:
    """The numpy dtype of a DAP4 numeric type stored in ``byte_order`` (``"LE"``, ``"BE"``;
    None: little-endian, the DMR++ default)."""
    code = NUMERIC_TYPES[type_name]
    if byte_order not in (None, "LE", "BE"):
        raise ScanError(f"{where}: byteOrder {byte_order!r} is neither 'LE' nor 'BE'")
    if code.endswith("1"):
        return np.dtype("|" + code)
    return np.dtype(("<" if byte_order != "BE" else ">") + code)


def attribute_value(type_name: str, texts: Sequence[str | None], where: str) -> Any:
    """A DAP4 attribute's ``Value`` texts as the HDF5 scanner gives attributes: one value as
    itself, several as a list, none as ``""`` (text) or ``[]`` (numbers)."""
    if type_name in _TEXT_TYPES:
        values: list[Any] = [text or "" for text in texts]
        empty: Any = ""
    elif type_name in NUMERIC_TYPES:
        dtype = np.dtype(NUMERIC_TYPES[type_name])
        values = [_number(text, dtype, where) for text in texts]
        empty = []
    else:
        raise UnsupportedFeatureError(f"{where}: attributes of DAP4 type {type_name!r}")
    if not values:
        return empty
    return values[0] if len(values) == 1 else values


def _number(text: str | None, dtype: np.dtype[Any], where: str) -> int | float:
    value = (text or "").strip()
    try:
        if dtype.kind == "f":
            return float(np.dtype(dtype).type(value))
        number = int(value)
    except (TypeError, ValueError):
        raise ScanError(f"{where}: {value!r} is not a {dtype} number") from None
    info = np.iinfo(dtype)
    if not info.min <= number <= info.max:
        raise ScanError(f"{where}: {number} is out of the range of {dtype}")
    return number


def value_in_dtype(value: Any, dtype: np.dtype[Any]) -> Any:
    """One attribute value as a scalar of ``dtype``, or None unless it converts exactly (the
    HDF5 scanner's rule for ``_FillValue``)."""
    if isinstance(value, list) or dtype.names:
        return None
    if isinstance(value, str):
        if dtype.kind != "S":
            return None
        raw = value.encode("utf-8")
        return np.bytes_(raw) if len(raw) <= dtype.itemsize else None
    try:
        converted = np.asarray(value).astype(dtype)
    except (TypeError, ValueError, OverflowError):
        return None
    back = converted.astype(np.float64 if isinstance(value, float) else object)[()]
    if back != value and not (isinstance(value, float) and value != value and back != back):
        return None
    return converted[()]


def fill_from_text(text: str, dtype: np.dtype[Any], declared: Any, where: str) -> Any:
    """The HDF5 fill value a sidecar's ``fillValue`` text stands for, in ``dtype``; None when
    it is zero (all bytes zero), as the HDF5 scanner's rule wants.

    Floats are written with six significant digits: when the text is what the variable's
    ``_FillValue`` attribute (``declared``) or netCDF's default fill prints as, that exact
    value is taken; other floats are taken as written.
    """
    if dtype.kind == "S":
        raw = text.encode("utf-8")
        return np.bytes_(raw) if raw.strip(b"\x00") else None
    if dtype.names:
        if text.strip() in ("", "0"):  # HDF5's default fill: zeros
            return None
        raise UnsupportedFeatureError(
            f"{where}: the compound fill value {text!r} of a variable with missing chunks "
            "cannot be read from the sidecar"
        )
    value: Any
    try:
        if dtype.kind == "f":
            value = _float_fill(text.strip(), dtype, declared)
        else:
            value = dtype.type(_number(text, dtype, where))
    except ScanError as exc:
        raise ScanError(f"{exc} (fillValue)") from None
    value = np.asarray(value, dtype=dtype)[()]
    return value if any(np.asarray(value).tobytes()) else None


def _float_fill(text: str, dtype: np.dtype[Any], declared: Any) -> Any:
    for exact in (declared, NETCDF_FILL_FLOAT):
        if isinstance(exact, float) and f"{exact:g}" == f"{float(text):g}":
            return dtype.type(exact)
    return dtype.type(text)


def compound_dtype(
    element: ET.Element, names: Any, chunks: ET.Element | None, where: str
) -> np.dtype[Any]:
    """The structured dtype of a ``Structure`` of scalar numbers: member offsets from the
    ``structOffset`` of its chunks (offsets of the members after the first, then the size),
    else packed; all members in the chunks' byte order."""
    byte_order = None if chunks is None else chunks.get("byteOrder")
    fields: list[tuple[str, np.dtype[Any]]] = []
    for member in element:
        kind = names.local(member.tag)
        if kind in ("Dim", "Attribute", "Map", None):
            continue
        label = f"{where}: compound member {member.get('name')!r}"
        if kind not in NUMERIC_TYPES:
            raise UnsupportedFeatureError(f"{label} of DAP4 type {kind} is not supported")
        if member.find(names("Dim")) is not None:
            raise UnsupportedFeatureError(
                f"{label} is an array: zarr-python 3 cannot read structured dtypes with "
                "sub-array fields"
            )
        fields.append((str(member.get("name")), numeric_dtype(kind, byte_order, where)))
    if not fields:
        raise ScanError(f"{where}: a Structure without members")
    offsets, size = _struct_offsets(chunks, fields, where)
    return np.dtype(
        {
            "names": [n for n, _ in fields],
            "formats": [d for _, d in fields],
            "offsets": offsets,
            "itemsize": size,
        }
    )


def _struct_offsets(
    chunks: ET.Element | None, fields: list[tuple[str, np.dtype[Any]]], where: str
) -> tuple[list[int], int]:
    text = None if chunks is None else chunks.get("structOffset")
    if text is None:
        offsets = [0]
        for _, dtype in fields[:-1]:
            offsets.append(offsets[-1] + dtype.itemsize)
        return offsets, offsets[-1] + fields[-1][1].itemsize
    try:
        values = [int(v) for v in text.split()]
    except ValueError:
        raise ScanError(f"{where}: structOffset {text!r} is not integers") from None
    offsets = [0, *values[:-1]]
    ends = [*offsets[1:], values[-1]] if values else []
    if len(values) != len(fields) or any(
        end < start + d.itemsize for start, end, (_, d) in zip(offsets, ends, fields, strict=True)
    ):
        raise ScanError(f"{where}: structOffset {text!r} does not fit members {fields}")
    return offsets, values[-1]
