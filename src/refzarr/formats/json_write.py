"""`RefGroup` -> kerchunk JSON text (Version 0, or Version 1 with URL templates)."""

from __future__ import annotations

import gzip
import json

import zstandard

from refzarr.formats.source import Compression
from refzarr.model.group import RefGroup

__all__ = ["compress", "render_json"]


def render_json(group: RefGroup, *, version: int = 0) -> bytes:
    """The JSON text of ``group`` (placeholder: the per-key path)."""
    refs = group.to_kerchunk()
    if version == 1:
        return json.dumps({"version": 1, "refs": refs}).encode()
    return json.dumps(refs).encode()


def compress(data: bytes, compression: Compression) -> bytes:
    """``data`` compressed with zstd or gzip, or unchanged for None."""
    if compression == "zstd":
        return zstandard.ZstdCompressor(level=3).compress(data)
    if compression == "gzip":
        return gzip.compress(data, compresslevel=6)
    return data
