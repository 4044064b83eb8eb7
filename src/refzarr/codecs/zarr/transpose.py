"""A numcodecs codec for Zarr v3's ``transpose`` codec: a chunk stored with its axes permuted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy
from numcodecs.registry import register_codec

__all__ = ["ZarrTranspose"]


class ZarrTranspose(Codec):  # type: ignore[misc]
    """Store a chunk of ``shape`` as ``chunk.transpose(order)`` in C order (Zarr v3 ``transpose``).

    Parameters
    ----------
    order
        The permutation: stored axis ``k`` is the chunk's axis ``order[k]``.
    shape
        The chunk's shape before the permutation.
    dtype
        The numpy dtype of the chunk's values (a string, ``"<i4"``).
    """

    codec_id = "refzarr.zarr_transpose"

    def __init__(self, order: Sequence[int], shape: Sequence[int], dtype: str) -> None:
        self.order = tuple(int(k) for k in order)
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        if sorted(self.order) != list(range(len(self.shape))):
            raise ValueError(f"order {self.order} is no permutation of the axes of {self.shape}")

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration (numcodecs' ``get_codec`` rebuilds it)."""
        return {
            "id": self.codec_id,
            "order": list(self.order),
            "shape": list(self.shape),
            "dtype": self.dtype.str,
        }

    def encode(self, buf: Any) -> Any:
        """The chunk with its axes permuted, C-contiguous."""
        values = _values(buf, self.dtype).reshape(self.shape)
        return np.ascontiguousarray(values.transpose(self.order))

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The chunk in its own axis order, C-contiguous."""
        stored = tuple(self.shape[k] for k in self.order)
        values = _values(buf, self.dtype).reshape(stored)
        result = np.ascontiguousarray(values.transpose(np.argsort(self.order)))
        return result if out is None else ndarray_copy(result, out)


def _values(buf: Any, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """``buf`` as a flat array of ``dtype`` (an object array stays one)."""
    if isinstance(buf, np.ndarray) and buf.dtype == object:
        flat: np.ndarray[Any, Any] = buf.reshape(-1)
        return flat
    values: np.ndarray[Any, Any] = ensure_contiguous_ndarray(buf).reshape(-1).view(dtype)
    return values


register_codec(ZarrTranspose)
