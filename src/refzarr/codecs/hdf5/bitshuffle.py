"""A numcodecs codec for the HDF5 bitshuffle filter (32008): plain, with LZ4 or with Zstandard.

Without compression a chunk is the bitshuffled elements, block by block. With compression the
filter frames a chunk as: the uncompressed size (8 bytes, big-endian), the
block size in bytes (4 bytes, big-endian), then one record per block: its compressed size
(4 bytes, big-endian) and an LZ4 block or a Zstandard frame. The blocks, decompressed and put
end to end, are exactly what bitshuffle without compression stores; the elements past the last
multiple of 8 follow unshuffled and uncompressed. Decoding needs imagecodecs (bitshuffle, LZ4);
imagecodecs' own ``Bitshuffle`` codec is not used because, given the uint8 array zarr passes,
it shuffles by the array's item size instead of the configured one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs.abc import Codec

__all__ = ["Hdf5Bitshuffle"]

COMPRESSIONS = ("none", "lz4", "zstd")
_BLOCKED_MULT = 8  # bitshuffle works on multiples of 8 elements
_TARGET_BLOCK_BYTES = 8192
_MIN_BLOCK = 128


def default_block_size(elementsize: int) -> int:
    """The bitshuffle library's block size (elements) when the filter was given 0."""
    size = _TARGET_BLOCK_BYTES // elementsize
    size = (size // _BLOCKED_MULT) * _BLOCKED_MULT
    return max(size, _MIN_BLOCK)


class Hdf5Bitshuffle(Codec):  # type: ignore[misc]
    """HDF5 bitshuffle, plain or + LZ4 / Zstandard with the filter's block framing.

    Parameters
    ----------
    elementsize
        Bytes per element.
    compression
        ``"none"``, ``"lz4"`` or ``"zstd"``.
    blocksize
        Elements per block (0: the library default); with compression, decoding reads it from
        the chunk.
    level
        Zstandard level for `encode`.
    """

    codec_id = "refzarr_hdf5_bitshuffle"

    def __init__(
        self, elementsize: int, compression: str = "lz4", blocksize: int = 0, level: int = 3
    ) -> None:
        if compression not in COMPRESSIONS:
            raise ValueError(f"bitshuffle compression must be one of {COMPRESSIONS}")
        self.elementsize = int(elementsize)
        self.compression = compression
        self.blocksize = int(blocksize)
        self.level = int(level)

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration (numcodecs' ``get_codec`` rebuilds it)."""
        return {
            "id": self.codec_id,
            "elementsize": self.elementsize,
            "compression": self.compression,
            "blocksize": self.blocksize,
            "level": self.level,
        }

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The unshuffled bytes of the chunk."""
        import imagecodecs

        data = memoryview(np.ascontiguousarray(buf).view(np.uint8).reshape(-1).tobytes())
        if self.compression == "none":
            blocksize = self.blocksize or default_block_size(self.elementsize)
            result = imagecodecs.bitshuffle_decode(
                bytes(data), itemsize=self.elementsize, blocksize=blocksize
            )
            return _into(out, result)
        total = int.from_bytes(data[:8], "big")
        block_bytes = int.from_bytes(data[8:12], "big")
        count = total // self.elementsize
        shuffled = (count - count % _BLOCKED_MULT) * self.elementsize
        parts, pos, done = [], 12, 0
        while done < shuffled:
            size = min(block_bytes, shuffled - done)
            length = int.from_bytes(data[pos : pos + 4], "big")
            block = data[pos + 4 : pos + 4 + length]
            parts.append(self._decompress(imagecodecs, block, size))
            pos, done = pos + 4 + length, done + size
        parts.append(bytes(data[pos : pos + total - shuffled]))
        result = imagecodecs.bitshuffle_decode(
            b"".join(parts), itemsize=self.elementsize, blocksize=block_bytes // self.elementsize
        )
        return _into(out, result)

    def _decompress(self, imagecodecs: Any, block: memoryview, size: int) -> bytes:
        if self.compression == "lz4":
            result = imagecodecs.lz4_decode(block, header=False, out=size)
        else:
            result = imagecodecs.zstd_decode(block)
        if len(result) != size:
            raise ValueError(f"bitshuffle block decompressed to {len(result)} bytes, not {size}")
        return bytes(result)

    def encode(self, buf: Any) -> bytes:
        """The chunk as the HDF5 filter frames it."""
        import imagecodecs

        data = np.frombuffer(np.ascontiguousarray(buf), dtype=np.uint8)
        blocksize = self.blocksize or default_block_size(self.elementsize)
        block_bytes = blocksize * self.elementsize
        count = data.size // self.elementsize
        shuffled = (count - count % _BLOCKED_MULT) * self.elementsize
        shuffled_all = imagecodecs.bitshuffle_encode(
            data.tobytes(), itemsize=self.elementsize, blocksize=blocksize
        )
        if self.compression == "none":
            return bytes(shuffled_all)
        bits = np.frombuffer(shuffled_all, dtype=np.uint8)
        records = [data.size.to_bytes(8, "big"), block_bytes.to_bytes(4, "big")]
        for start in range(0, shuffled, block_bytes):
            block = bits[start : min(start + block_bytes, shuffled)].tobytes()
            packed = (
                imagecodecs.lz4_encode(block, header=False)
                if self.compression == "lz4"
                else imagecodecs.zstd_encode(block, level=self.level)
            )
            records += [len(packed).to_bytes(4, "big"), bytes(packed)]
        records.append(data[shuffled:].tobytes())
        return b"".join(records)


def _into(out: Any, result: Any) -> Any:
    if out is None:
        return result
    np.copyto(np.frombuffer(out, dtype=np.uint8), np.frombuffer(result, dtype=np.uint8))
    return out
