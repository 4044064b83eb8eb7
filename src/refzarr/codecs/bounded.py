"""Decompressing a chunk with its output bounded: a stored chunk of a few bytes may declare, or
inflate to, gigabytes (a "decompression bomb": 785 bytes of bz2 inflate to 1 GiB), and the
codec's own ``decode`` would allocate all of it before refzarr could see the size is wrong.

For numcodecs' compressors that inflate a stream (zlib, gzip, bz2, lzma, zstd) the output is
produced up to the bound and no further; for those whose header declares the decoded size
(blosc, lz4; zstd frames) the header is checked first. What the bound is and why: see
`chunk_bound`. Within the bound each returns the bytes the codec's ``decode`` returns, or
raises the error it raises (asked of the codec itself, at a cost within the bound).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import struct
import zlib
from collections.abc import Callable
from typing import Any

__all__ = ["TooLargeError", "bounded_decoder", "chunk_bound", "inflate_bounded", "read_at_most"]

EXPANSION = 16
"""How many times a chunk's bytes a compressor's output may hold: filters decoded after it may
shrink it (``astype`` from float64 to bool: 8x, complex128 to bool: 16x; checksums, packbits)."""

FLOOR = 2**20
"""The bound of a small chunk's compressor output (headers, odd filters: never too tight)."""

_STEP = 2**24
"""Bytes produced per step by the file-like decompressors (gzip, bz2, lzma)."""


class TooLargeError(ValueError):
    """A compressor's output would exceed its bound (the message says which and how much)."""


def chunk_bound(nbytes: int, limit: int, plain: bool) -> int:
    """The most bytes a compressor of a chunk decoding to ``nbytes`` may produce: `EXPANSION`
    times the chunk (at least `FLOOR`), never above the per-chunk ``limit``; for object
    values (``plain`` False: strings of any length) the limit alone."""
    if not plain:
        return limit
    return min(limit, max(EXPANSION * nbytes, FLOOR))


def _too_large(what: str, bound: int, declared: int | None = None) -> TooLargeError:
    says = (
        f"declares {declared:,} decoded bytes, more than the {bound:,}"
        if declared is not None
        else f"inflates to more than the {bound:,}"
    )
    return TooLargeError(
        f"its {what} stream {says} bytes such a chunk may decompress to (a damaged chunk or "
        "a decompression bomb): not decoded"
    )


def inflate_bounded(buf: Any, bound: int, wbits: int = zlib.MAX_WBITS) -> bytes:
    """``zlib.decompress(buf, wbits)`` producing at most ``bound`` bytes.

    Raises
    ------
    TooLargeError
        When the stream inflates to more.
    zlib.error
        When it is damaged or truncated (zlib's own error).
    """
    inflater = zlib.decompressobj(wbits)
    out = inflater.decompress(buf, bound + 1)
    if len(out) > bound:
        raise _too_large("gzip" if wbits > 16 else "zlib" if wbits > 0 else "deflate", bound)
    if not inflater.eof:
        return zlib.decompress(buf, wbits)  # zlib's own error (its output is within the bound)
    return out


def _zlib(codec: Any, buf: Any, bound: int) -> Any:
    return inflate_bounded(buf, bound)


def _file_like(opener: Callable[[io.BytesIO], Any], what: str) -> Callable[[Any, Any, int], Any]:
    """A bounded decoder reading a stream through its file object (multi-member gzip,
    multi-stream bz2/xz read as their codecs read them)."""

    def decode(codec: Any, buf: Any, bound: int) -> Any:
        with opener(io.BytesIO(memoryview(buf).cast("B"))) as stream:
            data = read_at_most(stream, bound)
        if data is None:
            raise _too_large(what, bound)
        return data

    return decode


def _gzip(codec: Any, buf: Any, bound: int) -> Any:
    return _file_like(lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"), "gzip")(codec, buf, bound)


def _bz2(codec: Any, buf: Any, bound: int) -> Any:
    return _file_like(bz2.BZ2File, "bz2")(codec, buf, bound)


def _lzma(codec: Any, buf: Any, bound: int) -> Any:
    def opener(raw: io.BytesIO) -> Any:
        return lzma.LZMAFile(raw, format=codec.format, filters=codec.filters)

    try:
        return _file_like(opener, "lzma")(codec, buf, bound)
    except TooLargeError:
        raise
    except Exception:
        return codec.decode(buf)  # the codec's own error, or its reading where it differs


def _zstd(codec: Any, buf: Any, bound: int) -> Any:
    import zstandard

    try:
        declared = zstandard.frame_content_size(buf)
    except zstandard.ZstdError:
        return codec.decode(buf)  # no frame: the codec's own error
    if declared > bound:  # CONTENTSIZE_UNKNOWN is -1
        raise _too_large("zstd", bound, declared)
    decompressor = zstandard.ZstdDecompressor()
    if declared >= 0:
        try:  # one frame declaring its size (what numcodecs writes): decoded at once
            return decompressor.decompress(buf, allow_extra_data=False)
        except zstandard.ZstdError:
            pass  # more frames after it, or damaged: read on as a stream
    try:
        data = read_at_most(decompressor.stream_reader(buf, read_across_frames=True), bound)
    except zstandard.ZstdError:
        return codec.decode(buf)  # damaged: the codec's own error, within the bound
    if data is None:
        raise _too_large("zstd", bound)
    return data


def _blosc(codec: Any, buf: Any, bound: int) -> Any:
    view = memoryview(buf).cast("B")
    if len(view) >= 16:
        declared = struct.unpack_from("<I", view, 4)[0]  # nbytes, after the four flag bytes
        if declared > bound:
            raise _too_large("blosc", bound, declared)
    return codec.decode(buf)


def _lz4(codec: Any, buf: Any, bound: int) -> Any:
    view = memoryview(buf).cast("B")
    if len(view) >= 4:
        declared = struct.unpack_from("<i", view, 0)[0]  # numcodecs' size prefix
        if declared > bound:
            raise _too_large("lz4", bound, declared)
    return codec.decode(buf)


def _registry() -> dict[type, Callable[[Any, Any, int], Any]]:
    from numcodecs.blosc import Blosc
    from numcodecs.bz2 import BZ2
    from numcodecs.gzip import GZip
    from numcodecs.lz4 import LZ4
    from numcodecs.lzma import LZMA
    from numcodecs.zlib import Zlib
    from numcodecs.zstd import Zstd

    from refzarr.codecs.inflate import FastInflate

    return {
        Zlib: _zlib,
        FastInflate: _zlib,
        GZip: _gzip,
        BZ2: _bz2,
        LZMA: _lzma,
        Zstd: _zstd,
        Blosc: _blosc,
        LZ4: _lz4,
    }


_REGISTRY: dict[type, Callable[[Any, Any, int], Any]] = {}


def bounded_decoder(codec: Any) -> Callable[[Any, Any, int], Any] | None:
    """``decode(codec, buf, bound)`` producing at most ``bound`` bytes for ``codec``'s class
    (None for codecs without such a decoder: filters, and compressors not listed here)."""
    if not _REGISTRY:
        _REGISTRY.update(_registry())
    return _REGISTRY.get(type(codec))


def read_at_most(stream: Any, bound: int, step: int = _STEP) -> bytes | None:
    """All that ``stream`` (a file object) gives, read ``step`` bytes at a time, or None as
    soon as it gives more than ``bound`` bytes (never holding more than ``bound + step``)."""
    out = io.BytesIO()
    total = 0
    while total <= bound:
        piece = stream.read(min(step, bound + 1 - total))
        if not piece:
            return out.getvalue()
        total += len(piece)
        out.write(piece)
    return None
