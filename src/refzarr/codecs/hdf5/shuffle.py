"""HDF5's shuffle filter (2) for any buffer length: whole elements shuffled, left-over bytes kept.

HDF5 shuffles the ``n // elementsize`` whole elements of a buffer and leaves the
``n % elementsize`` bytes after them in place. numcodecs' ``shuffle`` rejects such buffers, and
they occur whenever an earlier filter changed the length: netCDF-C writes fletcher32 first, so
an 8-byte variable's shuffled buffer is its elements plus the 4-byte checksum.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray
from numcodecs.registry import register_codec

__all__ = ["Hdf5Shuffle"]


class Hdf5Shuffle(Codec):  # type: ignore[misc]
    """Byte shuffle of whole ``elementsize``-byte elements; trailing bytes left as they are.

    Parameters
    ----------
    elementsize
        Bytes per element (HDF5's ``cd_values[0]``).
    """

    codec_id = "refzarr_hdf5_shuffle"

    def __init__(self, elementsize: int) -> None:
        self.elementsize = int(elementsize)
        if self.elementsize < 1:
            raise ValueError(f"elementsize must be >= 1, got {elementsize}")

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration (numcodecs' ``get_codec`` rebuilds it)."""
        return {"id": self.codec_id, "elementsize": self.elementsize}

    def encode(self, buf: Any) -> Any:
        """The bytes as HDF5's shuffle filter stores them."""
        return self._apply(buf, planes_first=True)

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The bytes as they were before HDF5's shuffle filter."""
        result = self._apply(buf, planes_first=False)
        if out is None:
            return result
        np.copyto(ensure_contiguous_ndarray(out).view(np.uint8).reshape(-1), result)
        return out

    def _apply(self, buf: Any, *, planes_first: bool) -> np.ndarray[Any, Any]:
        data = ensure_contiguous_ndarray(buf).view(np.uint8).reshape(-1)
        size = self.elementsize
        whole = data.size - data.size % size
        result: np.ndarray[Any, Any] = data.copy()
        if size > 1 and whole:
            shape = (-1, size) if planes_first else (size, -1)
            result[:whole] = data[:whole].reshape(shape).T.reshape(-1)
        return result


register_codec(Hdf5Shuffle)
