"""A numcodecs codec for HDF5's scale-offset filter (filter 6), which no other library decodes.

A chunk starts with a 21-byte header: ``minbits`` (4 bytes, little-endian), the byte size of the
minimum that follows (1 byte) and the minimum itself (little-endian, zero padded). Then each
element's ``minbits`` low bits, packed (see `refzarr.codecs.hdf5.bits`). Integers decode as
``minimum + packed``; floats (D-scaling) as ``packed / 10**D + minimum`` in the float's own
precision; with a fill value defined, a packed value of all ones stands for the fill value. When
``minbits`` is the full element width the elements follow the header as they are. Either way the
filter works in the writer's memory byte order (little-endian, assumed) and the decoded chunk is
in the dataset's byte order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs.abc import Codec

from refzarr.codecs.hdf5.bits import pack_bits, unpack_bits, unsigned_dtype

__all__ = ["Hdf5ScaleOffset"]

HEADER = 21
SO_FLOAT_DSCALE, SO_INT = 0, 2


class Hdf5ScaleOffset(Codec):  # type: ignore[misc]
    """HDF5 scale-offset: integers with fixed or automatic minimum bits, floats with D-scaling.

    Parameters
    ----------
    dtype
        The dataset's element type as a numpy dtype string with byte order (``">i4"``, ``"<f8"``).
    count
        Elements in a (full) chunk: HDF5's ``cd_values[2]``.
    scale_type
        0 float D-scaling, 2 integer (HDF5's ``H5Z_SO_FLOAT_DSCALE`` / ``H5Z_SO_INT``).
    scale_factor
        Decimal digits kept (floats) or fixed minimum bits, 0 for automatic (integers).
    fill
        The fill value's bit pattern as an unsigned integer, or None when the dataset defines
        no fill value.
    """

    codec_id = "refzarr_hdf5_scaleoffset"

    def __init__(
        self,
        dtype: str,
        count: int,
        scale_type: int = SO_INT,
        scale_factor: int = 0,
        fill: int | None = None,
    ) -> None:
        self.dtype = np.dtype(dtype).str
        self.count = int(count)
        self.scale_type = int(scale_type)
        self.scale_factor = int(scale_factor)
        self.fill = None if fill is None else int(fill)
        kind = np.dtype(self.dtype).kind
        if kind not in "iuf" or (kind == "f") != (self.scale_type == SO_FLOAT_DSCALE):
            raise ValueError(f"scale type {scale_type} does not fit dtype {self.dtype}")
        if self.scale_type not in (SO_FLOAT_DSCALE, SO_INT):
            raise ValueError(f"scale-offset scale type {scale_type} is not supported")

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration (numcodecs' ``get_codec`` rebuilds it)."""
        return {
            "id": self.codec_id,
            "dtype": self.dtype,
            "count": self.count,
            "scale_type": self.scale_type,
            "scale_factor": self.scale_factor,
            "fill": self.fill,
        }

    @property
    def _native(self) -> np.dtype[Any]:
        return np.dtype(self.dtype).newbyteorder("<")

    def _fill_value(self) -> Any:
        size = self._native.itemsize
        return np.frombuffer(int(self.fill or 0).to_bytes(size, "little"), self._native)[0]

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The chunk's elements in the dataset's byte order."""
        data = memoryview(buf).cast("B")
        native = self._native
        size, bits = native.itemsize, 8 * native.itemsize
        minbits = int.from_bytes(data[:4], "little")
        if minbits > bits:
            raise ValueError(f"scale-offset chunk header says {minbits} bits for {self.dtype}")
        minval = int.from_bytes(data[5 : 5 + min(8, data[4])], "little")
        if minbits == bits:
            values = np.frombuffer(data[HEADER : HEADER + self.count * size], dtype=native)
        else:
            packed = (
                unpack_bits(data[HEADER:], self.count, minbits, size)
                if minbits
                else np.zeros(self.count, unsigned_dtype(size))
            )
            values = self._restore(packed, minbits, minval)
        result = values.astype(self.dtype)
        if out is not None:
            np.copyto(np.frombuffer(out, dtype=np.uint8), result.view(np.uint8).reshape(-1))
            return out
        return result

    def _restore(self, packed: np.ndarray[Any, Any], minbits: int, minval: int) -> Any:
        native = self._native
        all_ones = (1 << minbits) - 1
        if native.kind == "f":
            size = native.itemsize
            minimum = np.frombuffer(minval.to_bytes(8, "little")[:size], dtype=native)[0]
            scale = np.power(native.type(10.0), native.type(self.scale_factor))
            signed = packed.view(f"<i{size}")
            values = signed.astype(native) / scale + minimum
        else:
            values = (packed + packed.dtype.type(minval & ((1 << 8 * native.itemsize) - 1))).view(
                native
            )
        if self.fill is not None:
            values = np.where(packed == all_ones, self._fill_value(), values).astype(native)
        return values

    def encode(self, buf: Any) -> bytes:
        """Integers only: a chunk this codec and HDF5 decode to ``buf``'s values."""
        native = self._native
        if native.kind == "f":
            raise NotImplementedError("refzarr does not encode scale-offset floats")
        values = np.frombuffer(buf, dtype=self.dtype).astype(native)
        size, bits = native.itemsize, 8 * native.itemsize
        is_fill = values == self._fill_value() if self.fill is not None else None
        kept = values if is_fill is None else values[~is_fill]
        low = kept.min() if kept.size else native.type(0)
        unsigned = unsigned_dtype(size)
        offsets = values.view(unsigned) - unsigned.type(low.view(unsigned))
        minbits = self._minbits(offsets if is_fill is None else offsets[~is_fill], is_fill)
        if minbits is None:  # a span too wide: HDF5 stores the elements, and no minimum
            minbits, low = bits, native.type(0)
        header = bytearray(HEADER)
        header[:4] = minbits.to_bytes(4, "little")
        header[4] = 8
        header[5:13] = (int(low) % (1 << 64)).to_bytes(8, "little")
        if minbits == bits:
            return bytes(header) + values.tobytes()
        if is_fill is not None:
            offsets = np.where(is_fill, unsigned.type((1 << minbits) - 1), offsets)
        return bytes(header) + (pack_bits(offsets, minbits, size) if minbits else b"")

    def _minbits(self, offsets: np.ndarray[Any, Any], is_fill: Any) -> int | None:
        """HDF5's minimum bits for these offsets from the minimum; None when too wide."""
        bits = 8 * self._native.itemsize
        if self.scale_factor > 0:
            return self.scale_factor
        span = int(offsets.max()) + 1 if offsets.size else 1
        if span > (1 << bits) - 2:
            return None
        return min(bits, (span + (1 if is_fill is not None else 0) - 1).bit_length())
