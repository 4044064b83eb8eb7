"""Opening a GRIB file for scanning: its size and ranged reads, local or through fsspec.

Messages are read front to back, so remote files are read through an fsspec file with a
read-ahead cache of large blocks: a file of many small messages costs few requests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from refzarr.scan.source import FileSource, open_file

__all__ = ["GribSource", "open_source"]

BLOCK_SIZE = 8 * 2**20
"""Bytes per request on remote files (read-ahead, messages are read in order)."""

_REMOTE = {"block_size": BLOCK_SIZE, "cache_type": "readahead"}

GribSource = FileSource
"""An open file: the URL references carry, its size and its bytes (``read_at``: up to so
many bytes, fewer past the end of the file)."""


@contextmanager
def open_source(url: str, storage_options: Mapping[str, Any] | None) -> Iterator[GribSource]:
    """Open ``url`` (a local path or an fsspec URL); local files are referenced by their
    absolute path, others by the URL as given.

    Raises
    ------
    SourceNotFoundError
        When the file does not exist.
    """
    with open_file(url, storage_options, _REMOTE) as opened:
        yield GribSource(opened.reference(), opened.size, opened.raw)
