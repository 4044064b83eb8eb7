"""Decoding one stored chunk with its array's codecs, at its stored shape (rectilinear grids
included), and the value a missing chunk reads as."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from refzarr.errors import ChunkDecodeError
from refzarr.model import ArrayMeta

__all__ = ["decode_chunk", "fill_of"]


def decode_chunk(
    meta: ArrayMeta, data: bytes | memoryview, index: tuple[int, ...], name: str
) -> np.ndarray[Any, Any]:
    """Chunk ``index`` of an array stored as ``data``, shaped like its stored chunk.

    Raises
    ------
    ChunkDecodeError
        When a codec fails or the bytes are not one chunk's worth (names the chunk).
    """
    key = f"{name}/{'.'.join(map(str, index)) or '0'}"
    shape = meta.stored_chunk_shape(index)
    buffer: Any = data
    try:
        for codec in reversed(_codecs(meta.codecs)):
            buffer = codec.decode(buffer)
    except Exception as exc:  # any codec failure means the bytes are not this chunk
        raise ChunkDecodeError(f"{key}: decoding failed: {type(exc).__name__}: {exc}") from exc
    if isinstance(buffer, np.ndarray) and buffer.dtype == object:
        values = buffer
    else:
        raw = np.frombuffer(memoryview(buffer).cast("B"), dtype=np.uint8)
        if raw.size != int(np.prod(shape)) * meta.dtype.itemsize:
            raise ChunkDecodeError(
                f"{key}: decoded to {raw.size} bytes, a chunk of {shape} {meta.dtype} "
                f"needs {int(np.prod(shape)) * meta.dtype.itemsize}"
            )
        values = raw.view(meta.dtype)
    return values.reshape(shape, order=meta.order)


@lru_cache(maxsize=64)
def _codecs(configs: tuple[Any, ...]) -> tuple[Any, ...]:
    import numcodecs

    try:
        return tuple(numcodecs.get_codec(dict(config)) for config in configs)
    except (ValueError, KeyError, TypeError) as exc:
        ids = [config.get("id") for config in configs]
        raise ChunkDecodeError(
            f"no decoder for codecs {ids} ({exc}); install the package that provides it "
            "(refzarr[codecs] for imagecodecs' HDF5 filters)"
        ) from exc


def fill_of(meta: ArrayMeta) -> Any:
    """What a missing chunk reads as: the fill value, else zeros (Zarr v2), or for object
    arrays of strings or bytes their codec's empty value."""
    if meta.fill_value is not None:
        return meta.fill_value
    if meta.dtype.kind == "O":
        ids = {codec.get("id") for codec in meta.codecs}
        return b"" if "vlen-bytes" in ids else "" if "vlen-utf8" in ids else None
    return np.zeros((), dtype=meta.dtype)
