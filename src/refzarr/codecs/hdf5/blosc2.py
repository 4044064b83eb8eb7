"""A numcodecs codec for the HDF5 Blosc2 filter (32026), which stores a Blosc2 contiguous frame.

The filter wraps each chunk in a one-chunk Blosc2 frame ("cframe"): a msgpack header (its length
at byte 11, the total uncompressed and compressed sizes at bytes 30 and 39), the Blosc2 chunk
right after the header, then an offsets chunk and a trailer. A chunk of zeros is stored as no
chunk at all (compressed size 0). With the b2nd layout (PyTables, hdf5plugin for n-d chunks) a
``b2nd`` metalayer gives the block shape, and the decompressed chunk holds the data block by
block, each block padded to the full block shape; decoding puts it back in C order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs.abc import Codec

__all__ = ["Hdf5Blosc2"]

_MAGIC = b"b2frame\0"
_SPECIAL_ZERO, _SPECIAL_UNINIT = 1, 4


class Hdf5Blosc2(Codec):  # type: ignore[misc]
    """Decode HDF5 Blosc2 frames (plain or b2nd) with imagecodecs' Blosc2 chunk decoder.

    Parameters
    ----------
    typesize
        Bytes per element (the filter's ``cd_values[2]``), for the b2nd reordering.
    """

    codec_id = "refzarr_hdf5_blosc2"

    def __init__(self, typesize: int) -> None:
        self.typesize = int(typesize)

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration (numcodecs' ``get_codec`` rebuilds it)."""
        return {"id": self.codec_id, "typesize": self.typesize}

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The chunk's bytes in C order."""
        import imagecodecs

        frame = np.ascontiguousarray(buf).view(np.uint8).reshape(-1).tobytes()
        if frame[1:10] != b"\xa8" + _MAGIC:
            raise ValueError("not a Blosc2 frame (HDF5 Blosc2 filter)")
        header_len = int.from_bytes(frame[11:15], "big")
        nbytes = int.from_bytes(frame[30:38], "big")
        cbytes = int.from_bytes(frame[39:47], "big")
        if cbytes == 0:  # no chunk stored: the offsets chunk (right after the header) says why
            data = _special_chunk(imagecodecs, frame[header_len:], nbytes)
        else:
            data = bytes(imagecodecs.blosc2_decode(frame[header_len : header_len + cbytes]))
        if len(data) < nbytes:
            raise ValueError(f"Blosc2 frame of {nbytes} bytes decoded to {len(data)}")
        layout = _b2nd_layout(frame[:header_len])
        if layout is not None:
            data = _unblock(data, self.typesize, *layout)
        if out is not None:
            np.copyto(np.frombuffer(out, dtype=np.uint8), np.frombuffer(data, dtype=np.uint8))
            return out
        return data

    def encode(self, buf: Any) -> bytes:
        """Not available: refzarr does not write Blosc2 frames."""
        raise NotImplementedError("refzarr does not encode HDF5 Blosc2 frames")


def _special_chunk(imagecodecs: Any, offsets_chunk: bytes, nbytes: int) -> bytes:
    """The bytes of a chunk the frame only describes: zeros (or uninitialised, read as zeros)."""
    offset = int.from_bytes(bytes(imagecodecs.blosc2_decode(offsets_chunk))[:8], "little")
    special = (offset >> 56) & 0x7F  # a negative offset: 0x80 | the special value's code
    if not offset >> 63 or special not in (_SPECIAL_ZERO, _SPECIAL_UNINIT):
        raise ValueError(f"Blosc2 frame without chunk data has offset 0x{offset:016x}")
    return bytes(nbytes)


def _b2nd_layout(header: bytes) -> tuple[list[int], list[int]] | None:
    """(chunk shape, block shape) from the frame's b2nd metalayer, or None without one."""
    key = header.find(b"\xa4b2nd\xd2")
    if key < 0:
        return None
    at = int.from_bytes(header[key + 6 : key + 10], "big")
    if header[at] != 0xC6:
        raise ValueError("malformed b2nd metalayer in a Blosc2 frame")
    meta, _ = _msgpack(header, at + 5)
    # [version, ndim, shape, chunk shape, block shape, dtype format, dtype]
    return [int(v) for v in meta[3]], [int(v) for v in meta[4]]


def _msgpack(data: bytes, pos: int) -> tuple[Any, int]:
    """The msgpack value at ``pos`` (ints, strings, arrays: what b2nd metalayers hold)."""
    tag = data[pos]
    if tag < 0x80:
        return tag, pos + 1
    if 0x90 <= tag <= 0x9F:
        items = []
        pos += 1
        for _ in range(tag - 0x90):
            item, pos = _msgpack(data, pos)
            items.append(item)
        return items, pos
    if 0xA0 <= tag <= 0xBF:
        end = pos + 1 + tag - 0xA0
        return data[pos + 1 : end].decode(), end
    widths = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
    if tag in widths:
        width = widths[tag]
        raw = data[pos + 1 : pos + 1 + width]
        return int.from_bytes(raw, "big", signed=tag >= 0xD0), pos + 1 + width
    if tag == 0xDB:  # str 32
        length = int.from_bytes(data[pos + 1 : pos + 5], "big")
        return data[pos + 5 : pos + 5 + length].decode(), pos + 5 + length
    raise ValueError(f"unexpected msgpack tag 0x{tag:02x} in a b2nd metalayer")


def _unblock(data: bytes, typesize: int, chunks: list[int], blocks: list[int]) -> bytes:
    """C-order bytes of a b2nd chunk stored block by block (blocks padded to full shape)."""
    grid = [-(-c // b) for c, b in zip(chunks, blocks, strict=True)]
    items = np.frombuffer(data, dtype=np.dtype(f"V{typesize}"))
    ndim = len(chunks)
    tiled = items[: int(np.prod(grid)) * int(np.prod(blocks))].reshape(grid + blocks)
    order = [axis for pair in zip(range(ndim), range(ndim, 2 * ndim), strict=True) for axis in pair]
    extended = tiled.transpose(order).reshape([g * b for g, b in zip(grid, blocks, strict=True)])
    return np.ascontiguousarray(extended[tuple(slice(0, c) for c in chunks)]).tobytes()
