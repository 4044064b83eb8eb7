"""netCDF3 external types: their numpy dtypes (big-endian, as stored) and attribute values.

Attribute values are converted as netCDF4-python shows them: ``char`` as text (NUL bytes
removed, bytes that are not UTF-8 replaced by U+FFFD), one number as a Python number, several
as a tuple. The numpy type of a number that JSON loses (``short``, ``float``, ...) is recorded
beside it (`ATTRIBUTE_TYPES`, kept in ``_nczarr_attr`` by the scanner).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from refzarr.model.attr_types import attribute_type

__all__ = [
    "ATTRIBUTE_TYPES",
    "CDF5_TYPES",
    "CHAR",
    "EMPTY_ATTRIBUTE_TYPES",
    "ITEMSIZES",
    "NC_TYPES",
    "attribute_value",
    "type_name",
]

CHAR = 2
"""The ``char`` type code."""

NC_TYPES: dict[int, tuple[np.dtype[Any], str]] = {
    1: (np.dtype("i1"), "byte"),
    2: (np.dtype("S1"), "char"),
    3: (np.dtype(">i2"), "short"),
    4: (np.dtype(">i4"), "int"),
    5: (np.dtype(">f4"), "float"),
    6: (np.dtype(">f8"), "double"),
    7: (np.dtype("u1"), "ubyte"),
    8: (np.dtype(">u2"), "ushort"),
    9: (np.dtype(">u4"), "uint"),
    10: (np.dtype(">i8"), "int64"),
    11: (np.dtype(">u8"), "uint64"),
}
"""Type code -> (dtype of the stored values, netCDF name)."""

ITEMSIZES = {code: dtype.itemsize for code, (dtype, _) in NC_TYPES.items()}
"""Type code -> bytes per value."""

CDF5_TYPES = frozenset(range(7, 12))
"""Type codes only CDF-5 files may use."""

ATTRIBUTE_TYPES: dict[int, str] = {
    code: kind
    for code, (dtype, _) in NC_TYPES.items()
    if (kind := attribute_type(np.zeros(1, dtype))) is not None
}
"""Type code -> the dtype string recorded for a numeric attribute of that type (none for the
types a JSON number reads back as: ``double``, ``int64``)."""

EMPTY_ATTRIBUTE_TYPES: dict[int, str] = {
    code: dtype.newbyteorder("=").str for code, (dtype, _) in NC_TYPES.items() if code != CHAR
}
"""Type code -> the dtype string recorded for a numeric attribute holding no values (an empty
JSON list has no type at all: without it an empty ``int64`` attribute would read as float)."""


def type_name(code: int) -> str:
    """The netCDF name of type ``code`` (``"short"``), or ``"type <code>"``."""
    found = NC_TYPES.get(code)
    return found[1] if found else f"type {code}"


_STRUCT_CODES = {1: "b", 3: "h", 4: "i", 5: "f", 6: "d", 7: "B", 8: "H", 9: "I", 10: "q", 11: "Q"}
"""Type code -> `struct` format character (big-endian numbers as Python int / float: the
values numpy's ``.item()`` / ``.tolist()`` give)."""

_ONE = {code: struct.Struct(f">{char}").unpack for code, char in _STRUCT_CODES.items()}


def attribute_value(code: int, raw: bytes, count: int, *, keep_nul: bool = False) -> Any:
    """The JSON value of an attribute of type ``code`` holding ``count`` values in ``raw``
    (``keep_nul``: NUL characters of text are kept, as netCDF4-python does for a
    ``_FillValue``)."""
    if code == CHAR:
        text = raw.decode("utf-8", "replace")  # as netCDF4-python shows bytes that are not UTF-8
        return text if keep_nul or "\x00" not in text else text.replace("\x00", "")
    if count == 1:
        return _ONE[code](raw)[0]
    return struct.unpack(f">{count}{_STRUCT_CODES[code]}", raw)
