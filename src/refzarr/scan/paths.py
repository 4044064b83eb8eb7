"""Plain local paths (no protocol, no storage options): scanners read them with ``open`` and
``pread`` instead of fsspec, which costs a small file's scan a noticeable share; how references
name a file (`reference_url`; `opened_path`, from `refzarr.io.paths`); and `LocalFile`, such a
file opened once by `refzarr.scan` for detection, its scanner and its record of sources."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

from refzarr.io.paths import opened_path

__all__ = ["LOCAL_HEAD_BYTES", "LocalFile", "opened_path", "plain_local_path", "reference_url"]

LOCAL_HEAD_BYTES = 2**16
"""Bytes of a plain local file `refzarr.scan` reads first: detection looks at the first
`refzarr.scan.base.HEAD_BYTES` of them, a scanner may parse its header from them (a small
netCDF3 file's header and coordinates are in them; the file is in the page cache anyway)."""


def plain_local_path(url: str, storage_options: Mapping[str, Any] | None) -> str | None:
    """The absolute path fsspec would give for a local path without protocol or options, or
    None for any other URL (to be opened through fsspec)."""
    if storage_options or ":" in url or os.sep != "/":
        return None
    if url.startswith("/"):  # what fsspec makes of an absolute path, without its machinery
        return url.rstrip("/") or "/"
    from fsspec.implementations.local import LocalFileSystem  # on first use (light import)

    path: str = LocalFileSystem._strip_protocol(url)
    return path


def reference_url(url: str, path: str, local: bool) -> str:
    """How every scanner's references name the file it was given as ``url`` (fsspec's path
    ``path`` on its filesystem, ``local`` when that is the local disk).

    A local file, whether given as a path (relative or not) or a ``file://`` URL, is named by
    the absolute path the system opens (`opened_path`): the same references either way,
    which fsspec's reference filesystem, kerchunk and refzarr's readers open as local files
    and Icechunk / VirtualiZarr receive as ``file://`` URLs. Any other file is named by
    ``url`` as given (its protocol kept; chained URLs too).
    """
    return opened_path(path) if local else url


class LocalFile(NamedTuple):
    """A plain local file `refzarr.scan` opened to detect its format, lent to the scanner
    (``scanner.scan_opened(file)``, where the scanner has that method) so that a small file's
    scan opens, stats and reads its first bytes once.

    The scan closes ``fd`` when the scanner returns; a scanner must not keep it.
    """

    url: str
    """The path as given to `refzarr.scan`."""
    path: str
    """`plain_local_path` of it: the path a scanner given ``url`` would open."""
    fd: int
    """The open file (read-only)."""
    stat: os.stat_result
    """Its state, taken before it was opened."""
    head: bytes
    """Its first `LOCAL_HEAD_BYTES` (fewer when it is shorter)."""
    absolute: str
    """``opened_path(path)``: how references to it name it."""
