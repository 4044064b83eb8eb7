"""A numcodecs codec for integers with padding bits: HDF5's N-bit filter (5) or stored as is.

An HDF5 integer type may use only ``precision`` bits starting at bit ``offset`` of its
``itemsize`` bytes. HDF5 (and h5py) read such values as ordinary integers of that size, sign
extended when signed. The N-bit filter stores only the significant bits, packed (see
`refzarr.codecs.hdf5.bits`); without it the elements are stored whole, padding included. This
codec turns either form into the values h5py returns, so the Zarr array's dtype is h5py's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs.abc import Codec

from refzarr.codecs.hdf5.bits import pack_bits, unpack_bits, unsigned_dtype

__all__ = ["Hdf5NBit"]


class Hdf5NBit(Codec):  # type: ignore[misc]
    """Integers of ``precision`` bits at bit ``offset``, packed (N-bit) or in whole elements.

    Parameters
    ----------
    dtype
        The values' numpy dtype with byte order (h5py's dtype of the dataset, e.g. ``">i2"``);
        also the stored elements' size and byte order.
    precision
        Significant bits per element.
    offset
        Bit position of the lowest significant bit.
    count
        Elements in a (full) chunk, HDF5's ``cd_values[2]``; only needed when ``packed``.
    packed
        True for chunks the N-bit filter packed, False for whole stored elements.
    """

    codec_id = "refzarr_hdf5_nbit"

    def __init__(
        self, dtype: str, precision: int, offset: int = 0, count: int = 0, packed: bool = True
    ) -> None:
        self.dtype = np.dtype(dtype).str
        self.precision = int(precision)
        self.offset = int(offset)
        self.count = int(count)
        self.packed = bool(packed)
        kind, size = np.dtype(self.dtype).kind, np.dtype(self.dtype).itemsize
        if kind not in "iu" or not 0 < self.precision <= 8 * size - self.offset or self.offset < 0:
            raise ValueError(
                f"{self.precision} bits at bit {self.offset} do not fit dtype {self.dtype}"
            )

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration (numcodecs' ``get_codec`` rebuilds it)."""
        return {
            "id": self.codec_id,
            "dtype": self.dtype,
            "precision": self.precision,
            "offset": self.offset,
            "count": self.count,
            "packed": self.packed,
        }

    def _significant(self, buf: Any) -> np.ndarray[Any, Any]:
        """The significant bits of each element, as unsigned 64-bit integers."""
        dtype = np.dtype(self.dtype)
        if self.packed:
            return unpack_bits(buf, self.count, self.precision, 8).astype(np.uint64)
        stored = np.frombuffer(buf, dtype=unsigned_dtype(dtype.itemsize, dtype.byteorder))
        mask = np.uint64((1 << self.precision) - 1)
        return (stored.astype(np.uint64) >> np.uint64(self.offset)) & mask

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The values, sign extended when the dtype is signed, in the dtype's byte order."""
        values = self._significant(buf)
        if np.dtype(self.dtype).kind == "i" and self.precision < 64:
            sign = np.uint64(1 << (self.precision - 1))
            values = (values ^ sign) - sign  # two's complement sign extension, wraps mod 2**64
        result = values.view(np.int64).astype(self.dtype)
        if out is not None:
            np.copyto(np.frombuffer(out, dtype=np.uint8), result.view(np.uint8).reshape(-1))
            return out
        return result

    def encode(self, buf: Any) -> bytes:
        """Values (in ``dtype``) as HDF5 stores them; bits beyond ``precision`` are dropped."""
        dtype = np.dtype(self.dtype)
        values = np.frombuffer(buf, dtype=dtype).astype(np.int64).view(np.uint64)
        significant = values & np.uint64((1 << self.precision) - 1)
        if self.packed:
            return pack_bits(significant, self.precision, 8)
        stored = significant << np.uint64(self.offset)
        return stored.astype(unsigned_dtype(dtype.itemsize, dtype.byteorder)).tobytes()
