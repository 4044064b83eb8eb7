"""netCDF3 external types: their numpy dtypes (big-endian, as stored) and attribute values.

Attribute values are converted as netCDF4-python shows them: ``char`` as text (NUL bytes
removed; bytes that are not UTF-8 become ``"base64:<data>"`` instead of being replaced),
one number as a Python number, several as a list.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

import numpy as np

__all__ = ["BASE64_PREFIX", "CDF5_TYPES", "CHAR", "NC_TYPES", "attribute_value", "type_name"]

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

CDF5_TYPES = frozenset(range(7, 12))
"""Type codes only CDF-5 files may use."""

BASE64_PREFIX = "base64:"
"""Prefix of a ``char`` attribute whose bytes are not UTF-8 (as the HDF5 scanner writes it)."""


def type_name(code: int) -> str:
    """The netCDF name of type ``code`` (``"short"``), or ``"type <code>"``."""
    found = NC_TYPES.get(code)
    return found[1] if found else f"type {code}"


_STRUCT_CODES = {1: "b", 3: "h", 4: "i", 5: "f", 6: "d", 7: "B", 8: "H", 9: "I", 10: "q", 11: "Q"}
"""Type code -> `struct` format character (big-endian numbers as Python int / float: the
values numpy's ``.item()`` / ``.tolist()`` give)."""


def attribute_value(code: int, raw: bytes, count: int, *, keep_nul: bool = False) -> Any:
    """The JSON value of an attribute of type ``code`` holding ``count`` values in ``raw``
    (``keep_nul``: NUL characters of text are kept, as netCDF4-python does for a
    ``_FillValue``)."""
    if code == CHAR:
        return _text(raw, keep_nul)
    values = struct.unpack(f">{count}{_STRUCT_CODES[code]}", raw)
    return values[0] if count == 1 else list(values)


def _text(raw: bytes, keep_nul: bool) -> str:
    try:
        text = raw.decode("utf-8")
        return text if keep_nul else text.replace("\x00", "")
    except UnicodeDecodeError:
        return BASE64_PREFIX + base64.b64encode(raw).decode("ascii")
