"""Decoding one stored chunk into a numpy array of its stored shape with the array's codecs,
and what a chunk never written reads as (shared by the reader, combine and the CLI)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numcodecs
import numpy as np
from numcodecs.zlib import Zlib

from refzarr.codecs.bounded import TooLargeError, bounded_decoder, chunk_bound
from refzarr.codecs.inflate import FastInflate
from refzarr.codecs.unshuffle import faster
from refzarr.errors import ChunkDecodeError, ChunkFetchError
from refzarr.model import ArrayMeta

__all__ = [
    "MAX_CHUNK_BYTES",
    "ChunkDecoder",
    "check_chunk_bytes",
    "check_stored_bytes",
    "decode_whole",
    "max_chunk_bytes",
    "missing_value",
    "set_max_chunk_bytes",
]

MAX_CHUNK_BYTES = 2**31
"""Most bytes one chunk may decode to (2 GiB) unless `set_max_chunk_bytes` raised it: a
reference set can declare ``chunks [2**40]`` and a few stored bytes."""

_limits = {"chunk": MAX_CHUNK_BYTES}


def set_max_chunk_bytes(nbytes: int) -> None:
    """Allow chunks decoding to up to ``nbytes`` bytes (process-wide; trusted sets only).

    Raises
    ------
    ValueError
        When ``nbytes`` is not a positive integer.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        raise ValueError(f"the limit must be a positive integer, got {nbytes!r}")
    _limits["chunk"] = nbytes


def check_stored_bytes(length: int, key: str | Callable[[], str], url: str) -> None:
    """Raise ChunkFetchError, before anything is fetched, when a chunk's stored range is
    longer than the per-chunk limit (no chunk within the limit is stored in more bytes)."""
    if length > _limits["chunk"]:
        raise ChunkFetchError(
            f"{_text(key)}: its stored range in {url} is {length:,} bytes long, over the limit "
            f"of {_limits['chunk']:,} bytes per chunk: not fetched (raise it with "
            "refzarr.codecs.chunk.set_max_chunk_bytes for a trusted reference set)"
        )


def max_chunk_bytes() -> int:
    """The current limit (`MAX_CHUNK_BYTES` unless `set_max_chunk_bytes` changed it)."""
    return _limits["chunk"]


def check_chunk_bytes(
    chunks: tuple[int, ...], dtype: np.dtype[Any], key: str | Callable[[], str]
) -> None:
    """Raise ChunkDecodeError, before anything is allocated, when a chunk of ``chunks``
    values of ``dtype`` decodes to more bytes than the limit."""
    nbytes = math.prod(chunks) * dtype.itemsize
    if nbytes > _limits["chunk"]:
        raise ChunkDecodeError(
            f"{_text(key)}: a chunk of {chunks} {dtype} decodes to {nbytes:,} bytes, over the "
            f"limit of {_limits['chunk']:,} bytes per chunk (raise it with "
            "refzarr.codecs.chunk.set_max_chunk_bytes for a trusted reference set)"
        )


class ChunkDecoder:
    """Decodes stored chunks of one array (codecs applied last-first, as Zarr v2 does).

    Parameters
    ----------
    meta
        The array's metadata: codecs, chunk shape, dtype and memory order.
    name
        The array's path, named in errors.
    """

    def __init__(self, meta: ArrayMeta, name: str) -> None:
        self.name = name
        self.dtype = meta.dtype
        self.chunks = meta.chunks
        self.order = meta.order
        self.count = math.prod(meta.chunks)
        try:
            self.codecs = [_faster(numcodecs.get_codec(dict(config))) for config in meta.codecs]
        except (ValueError, KeyError, TypeError) as exc:
            ids = [config.get("id") for config in meta.codecs]
            raise ChunkDecodeError(
                f"{name}: no decoder for codecs {ids} ({exc}); install the package that "
                "provides it (refzarr[codecs] for imagecodecs' HDF5 filters)"
            ) from exc
        self.plain = self.dtype.kind != "O"
        self.steps = self.codecs[::-1]
        self.bounded = [bounded_decoder(codec) for codec in self.steps]
        # a zlib stream decoded first inflates to at most the chunk's bytes (a fixed-size dtype)
        self.inflate = (
            self.steps[0]
            if self.steps and isinstance(self.steps[0], FastInflate) and self.plain
            else None
        )

    def decode(
        self,
        data: bytes | memoryview,
        key: str | Callable[[], str],
        shape: tuple[int, ...] | None = None,
    ) -> np.ndarray[Any, Any]:
        """The chunk stored as ``data``, shaped like a whole chunk.

        Parameters
        ----------
        data
            The stored (encoded) bytes.
        key
            The chunk's key, named in errors (or a function giving it: built only then).
        shape
            The shape the chunk was encoded with (`ArrayMeta.stored_chunk_shape`) when the
            chunk grid is irregular; None for the array's chunk shape.

        Raises
        ------
        ChunkDecodeError
            When a codec fails or the decoded size is not the chunk's (names the key), or
            when the chunk would decode to more than `max_chunk_bytes` (checked first).
        """
        chunks, count = (self.chunks, self.count) if shape is None else (shape, math.prod(shape))
        if count * self.dtype.itemsize > _limits["chunk"]:
            check_chunk_bytes(chunks, self.dtype, key)
        buffer: Any = data
        nbytes = count * self.dtype.itemsize
        bound = chunk_bound(nbytes, _limits["chunk"], self.plain)
        try:
            first = 0
            if self.inflate is not None:
                buffer = self.inflate.decode(buffer, size=nbytes, bound=bound)
                first = 1
            for codec, bounded in zip(self.steps[first:], self.bounded[first:], strict=True):
                buffer = codec.decode(buffer) if bounded is None else bounded(codec, buffer, bound)
        except TooLargeError as exc:
            raise ChunkDecodeError(
                f"{_text(key)}: a chunk of {chunks} {self.dtype} is {nbytes:,} bytes, but {exc}"
            ) from None
        except Exception as exc:  # any codec failure means the bytes are not this chunk
            reason = f"{type(exc).__name__}: {exc}"
            raise ChunkDecodeError(f"{_text(key)}: decoding failed: {reason}") from exc
        if type(buffer) is bytes and len(buffer) == count * self.dtype.itemsize and self.plain:
            values = np.frombuffer(buffer, dtype=self.dtype)  # the common case, checks done
        elif isinstance(buffer, np.ndarray) and buffer.dtype == object:
            values = buffer
        else:
            if isinstance(buffer, np.ndarray) and buffer.dtype.kind in "Mm":
                # numcodecs' astype decodes datetimes to an array the buffer protocol refuses
                buffer = buffer.reshape(-1).view(np.uint8)
            raw = np.frombuffer(memoryview(buffer).cast("B"), dtype=np.uint8)
            if raw.size != count * self.dtype.itemsize:
                raise ChunkDecodeError(
                    f"{_text(key)}: decoded to {raw.size} bytes, a chunk of {chunks} "
                    f"{self.dtype} needs {count * self.dtype.itemsize}"
                )
            values = raw.view(self.dtype)
        if values.size != count:
            raise ChunkDecodeError(
                f"{_text(key)}: decoded to {values.size} values, a chunk holds {count}"
            )
        return values.reshape(chunks, order=self.order)


