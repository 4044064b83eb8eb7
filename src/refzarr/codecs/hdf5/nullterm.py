"""Fixed-length HDF5 strings padded ``H5T_STR_NULLTERM``: each value ends at its first NUL.

HDF5 (and h5py) read such a string up to its first NUL byte; the bytes stored after it are not
part of the value (``b"swe\\x00et"`` reads ``b"swe"``). numpy's ``S<n>`` only drops trailing
NULs, so this codec, applied last when decoding, zeroes every byte after a value's first NUL.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray
from numcodecs.registry import register_codec

__all__ = ["Hdf5NullTerm"]


class Hdf5NullTerm(Codec):  # type: ignore[misc]
    """Zero the bytes after the first NUL of each ``itemsize``-byte string.

    Parameters
    ----------
    itemsize
        Bytes per string (the fixed length of the HDF5 string type).
    """

    codec_id = "refzarr_hdf5_nullterm"

    def __init__(self, itemsize: int) -> None:
        self.itemsize = int(itemsize)
        if self.itemsize < 1:
            raise ValueError(f"itemsize must be >= 1, got {itemsize}")

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration (numcodecs' ``get_codec`` rebuilds it)."""
        return {"id": self.codec_id, "itemsize": self.itemsize}

    def encode(self, buf: Any) -> Any:
        """The values unchanged (what HDF5 stores of a string ending at its first NUL)."""
        return self.decode(buf)

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The strings with everything after each one's first NUL set to NUL."""
        data = ensure_contiguous_ndarray(buf).view(np.uint8).reshape(-1)
        rows = data.reshape(-1, self.itemsize).copy()
        ended = np.cumsum(rows == 0, axis=1) > 0
        rows[ended] = 0
        result = rows.reshape(-1)
        if out is None:
            return result
        np.copyto(ensure_contiguous_ndarray(out).view(np.uint8).reshape(-1), result)
        return out


register_codec(Hdf5NullTerm)
