"""Vectorised bit packing as HDF5's N-bit and scale-offset filters do it.

Both filters write each element's significant bits, most significant first, into one continuous
bit stream that fills every byte from its high bit down; elements follow each other with no
alignment. These helpers move between that stream and unsigned integers with numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["pack_bits", "unpack_bits", "unsigned_dtype"]


def unsigned_dtype(size: int, order: str = "<") -> np.dtype[Any]:
    """The unsigned integer dtype of ``size`` bytes in byte order ``order`` (``<`` or ``>``)."""
    return np.dtype(f"{order}u{size}")


def unpack_bits(stream: Any, count: int, width: int, size: int) -> np.ndarray[Any, Any]:
    """``count`` unsigned values of ``width`` bits read from ``stream``, as native ``u{size}``.

    Parameters
    ----------
    stream
        The packed bytes (anything exposing the buffer protocol).
    count
        How many values to read.
    width
        Bits per value, 1 to ``8 * size``.
    size
        Byte size of the integers returned.
    """
    data = np.frombuffer(stream, dtype=np.uint8)
    needed = (count * width + 7) // 8
    if data.size < needed:
        raise ValueError(
            f"packed stream of {data.size} bytes is shorter than {count} values of {width} bits"
        )
    bits = np.unpackbits(data[:needed])[: count * width].reshape(count, width)
    wide = np.zeros((count, 8 * size), dtype=np.uint8)
    wide[:, 8 * size - width :] = bits
    packed = np.packbits(wide, axis=1)  # (count, size) big-endian bytes
    return packed.view(unsigned_dtype(size, ">")).reshape(count).astype(unsigned_dtype(size, "="))


def pack_bits(values: np.ndarray[Any, Any], width: int, size: int) -> bytes:
    """The low ``width`` bits of each unsigned ``values`` element as one packed bit stream."""
    big = np.ascontiguousarray(values, dtype=unsigned_dtype(size, ">")).reshape(-1)
    bits = np.unpackbits(big.view(np.uint8).reshape(-1, size), axis=1)[:, 8 * size - width :]
    stream = np.packbits(bits.reshape(-1)).tobytes()
    # HDF5 always ends on a byte it has started: one more when the bits end on a boundary
    return stream + b"\0" if (values.size * width) % 8 == 0 else stream