def _faster(codec: Any) -> Any:
    """``codec``, or a faster decoder doing exactly what its ``decode`` does."""
    return FastInflate(codec) if type(codec) is Zlib else faster(codec)


def _text(key: str | Callable[[], str]) -> str:
    return key if isinstance(key, str) else key()


def missing_value(meta: ArrayMeta) -> Any:
    """What a chunk never written holds: the fill value; with none, what zarr-python reads
    for a Zarr v2 ``fill_value: null``: zeros, NaT for datetimes and timedeltas, and for
    object arrays of strings or bytes the empty value of their codec."""
    if meta.fill_value is not None:
        return meta.fill_value
    if meta.dtype.kind in "Mm":
        return np.array("NaT", dtype=meta.dtype)[()]
    if meta.dtype.kind == "O":
        ids = {codec.get("id") for codec in meta.codecs}
        return b"" if "vlen-bytes" in ids else "" if "vlen-utf8" in ids else None
    return np.zeros((), dtype=meta.dtype)


def decode_whole(
    meta: ArrayMeta, stored: Sequence[bytes | memoryview | None], name: str
) -> np.ndarray[Any, Any]:
    """The whole value of a (small) array from the stored bytes of each of its chunks.

    Parameters
    ----------
    meta
        The array's metadata (regular or rectilinear grid).
    stored
        One entry per chunk in C order of the chunk grid: its stored bytes, or None for a
        chunk never written (read as `missing_value`).
    name
        The array's path, named in errors.

    Raises
    ------
    ChunkDecodeError
        When a chunk does not decode (names its key).
    """
    if _raw_and_complete_1d(meta, stored):  # the usual coordinate: one frombuffer
        joined = b"".join(stored)  # type: ignore[arg-type]  # every chunk is present
        if len(joined) == len(stored) * meta.chunks[0] * meta.dtype.itemsize:
            return np.frombuffer(joined, dtype=meta.dtype, count=meta.shape[0]).copy()
    out = np.empty(meta.shape, dtype=meta.dtype)
    bounds = [meta.chunk_bounds(axis) for axis in range(meta.ndim)]
    grid = meta.grid_shape
    fill = missing_value(meta)
    decoder = ChunkDecoder(meta, name)
    for number, data in enumerate(stored):
        index = tuple(int(i) for i in np.unravel_index(number, grid)) if grid else ()
        region = tuple(slice(b[i], b[i + 1]) for b, i in zip(bounds, index, strict=True))
        if data is None:
            out[region] = fill
            continue
        key = f"{name}/{'.'.join(map(str, index)) or '0'}"
        chunk = decoder.decode(data, key, meta.stored_chunk_shape(index))
        out[region] = chunk[tuple(slice(0, r.stop - r.start) for r in region)]
    return out


def _raw_and_complete_1d(meta: ArrayMeta, stored: Sequence[bytes | memoryview | None]) -> bool:
    """A 1-D array on a regular grid without codecs, of fixed-size values, every chunk
    written: its chunks' bytes in order are its values (then padding)."""
    return (
        meta.ndim == 1
        and not meta.codecs
        and meta.rectilinear is None
        and meta.dtype.kind not in "OV"
        and None not in stored
    )
