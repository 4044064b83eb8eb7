"""A numcodecs codec for Zarr v3's ``sharding_indexed`` codec: one shard, decoded whole.

A sharded Zarr v3 array stores a grid of inner chunks per object (the shard) followed (or
preceded) by an index of ``(offset, nbytes)`` pairs, one per inner chunk. Referencing the
array shard by shard keeps the index inside the referenced bytes, so the shard is a chunk like
any other and this codec turns its bytes into the shard's values: each inner chunk decoded
with the inner codecs (numcodecs configs), an inner chunk never written as the fill value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numcodecs
import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy
from numcodecs.registry import register_codec

from refzarr.model.dtypes import decode_fill_value, encode_fill_value

__all__ = ["ZarrSharding"]

EMPTY = np.uint64(2**64 - 1)
"""Offset and byte count of an inner chunk never written."""


class ZarrSharding(Codec):  # type: ignore[misc]
    """One shard of a Zarr v3 array with the ``sharding_indexed`` codec.

    Parameters
    ----------
    shard_shape
        The shard's shape (the array's chunk shape).
    chunk_shape
        The inner chunks' shape (divides ``shard_shape``).
    dtype
        The numpy dtype of the values (a string, ``"<i2"``; ``"|O"`` for strings).
    fill_value
        What an inner chunk never written holds, in Zarr v2's JSON encoding for ``dtype``.
    codecs
        numcodecs configs of the inner chunks' codecs, in encoding order.
    order
        Memory order of a decoded inner chunk (``"F"`` for a reversing ``transpose``).
    index_codecs
        numcodecs configs applied to the index bytes (``crc32c``), in encoding order.
    index_dtype
        The index's integer type with its byte order (``"<u8"``).
    index_location
        ``"end"`` or ``"start"``.
    """

    codec_id = "refzarr.zarr_sharding"

    def __init__(
        self,
        shard_shape: Sequence[int],
        chunk_shape: Sequence[int],
        dtype: str,
        fill_value: Any = None,
        codecs: Sequence[Mapping[str, Any]] = (),
        order: Literal["C", "F"] = "C",
        index_codecs: Sequence[Mapping[str, Any]] = (),
        index_dtype: str = "<u8",
        index_location: Literal["start", "end"] = "end",
    ) -> None:
        self.shard_shape = tuple(int(n) for n in shard_shape)
        self.chunk_shape = tuple(int(n) for n in chunk_shape)
        if len(self.chunk_shape) != len(self.shard_shape) or any(
            s % c for s, c in zip(self.shard_shape, self.chunk_shape, strict=True)
        ):
            raise ValueError(
                f"inner chunks {self.chunk_shape} do not divide the shard {self.shard_shape}"
            )
        self.dtype = np.dtype(dtype)
        self.fill_json = fill_value
        self.fill = decode_fill_value(fill_value, self.dtype)
        self.codec_configs = [dict(c) for c in codecs]
        self.inner = [numcodecs.get_codec(dict(c)) for c in codecs]
        self.order: Literal["C", "F"] = order
        self.index_configs = [dict(c) for c in index_codecs]
        self.index_chain = [numcodecs.get_codec(dict(c)) for c in index_codecs]
        self.index_dtype = np.dtype(index_dtype)
        if index_location not in ("start", "end"):
            raise ValueError(f"index_location must be 'start' or 'end', not {index_location!r}")
        self.index_location: Literal["start", "end"] = index_location
        self.grid = tuple(s // c for s, c in zip(self.shard_shape, self.chunk_shape, strict=True))
        self.index_bytes = len(_encode(self.index_chain, bytes(16 * math.prod(self.grid))))

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration (numcodecs' ``get_codec`` rebuilds it)."""
        return {
            "id": self.codec_id,
            "shard_shape": list(self.shard_shape),
            "chunk_shape": list(self.chunk_shape),
            "dtype": self.dtype.str,
            "fill_value": self.fill_json,
            "codecs": self.codec_configs,
            "order": self.order,
            "index_codecs": self.index_configs,
            "index_dtype": self.index_dtype.str,
            "index_location": self.index_location,
        }

    # -- decoding -----------------------------------------------------------------------------

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The shard's values, C-contiguous, shaped like the shard."""
        data = ensure_contiguous_ndarray(buf).reshape(-1).view(np.uint8)
        index = self.read_index(data)
        shard = self.empty_shard()
        for k, position in enumerate(np.ndindex(*self.grid)):
            offset, nbytes = int(index[k, 0]), int(index[k, 1])
            if offset == EMPTY and nbytes == EMPTY:
                continue
            if offset + nbytes > data.size:
                raise ValueError(
                    f"inner chunk {position} at bytes {offset}..{offset + nbytes} lies past the "
                    f"shard's end ({data.size} bytes)"
                )
            region = tuple(
                slice(p * c, (p + 1) * c) for p, c in zip(position, self.chunk_shape, strict=True)
            )
            shard[region] = self.decode_inner(data[offset : offset + nbytes])
        return shard if out is None else ndarray_copy(shard, out)

    def read_index(self, data: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The ``(offset, nbytes)`` pairs, one row per inner chunk in C order."""
        if data.size < self.index_bytes:
            raise ValueError(
                f"a shard of {data.size} bytes cannot hold its index of {self.index_bytes} bytes"
            )
        if self.index_location == "end":
            raw = data[data.size - self.index_bytes :]
        else:
            raw = data[: self.index_bytes]
        decoded = _decode(self.index_chain, raw.tobytes(), self.index_bytes)
        index = np.frombuffer(decoded, dtype=self.index_dtype).astype(np.uint64)
        return index.reshape(-1, 2)

    def empty_shard(self) -> np.ndarray[Any, Any]:
        """A shard of fill values (zeros, or None for objects, when there is no fill value)."""
        if self.fill is None:
            return np.zeros(self.shard_shape, dtype=self.dtype)
        return np.full(self.shard_shape, self.fill, dtype=self.dtype)

    def decode_inner(self, data: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """One inner chunk's values, shaped like an inner chunk."""
        plain = self.dtype.kind != "O"
        nbytes = math.prod(self.chunk_shape) * self.dtype.itemsize if plain else None
        result = _decode(self.inner, data, nbytes)
        if isinstance(result, np.ndarray) and result.dtype == object:
            values = result.reshape(-1)
        else:
            values = ensure_contiguous_ndarray(result).reshape(-1).view(self.dtype)
        if values.size != math.prod(self.chunk_shape):
            raise ValueError(
                f"an inner chunk decoded to {values.size} values, not {math.prod(self.chunk_shape)}"
            )
        return values.reshape(self.chunk_shape, order=self.order)

    # -- encoding -----------------------------------------------------------------------------

    def encode(self, buf: Any) -> bytes:
        """The shard as Zarr v3 stores it: every inner chunk encoded, then the index."""
        if isinstance(buf, np.ndarray) and buf.dtype == object:
            values = buf.reshape(self.shard_shape)
        else:
            flat = ensure_contiguous_ndarray(buf).reshape(-1).view(self.dtype)
            values = flat.reshape(self.shard_shape)
        index = np.zeros((math.prod(self.grid), 2), dtype=self.index_dtype)
        parts: list[bytes] = []
        start = self.index_bytes if self.index_location == "start" else 0
        for k, position in enumerate(np.ndindex(*self.grid)):
            region = tuple(
                slice(p * c, (p + 1) * c) for p, c in zip(position, self.chunk_shape, strict=True)
            )
            inner = np.ascontiguousarray(values[region]) if self.order == "C" else values[region]
            layout = inner if self.order == "C" else np.asfortranarray(inner).ravel(order="F")
            encoded = bytes(ensure_contiguous_ndarray(_encode(self.inner, layout)))
            index[k] = (start, len(encoded))
            start += len(encoded)
            parts.append(encoded)
        encoded_index = bytes(ensure_contiguous_ndarray(_encode(self.index_chain, index.tobytes())))
        if self.index_location == "start":
            return encoded_index + b"".join(parts)
        return b"".join(parts) + encoded_index


def _decode(chain: Sequence[Codec], data: Any, nbytes: int | None) -> Any:
    """``data`` decoded by ``chain``, its compressors' output bounded as a chunk of
    ``nbytes`` bytes bounds it (None: objects, the per-chunk limit) (`refzarr.codecs.bounded`:
    an inner chunk of a few bytes may inflate to gigabytes)."""
    from refzarr.codecs.bounded import bounded_decoder, chunk_bound
    from refzarr.codecs.chunk import max_chunk_bytes

    limit = max_chunk_bytes()
    bound = limit if nbytes is None else chunk_bound(nbytes, limit, plain=True)
    for codec in reversed(chain):
        bounded = bounded_decoder(codec)
        data = codec.decode(data) if bounded is None else bounded(codec, data, bound)
    return data


def _encode(chain: Sequence[Codec], data: Any) -> Any:
    for codec in chain:
        data = codec.encode(data)
    return data


def fill_json(value: Any, dtype: np.dtype[Any]) -> Any:
    """``value`` in the JSON encoding `ZarrSharding` takes for ``dtype``."""
    return encode_fill_value(value, dtype)


register_codec(ZarrSharding)
