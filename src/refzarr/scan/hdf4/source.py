"""Reading an HDF4 file's bytes: a local file (``pread``) or any fsspec URL (block cache),
every read checked against the file's end."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import fsspec
from fsspec.implementations.local import LocalFileSystem

from refzarr.errors import ScanError, SourceNotFoundError
from refzarr.scan.paths import opened_path

__all__ = ["Source", "open_source"]

BLOCK_SIZE = 2**20
"""Bytes per request on remote files (HDF4 metadata is scattered: one block serves many)."""


@dataclass(frozen=True, slots=True)
class Source:
    """An open HDF4 file: the URL references carry, its bytes and its size."""

    url: str
    raw: BinaryIO
    size: int
    local: bool
    fs: Any = None

    def read(self, offset: int, length: int, what: str) -> bytes:
        """``length`` bytes at ``offset``; `ScanError` naming ``what`` past the file's end."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ScanError(
                f"{self.url}: {what} at bytes {offset}..{offset + length} lies outside the file "
                f"({self.size} bytes; truncated or damaged file?)"
            )
        if length == 0:
            return b""
        if self.local:
            data = os.pread(self.raw.fileno(), length, offset)
        else:
            self.raw.seek(offset)
            data = self.raw.read(length)
        if len(data) != length:
            raise ScanError(f"{self.url}: file ends before byte {offset + length} ({what})")
        return data


@contextmanager
def open_source(url: str, storage_options: Mapping[str, Any] | None) -> Iterator[Source]:
    """Open ``url`` (a local path or an fsspec URL) for scanning.

    Raises
    ------
    SourceNotFoundError
        When the file does not exist.
    """
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    local = isinstance(fs, LocalFileSystem)
    try:
        if local:
            raw: BinaryIO = open(path, "rb")  # noqa: SIM115  # closed below
        else:
            raw = fs.open(path, "rb", block_size=BLOCK_SIZE, cache_type="blockcache")
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"{url}: no such file") from exc
    with raw:
        size = os.fstat(raw.fileno()).st_size if local else int(fs.size(path))
        reference = opened_path(path) if local and "://" not in url else url
        yield Source(reference, raw, size, local, fs)
