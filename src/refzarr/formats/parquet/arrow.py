"""numpy <-> Arrow conversions over raw buffers, without pyarrow's pandas machinery.

``pa.array(...)`` and ``Array.to_numpy()`` import pandas on first use (about half a second),
which would dominate opening a reference set and reading one chunk reference; these helpers
build and read the buffers directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["binary_array", "int_array", "int_values", "string_array", "validity"]

_ARROW_INTS = {
    np.dtype(np.int32): pa.int32(),
    np.dtype(np.int64): pa.int64(),
    np.dtype(np.uint64): pa.uint64(),
}
_MAX_BINARY = 2**31 - 1


def int_array(values: npt.NDArray[Any], valid: npt.NDArray[np.bool_] | None = None) -> pa.Array:
    """An Arrow int32/int64/uint64 array of ``values``, null where ``valid`` is False."""
    values = np.ascontiguousarray(values)
    arrow_type = _ARROW_INTS[values.dtype]
    if valid is None or valid.all():
        return pa.Array.from_buffers(arrow_type, values.shape[0], [None, pa.py_buffer(values)])
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    nulls = int(valid.shape[0] - np.count_nonzero(valid))
    return pa.Array.from_buffers(
        arrow_type, values.shape[0], [bitmap, pa.py_buffer(values)], null_count=nulls
    )


def binary_array(values: Sequence[bytes]) -> pa.Array:
    """An Arrow binary array (large_binary past 2 GiB) of ``values``, none null."""
    lengths = np.fromiter((len(v) for v in values), dtype=np.int64, count=len(values))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    large = int(offsets[-1]) > _MAX_BINARY
    arrow_type = pa.large_binary() if large else pa.binary()
    offsets = offsets.astype(np.int64 if large else np.int32)
    data = pa.py_buffer(b"".join(values))
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(offsets), data])


def string_array(values: Sequence[str]) -> pa.Array:
    """An Arrow string array of ``values``, none null."""
    encoded = binary_array([v.encode("utf-8") for v in values])
    return encoded.view(pa.large_string() if encoded.type == pa.large_binary() else pa.string())


def validity(array: pa.Array) -> npt.NDArray[np.bool_]:
    """True where ``array`` holds a value."""
    n = len(array)
    bitmap = array.buffers()[0]
    if bitmap is None or array.null_count == 0:
        return np.ones(n, dtype=bool)
    bits = np.unpackbits(
        np.frombuffer(bitmap, dtype=np.uint8), count=array.offset + n, bitorder="little"
    )
    return bits[array.offset :].astype(bool)


def int_values(array: pa.Array) -> npt.NDArray[Any]:
    """The values of a fixed-width integer array as numpy (null slots hold arbitrary values)."""
    kind = "i" if pa.types.is_signed_integer(array.type) else "u"
    dtype = np.dtype(f"{kind}{array.type.bit_width // 8}")
    n = len(array)
    data = array.buffers()[1]
    if data is None:
        return np.zeros(n, dtype=dtype)
    return np.frombuffer(data, dtype=dtype, count=array.offset + n)[array.offset :]
