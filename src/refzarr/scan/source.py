"""A scanned file's bytes for the scanners that parse files themselves (netCDF3, HDF4, GRIB,
FITS): opening a local path or any fsspec URL, its size, and ranged reads checked against
the file's end; each format keeps its own cache options, first read and reference naming."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import fsspec
from fsspec.implementations.local import LocalFileSystem

from refzarr.errors import ScanError, SourceNotFoundError
from refzarr.scan.known import open_remote
from refzarr.scan.paths import reference_url

__all__ = ["FileSource", "OpenedFile", "open_file"]


@dataclass(frozen=True, slots=True)
class FileSource:
    """An open file being scanned: how references name it, its size and its bytes.

    Parameters
    ----------
    url
        How references name the file (see `OpenedFile.reference`).
    size
        Its size in bytes.
    raw
        An open file object (fsspec's or Python's), or the OS descriptor of a plain local
        file (read with ``os.pread``).
    head
        The file's first bytes when they were read already (served without a read).
    pread
        Read a file object's descriptor with ``os.pread`` (a local file) rather than with
        seek and read (through the file object's cache).
    """

    url: str
    size: int
    raw: BinaryIO | int
    head: bytes = b""
    pread: bool = False

    def read_range(self, offset: int, length: int, what: str | None = None) -> bytes:
        """Exactly ``length`` bytes at ``offset``.

        Raises
        ------
        ScanError
            When the range lies outside the file or the file ends before it (a truncated or
            damaged file); the message names ``what`` when given.
        """
        end = offset + length
        if offset < 0 or length < 0 or end > self.size:
            raise ScanError(self._outside(offset, length, what))
        if end <= len(self.head):
            return self.head[offset:end]
        data = self._read(offset, length) if length else b""
        if len(data) != length:
            because = f"({what})" if what is not None else "(truncated?)"
            raise ScanError(f"{self.url}: file ends before byte {end} {because}")
        return data

    def read_at(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset``: fewer past the end of the file.

        Raises
        ------
        ScanError
            When ``offset`` is negative, or the file gives fewer bytes than its size says.
        """
        if offset < 0:
            raise ScanError(f"{self.url}: bytes {offset}..{offset + length} lie before its start")
        length = max(0, min(length, self.size - offset))
        if not length:
            return b""
        data = self._read(offset, length)
        if len(data) != length:
            raise ScanError(f"{self.url}: reading bytes {offset}..{offset + length} failed")
        return data

    def _read(self, offset: int, length: int) -> bytes:
        if isinstance(self.raw, int):
            return os.pread(self.raw, length, offset)
        if self.pread:
            return os.pread(self.raw.fileno(), length, offset)
        self.raw.seek(offset)
        return bytes(self.raw.read(length))

    def _outside(self, offset: int, length: int, what: str | None) -> str:
        where = f"{offset}..{offset + length}"
        if what is None:
            return (
                f"{self.url}: bytes {where} are beyond the file's end ({self.size} bytes; "
                "truncated file?)"
            )
        return (
            f"{self.url}: {what} at bytes {where} lies outside the file ({self.size} bytes; "
            "truncated or damaged file?)"
        )


@dataclass(frozen=True, slots=True)
class OpenedFile:
    """A file `open_file` opened: the URL as given, fsspec's view of it, the open file
    object and its size."""

    url: str
    fs: fsspec.AbstractFileSystem
    path: str
    local: bool
    """Whether fsspec reads it from the local file system."""
    raw: BinaryIO
    size: int

    def reference(self) -> str:
        """How references name the file (`reference_url`): a local file by its absolute
        path, any other by its URL as given."""
        return reference_url(self.url, self.path, self.local)


@contextmanager
def open_file(
    url: str, storage_options: Mapping[str, Any] | None, remote: Mapping[str, Any]
) -> Iterator[OpenedFile]:
    """Open ``url`` (a local path or an fsspec URL) for reading; closed on leaving.

    Parameters
    ----------
    url
        The file.
    storage_options
        fsspec options for it.
    remote
        fsspec ``open`` options for a file that is not local (block size, cache type).

    Raises
    ------
    SourceNotFoundError
        When the file does not exist.
    """
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    local = isinstance(fs, LocalFileSystem)
    try:
        raw = fs.open(path, "rb") if local else open_remote(fs, path, url, **remote)
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"{url}: no such file") from exc
    with raw:
        known = getattr(raw, "size", None)
        size = int(fs.size(path) if known is None else known)
        yield OpenedFile(url, fs, path, local, raw, size)
