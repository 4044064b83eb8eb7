"""Reading a netCDF3 file's bytes for scanning: its header, and small coordinates or chunks.

A plain local path is read with ``os.pread`` (no fsspec, one system call per range) and
referenced by its absolute path; any other URL goes through one fsspec file object with a
block cache (each 2 MiB block fetched at most once: a record coordinate's values, one per
record, cost one request per block, not one per record) and is referenced as given.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from stat import S_ISDIR
from typing import Any

from refzarr.errors import SourceNotFoundError
from refzarr.scan.paths import LocalFile, opened_path, plain_local_path
from refzarr.scan.source import FileSource, open_file

__all__ = ["FIRST_READ", "Source", "open_source", "opened_source"]

FIRST_READ = 2**16
"""Bytes read first for the header (most headers are far smaller; a longer one is read
again with the size it needs)."""

BLOCK_SIZE = 2 * 2**20
"""Bytes per request on remote files."""

MAX_BLOCKS = 32
"""Blocks the remote cache keeps."""

_REMOTE = {
    "block_size": BLOCK_SIZE,
    "cache_type": "blockcache",
    "cache_options": {"maxblocks": MAX_BLOCKS},
}
"""fsspec file options for remote files."""


Source = FileSource
"""An open netCDF3 file: references' URL, size, bytes and its first `FIRST_READ` bytes
(read at once: a small file's header and coordinates are in them)."""


@contextmanager
def open_source(url: str, storage_options: Mapping[str, Any] | None) -> Iterator[Source]:
    """Open ``url`` for scanning.

    Raises
    ------
    SourceNotFoundError
        When the file does not exist.
    """
    path = plain_local_path(url, storage_options)
    if path is not None:
        try:
            fd = os.open(path, os.O_RDONLY)  # no file object: a small file's scan is short
        except FileNotFoundError as exc:
            raise SourceNotFoundError(f"{url}: no such file") from exc
        try:
            stat = os.fstat(fd)
            if S_ISDIR(stat.st_mode):
                raise SourceNotFoundError(f"{url}: no such file")
            head = os.pread(fd, min(stat.st_size, FIRST_READ), 0)
            yield Source(opened_path(path), stat.st_size, fd, head)
        finally:
            os.close(fd)
        return
    with open_file(url, storage_options, _REMOTE) as opened:
        head = opened.raw.read(min(opened.size, FIRST_READ))
        yield Source(opened.reference(), opened.size, opened.raw, head)


def opened_source(file: LocalFile) -> Source:
    """The source `open_source` gives for a plain local file, of a file `refzarr.scan` has
    open already (the caller closes it): its first `FIRST_READ` bytes are those it read."""
    size = file.stat.st_size
    first = min(size, FIRST_READ)
    head = file.head[:first]  # the same object when it holds no more
    if len(head) < first:  # `LocalFile` reads as many, unless the file shrank meanwhile
        head = os.pread(file.fd, first, 0)
    return Source(file.absolute, size, file.fd, head)
