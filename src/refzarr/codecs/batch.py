"""Decoding many chunks of one array at once: each zlib stream inflated by libdeflate straight
into one array holding them all, byte planes (shuffle) put back for the whole batch in one copy.

Decoding chunks one by one costs some microseconds of Python per chunk besides the inflating
(a buffer per chunk, its checks, its copy into the output), as much as inflating a 4 KiB chunk
takes. This covers what HDF5's deflate (and shuffle) filters become, for fixed-size dtypes in C
order: the arrays most files hold. A chunk libdeflate cannot inflate to exactly a chunk's size
is reported back, and the caller decodes it alone with `ChunkDecoder` (which raises what is
wrong with it, or decodes what only zlib accepts).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from refzarr.codecs.chunk import ChunkDecoder, max_chunk_bytes
from refzarr.codecs.inflate import CAN_FILL, FastInflate
from refzarr.codecs.unshuffle import FastUnshuffle, interleave_planes

__all__ = ["BatchDecoder"]


class BatchDecoder:
    """Decodes runs of whole stored chunks of one array into one ``(n, *chunks)`` array.

    Build it with `BatchDecoder.of`, which says whether the array's codecs allow it.
    """

    def __init__(self, decoder: ChunkDecoder, inflate: FastInflate, elementsize: int) -> None:
        self.inflate = inflate
        self.elementsize = elementsize
        self.dtype = decoder.dtype
        self.chunks = decoder.chunks
        self.nbytes = decoder.count * decoder.dtype.itemsize

    @classmethod
    def of(cls, decoder: ChunkDecoder) -> BatchDecoder | None:
        """The batch decoder of ``decoder``'s array, or None when its codecs are not zlib
        (optionally after shuffle), its dtype holds objects, its order is F, or libdeflate is
        not installed."""
        steps = decoder.steps
        if not CAN_FILL or decoder.inflate is None or decoder.order != "C" or not decoder.plain:
            return None
        nbytes = decoder.count * decoder.dtype.itemsize
        if nbytes > max_chunk_bytes():  # one by one: `ChunkDecoder.decode` refuses them
            return None
        if len(steps) == 1:
            return cls(decoder, decoder.inflate, 1)
        if len(steps) == 2 and isinstance(steps[1], FastUnshuffle):
            size = steps[1].elementsize
            return cls(decoder, decoder.inflate, size) if nbytes % size == 0 else None
        return None

    def decode(
        self,
        data: memoryview,
        starts: list[int],
        lengths: list[int],
        out: np.ndarray[Any, Any] | None = None,
    ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, np.dtype[np.bool_]]]:
        """The chunks stored at ``data[start : start + length]``, and which of them decoded.

        Parameters
        ----------
        data, starts, lengths
            Where the stored chunks are.
        out
            Where to decode them to, when not into a new array: C-contiguous, shaped
            ``(n, *chunks)``, of the array's dtype (a run of the output itself, saving a copy).

        Returns
        -------
        values
            Shaped ``(n, *chunks)`` (``out`` when given); rows whose flag is False hold
            nothing usable.
        decoded
            Per chunk, whether it inflated to exactly a chunk's bytes.
        """
        count = len(starts)
        shape = (count, *self.chunks)
        values = np.empty(shape, dtype=self.dtype) if out is None else out
        if values.shape != shape or values.dtype != self.dtype or not values.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous {self.dtype} array shaped {shape}")
        target = values.view(np.uint8).reshape(count, self.nbytes)
        size = self.elementsize
        raw = target if size == 1 else np.empty((count, self.nbytes), dtype=np.uint8)
        decoded = np.ones(count, dtype=np.bool_)
        fill = self.inflate.fill
        for i, (start, length) in enumerate(zip(starts, lengths, strict=True)):
            if not fill(data[start : start + length], raw[i]):
                decoded[i] = False
        if size > 1:  # byte plane p of a chunk holds byte p of every element
            planes = raw.reshape(count, size, self.nbytes // size)
            interleave_planes(planes, target.reshape(count, self.nbytes // size, size))
        return values, decoded
