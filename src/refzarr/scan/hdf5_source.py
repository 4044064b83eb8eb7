"""Opening an HDF5 file for scanning: h5py by path when local, through fsspec otherwise."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import fsspec
import h5py
from fsspec.implementations.local import LocalFileSystem

from refzarr.errors import ScanError, SourceNotFoundError

__all__ = ["BLOCK_SIZE", "OpenSource", "open_source"]

BLOCK_SIZE = 8 * 2**20
"""Read-ahead of remote files: HDF5 metadata is scattered, so fetch generously."""


@dataclass(frozen=True, slots=True)
class OpenSource:
    """An open file: h5py's view, the URL references carry, and raw byte access."""

    h5: h5py.File
    url: str
    raw: BinaryIO

    def read_range(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` of the file (for inlining small chunks)."""
        self.raw.seek(offset)
        data = self.raw.read(length)
        if len(data) != length:
            raise ScanError(
                f"{self.url}: file ends before byte {offset + length} (truncated file?)"
            )
        return data


@contextmanager
def open_source(url: str, storage_options: Mapping[str, Any] | None) -> Iterator[OpenSource]:
    """Open ``url`` for scanning.

    Local files are opened by h5py itself (by path, no Python in the I/O path) and referenced
    by their absolute path; other URLs through fsspec, referenced by the URL as given.
    """
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    local = isinstance(fs, LocalFileSystem)
    with ExitStack() as stack:
        try:
            raw = stack.enter_context(fs.open(path, "rb", **_open_options(local)))
            h5 = stack.enter_context(h5py.File(path if local else raw, "r"))
        except FileNotFoundError as exc:
            raise SourceNotFoundError(f"{url}: no such file") from exc
        except OSError as exc:
            raise ScanError(f"{url}: h5py cannot open it as HDF5: {exc}") from exc
        yield OpenSource(h5, _reference_url(url, path, local), raw)


def _open_options(local: bool) -> dict[str, Any]:
    return {} if local else {"block_size": BLOCK_SIZE, "cache_type": "readahead"}


def _reference_url(url: str, path: str, local: bool) -> str:
    return os.path.abspath(path) if local else url
