"""Reading an HDF4 file's bytes: a local file (``pread``) or any fsspec URL (block cache),
every read checked against the file's end (`refzarr.scan.source.FileSource.read_range`,
naming what is read)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from refzarr.scan.source import FileSource, open_file

__all__ = ["Source", "open_source"]

BLOCK_SIZE = 2**20
"""Bytes per request on remote files (HDF4 metadata is scattered: one block serves many)."""

Source = FileSource
"""An open HDF4 file: the URL references carry, its bytes and its size."""


@contextmanager
def open_source(url: str, storage_options: Mapping[str, Any] | None) -> Iterator[Source]:
    """Open ``url`` (a local path or an fsspec URL) for scanning.

    Raises
    ------
    SourceNotFoundError
        When the file does not exist.
    """
    remote = {"block_size": BLOCK_SIZE, "cache_type": "blockcache"}
    with open_file(url, storage_options, remote) as opened:
        yield Source(opened.reference(), opened.size, opened.raw, pread=opened.local)
