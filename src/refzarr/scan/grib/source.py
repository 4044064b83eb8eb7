"""Opening a GRIB file for scanning: its size and ranged reads, local or through fsspec.

Messages are read front to back, so remote files are read through an fsspec file with a
read-ahead cache of large blocks: a file of many small messages costs few requests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import fsspec
from fsspec.implementations.local import LocalFileSystem

from refzarr.errors import ScanError, SourceNotFoundError
from refzarr.scan.paths import opened_path

__all__ = ["GribSource", "open_source"]

BLOCK_SIZE = 8 * 2**20
"""Bytes per request on remote files (read-ahead, messages are read in order)."""


@dataclass(frozen=True, slots=True)
class GribSource:
    """An open file: the URL references carry, its size and its bytes."""

    url: str
    size: int
    raw: BinaryIO

    def read_at(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset`` (fewer past the end of the file)."""
        length = max(0, min(length, self.size - offset))
        if not length:
            return b""
        self.raw.seek(offset)
        data = self.raw.read(length)
        if len(data) != length:
            raise ScanError(f"{self.url}: reading bytes {offset}..{offset + length} failed")
        return bytes(data)


@contextmanager
def open_source(url: str, storage_options: Mapping[str, Any] | None) -> Iterator[GribSource]:
    """Open ``url`` (a local path or an fsspec URL); local files are referenced by their
    absolute path, others by the URL as given.

    Raises
    ------
    SourceNotFoundError
        When the file does not exist.
    """
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    local = isinstance(fs, LocalFileSystem)
    try:
        raw = fs.open(path, "rb") if local else _remote(fs, path)
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"{url}: no such file") from exc
    with raw:
        size = int(fs.size(path))
        yield GribSource(opened_path(path) if local else url, size, raw)


def _remote(fs: fsspec.AbstractFileSystem, path: str) -> BinaryIO:
    raw: BinaryIO = fs.open(path, "rb", block_size=BLOCK_SIZE, cache_type="readahead")
    return raw
