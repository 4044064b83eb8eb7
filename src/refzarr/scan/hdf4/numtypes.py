"""HDF4 number types (``DFNT_*``) as numpy dtypes in their stored byte order: big-endian
unless the type carries the little-endian flag (``DFNT_LITEND``) or its number-type record
says "PC" byte order."""

from __future__ import annotations

from typing import Any

import numpy as np

from refzarr.errors import UnsupportedFeatureError

__all__ = ["DFNT_CHAR8", "DFNT_LITEND", "nt_record_dtype", "number_dtype"]

DFNT_LITEND = 0x4000
DFNT_NATIVE = 0x1000
DFNT_CHAR8, DFNT_UCHAR8 = 4, 3
_KINDS = {
    3: "u1",
    4: "S1",
    5: "f4",
    6: "f8",
    20: "i1",
    21: "u1",
    22: "i2",
    23: "u2",
    24: "i4",
    25: "u4",
    26: "i8",
    27: "u8",
}
DFNTF_IEEE, DFNTF_PC = 1, 4
"""Number-type record classes: big-endian (IEEE / Motorola) and little-endian (PC / Intel)."""


def number_dtype(code: int, *, little: bool = False, where: str = "") -> np.dtype[Any]:
    """The numpy dtype of HDF4 number type ``code`` (flags included)."""
    base = code & 0xFFF
    kind = _KINDS.get(base)
    if kind is None:
        raise UnsupportedFeatureError(f"{where}: HDF4 number type {code} is not supported")
    if kind.endswith("1"):  # one byte: no byte order
        return np.dtype(kind)
    order = "<" if (little or code & DFNT_LITEND) else ">"
    return np.dtype(order + kind)


def nt_record_dtype(record: bytes, where: str) -> np.dtype[Any]:
    """The dtype a 4-byte number-type record (tag 106: version, type, bits, class) gives."""
    if len(record) < 4:
        raise UnsupportedFeatureError(f"{where}: number-type record of {len(record)} bytes")
    code, bits, klass = record[1], record[2], record[3]
    if klass not in (0, DFNTF_IEEE, DFNTF_PC):
        raise UnsupportedFeatureError(
            f"{where}: data in the native format of another machine (number-type class "
            f"{klass}) is not supported"
        )
    dtype = number_dtype(code, little=klass == DFNTF_PC, where=where)
    if bits and bits != 8 * dtype.itemsize:
        raise UnsupportedFeatureError(f"{where}: {bits}-bit values of type {code}")
    return dtype
