"""Plain local paths (no protocol, no storage options): scanners read them with ``open`` and
``pread`` instead of fsspec, which costs a small file's scan a noticeable share."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fsspec.implementations.local import LocalFileSystem

__all__ = ["plain_local_path"]


def plain_local_path(url: str, storage_options: Mapping[str, Any] | None) -> str | None:
    """The absolute path fsspec would give for a local path without protocol or options, or
    None for any other URL (to be opened through fsspec)."""
    if storage_options or ":" in url or os.sep != "/":
        return None
    if url.startswith("/"):  # what fsspec makes of an absolute path, without its machinery
        return url.rstrip("/") or "/"
    path: str = LocalFileSystem._strip_protocol(url)
    return path
