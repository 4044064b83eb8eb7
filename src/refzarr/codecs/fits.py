"""numcodecs codecs for FITS data numcodecs lacks: the unsigned-integer ``BZERO`` convention,
tile-compressed image tiles (RICE_1, GZIP_1, GZIP_2, PLIO_1, HCOMPRESS_1) and ASCII-table rows.

They are registered under ``refzarr.fits_<name>`` when this module is imported (and as numcodecs
entry points), and import nothing heavy until they decode: imagecodecs for RICE_1, astropy's
compiled decoders for PLIO_1 and HCOMPRESS_1.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numcodecs.abc import Codec
from numcodecs.registry import register_codec

__all__ = ["FitsAsciiTable", "FitsTile", "FitsUnsigned"]

ALGORITHMS = ("RICE_1", "GZIP_1", "GZIP_2", "PLIO_1", "HCOMPRESS_1", "NOCOMPRESS")
"""Tile compressions `FitsTile` decodes (``RICE_ONE`` is read as ``RICE_1``)."""


def _bytes(buf: Any) -> bytes:
    """The bytes of a buffer numcodecs hands a codec (bytes, memoryview, ndarray)."""
    if isinstance(buf, bytes):
        return buf
    return np.ascontiguousarray(buf).view(np.uint8).tobytes()


class FitsUnsigned(Codec):  # type: ignore[misc]
    """Signed integers stored with ``BZERO`` = 2^(n-1) (FITS's unsigned convention) read as the
    unsigned integers they stand for, as astropy gives them (``BITPIX`` 16 -> ``uint16``).

    Parameters
    ----------
    stored
        dtype of the stored values with byte order (``">i2"``; ``"|u1"`` with ``BZERO`` -128
        for signed bytes).
    dtype
        dtype of the values (``"<u2"``; ``"|i1"`` for signed bytes).
    """

    codec_id = "refzarr.fits_unsigned"

    def __init__(self, stored: str, dtype: str) -> None:
        self.stored = np.dtype(stored).str
        self.dtype = np.dtype(dtype).str
        s, d = np.dtype(self.stored), np.dtype(self.dtype)
        if s.kind not in "iu" or d.kind not in "iu" or s.itemsize != d.itemsize or s.kind == d.kind:
            raise ValueError(f"cannot shift {self.stored} to {self.dtype}")

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration."""
        return {"id": self.codec_id, "stored": self.stored, "dtype": self.dtype}

    def _flip(self, buf: Any, source: str, target: str) -> Any:
        values = np.frombuffer(_bytes(buf), dtype=source)
        bits = np.dtype(f"u{values.dtype.itemsize}").newbyteorder(values.dtype.byteorder)
        sign = np.array(1 << (8 * values.dtype.itemsize - 1), dtype=bits.newbyteorder("="))
        flipped = values.view(bits) ^ sign
        return (
            flipped.astype(bits.newbyteorder("="), copy=False)
            .view(np.dtype(target).newbyteorder("="))
            .astype(target)
        )

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The unsigned (or signed-byte) values."""
        result = self._flip(buf, self.stored, self.dtype)
        if out is not None:
            np.copyto(np.asarray(out).reshape(-1).view(result.dtype), result)
            return out
        return result

    def encode(self, buf: Any) -> Any:
        """The stored integers (for round trips in tests)."""
        return self._flip(buf, self.dtype, self.stored)


class FitsTile(Codec):  # type: ignore[misc]
    """One tile of a tile-compressed FITS image (a ``ZIMAGE`` extension), as a whole chunk.

    Edge tiles are stored cut at the image's edge; they are recognised by their stored length
    (``edges``: stored length -> the tile's shape, for every tile whose shape is not ``tile``;
    the scanner checks that no other tile has one of these lengths) or, where lengths do not
    tell them apart, by a digest of their bytes (``digests``: `tile_digest` -> shape, for
    every tile whose length one of them shares), and decoded into the corner of a whole chunk.

    Parameters
    ----------
    algorithm
        ``ZCMPTYPE``: RICE_1, GZIP_1, GZIP_2, PLIO_1, HCOMPRESS_1 or NOCOMPRESS.
    dtype
        dtype of the decoded pixels (as astropy gives them: ``"<i2"`` for ``ZBITPIX`` 16).
    tile
        The tile shape (numpy order, ``ZTILEn`` ... ``ZTILE1``): the chunk shape.
    edges
        Stored length -> tile shape, for tiles smaller than ``tile``.
    digests
        `tile_digest` of the stored bytes -> tile shape, for tiles of lengths in
        ``digest_lengths``.
    digest_lengths
        Stored lengths of the tiles ``digests`` names.
    blocksize, bytepix
        RICE_1 parameters (``ZVALn`` of ``BLOCKSIZE``/``BYTEPIX``).
    scale, smooth
        HCOMPRESS_1 parameters.
    """

    codec_id = "refzarr.fits_tile"

    def __init__(
        self,
        algorithm: str,
        dtype: str,
        tile: Sequence[int],
        edges: Mapping[str, Sequence[int]] | None = None,
        digests: Mapping[str, Sequence[int]] | None = None,
        digest_lengths: Sequence[int] = (),
        blocksize: int = 32,
        bytepix: int = 4,
        scale: int = 0,
        smooth: int = 0,
    ) -> None:
        self.algorithm = "RICE_1" if algorithm == "RICE_ONE" else str(algorithm)
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown FITS tile compression {algorithm!r}")
        self.dtype = np.dtype(dtype).str
        self.tile = tuple(int(n) for n in tile)
        self.edges = {str(k): tuple(int(n) for n in v) for k, v in (edges or {}).items()}
        self.digests = {str(k): tuple(int(n) for n in v) for k, v in (digests or {}).items()}
        self.digest_lengths = sorted({int(n) for n in digest_lengths})
        self._lengths = frozenset(self.digest_lengths)
        self.blocksize, self.bytepix = int(blocksize), int(bytepix)
        self.scale, self.smooth = int(scale), int(smooth)

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration."""
        return {
            "id": self.codec_id,
            "algorithm": self.algorithm,
            "dtype": self.dtype,
            "tile": list(self.tile),
            "edges": {k: list(v) for k, v in self.edges.items()},
            "digests": {k: list(v) for k, v in self.digests.items()},
            "digest_lengths": list(self.digest_lengths),
            "blocksize": self.blocksize,
            "bytepix": self.bytepix,
            "scale": self.scale,
            "smooth": self.smooth,
        }

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The tile's pixels as a whole chunk (an edge tile in its corner, zeros around)."""
        data = _bytes(buf)
        shape = self.tile_shape(data)
        pixels = decode_tile(self, data, shape)
        if shape != self.tile:
            whole = np.zeros(self.tile, dtype=self.dtype)
            whole[tuple(slice(0, n) for n in shape)] = pixels
            pixels = whole
        if out is not None:
            np.copyto(np.asarray(out).reshape(-1).view(pixels.dtype), pixels.reshape(-1))
            return out
        return pixels.reshape(-1)

    def tile_shape(self, data: bytes) -> tuple[int, ...]:
        """The shape of the tile stored as ``data``."""
        if len(data) in self._lengths:
            return self.digests.get(tile_digest(data), self.tile)
        return self.edges.get(str(len(data)), self.tile)

    def encode(self, buf: Any) -> Any:
        raise NotImplementedError("refzarr.fits_tile only decodes (tiles are written by FITS)")


def tile_digest(data: bytes) -> str:
    """The digest `FitsTile` knows a stored tile by: 8 bytes of BLAKE2b, in hex."""
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def decode_tile(codec: FitsTile, data: bytes, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """The pixels of one stored tile of ``shape``, in ``codec.dtype``; ValueError, before
    anything is allocated, for a tile that may decode to more than the per-chunk limit."""
    from refzarr.codecs.bounded import inflate_bounded
    from refzarr.codecs.chunk import max_chunk_bytes

    count = math.prod(shape)
    dtype = np.dtype(codec.dtype)
    algorithm = codec.algorithm
    if count * 8 > max_chunk_bytes():
        raise ValueError(
            f"a tile of {shape} pixels may decode to {count * 8:,} bytes, over the limit of "
            f"{max_chunk_bytes():,} bytes per chunk (refzarr.codecs.chunk.set_max_chunk_bytes)"
        )
    if algorithm in ("GZIP_1", "GZIP_2", "NOCOMPRESS"):
        # at most 8 bytes a pixel: a tile inflating to more is refused while it inflates
        raw = data if algorithm == "NOCOMPRESS" else inflate_bounded(data, count * 8, 15 + 32)
        itemsize = len(raw) // count if count else dtype.itemsize
        if itemsize not in (1, 2, 4, 8) or itemsize * count != len(raw):
            raise ValueError(f"a {algorithm} tile of {shape} pixels decoded to {len(raw)} bytes")
        if algorithm == "GZIP_2" and itemsize > 1:  # bytes were shuffled: all first bytes, ...
            raw = np.frombuffer(raw, np.uint8).reshape(itemsize, count).T.tobytes()
        stored = np.dtype(f">{dtype.kind if dtype.kind == 'f' else 'i'}{itemsize}")
        if dtype.kind == "u":
            stored = np.dtype(f">u{itemsize}")
        values = np.frombuffer(raw, stored)
    elif algorithm == "RICE_1":
        import imagecodecs

        rice_dtype = np.dtype({1: "u1", 2: "i2", 4: "i4", 8: "i8"}[codec.bytepix])
        values = imagecodecs.rcomp_decode(
            data, shape=(count,), dtype=rice_dtype, nblock=codec.blocksize
        )
    elif algorithm == "PLIO_1":
        from astropy.io.fits.hdu.compressed._codecs import PLIO1

        # PLIO's 16-bit words are stored big-endian; astropy's decoder takes them native
        words = np.frombuffer(data, ">i2").astype("=i2")
        values = PLIO1(tilesize=count).decode(words)[:count]
    else:
        values = _hdecompress(codec, data, shape)
    return np.asarray(values).astype(dtype, copy=False).reshape(shape)


_HCOMPRESS_LOCK = threading.Lock()
"""cfitsio's H-decompression keeps its bit-reader state in static variables: two threads
decoding at once (zarr and refzarr's reader decode chunks concurrently) corrupt each other's
tiles ("qtree_decode64: bad format code"), so one tile is decoded at a time."""


def _hdecompress(codec: FitsTile, data: bytes, shape: tuple[int, ...]) -> Any:
    from astropy.io.fits.hdu.compressed._codecs import HCompress1

    plane = tuple(n for n in shape if n != 1)
    if len(plane) == 1:
        plane = (1, plane[0])
    if len(plane) != 2:
        raise ValueError(f"HCOMPRESS_1 tiles are 2-D, this one is {shape}")
    hcomp = HCompress1(
        scale=codec.scale, smooth=bool(codec.smooth), bytepix=8, nx=plane[0], ny=plane[1]
    )
    with _HCOMPRESS_LOCK:
        values = hcomp.decode(np.frombuffer(data, np.uint8))
    return values[: math.prod(shape)]


class FitsAsciiTable(Codec):  # type: ignore[misc]
    """Rows of a FITS ASCII table (``XTENSION = 'TABLE'``) parsed into numbers, as astropy
    gives them: ``I`` fields as integers, ``F``/``E``/``D`` as floats (``D`` exponents
    read), ``A`` as bytes; a field equal to its ``TNULL`` string, or blank, reads as NaN in
    a float field and 0 in an integer one.

    Parameters
    ----------
    width
        Bytes per row (``NAXIS1``).
    fields
        ``[name, dtype, start, width, tnull]`` per field: ``start`` 0-based (``TBCOLn`` - 1);
        ``tnull`` the null string or None.
    """

    codec_id = "refzarr.fits_ascii"

    def __init__(self, width: int, fields: Sequence[Sequence[Any]]) -> None:
        self.width = int(width)
        self.fields = [
            (
                str(name),
                np.dtype(dt).str,
                int(start),
                int(size),
                None if null is None else str(null),
            )
            for name, dt, start, size, null in fields
        ]
        self.dtype = np.dtype([(name, dt) for name, dt, *_ in self.fields])

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration."""
        return {"id": self.codec_id, "width": self.width, "fields": [list(f) for f in self.fields]}

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The rows as a structured array."""
        data = _bytes(buf)
        rows = np.frombuffer(data, np.uint8).reshape(-1, self.width)
        result = np.zeros(rows.shape[0], dtype=self.dtype)
        for name, dt, start, size, null in self.fields:
            text = rows[:, start : start + size].copy().view(f"S{size}").reshape(-1)
            result[name] = _parse_column(text, np.dtype(dt), null)
        if out is not None:
            np.copyto(np.asarray(out).reshape(-1).view(self.dtype), result)
            return out
        return result

    def encode(self, buf: Any) -> Any:
        raise NotImplementedError("refzarr.fits_ascii only decodes")


def _parse_column(text: Any, dtype: np.dtype[Any], null: str | None) -> Any:
    """Fixed-width text fields as ``dtype`` values (nulls: NaN or 0)."""
    if dtype.kind == "S":
        return text
    stripped = np.char.strip(text)
    nulls = stripped == b""
    if null is not None:
        nulls |= stripped == null.strip().encode("ascii")
    cleaned = np.where(nulls, b"0", stripped)
    if dtype.kind == "f":
        cleaned = np.char.replace(np.char.replace(cleaned, b"D", b"E"), b"d", b"e")
        values = cleaned.astype(np.float64)
        values[nulls] = np.nan
        return values
    return cleaned.astype(np.int64)


for _codec in (FitsUnsigned, FitsTile, FitsAsciiTable):
    register_codec(_codec)
