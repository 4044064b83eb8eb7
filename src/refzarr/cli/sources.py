"""The sources ``refzarr scan`` is given: paths, URLs and glob patterns (local or any fsspec
filesystem) expanded to a list of files and Zarr stores (directories), sorted within each
pattern, each once."""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, Sequence
from typing import Any

from refzarr.cli.common import CommandFailed

__all__ = ["expand_sources"]

_MAGIC = frozenset("*?[")


def expand_sources(
    patterns: Sequence[str], storage_options: Mapping[str, Any] | None = None
) -> list[str]:
    """Every file the arguments name, in argument order (a pattern's matches sorted).

    Raises
    ------
    CommandFailed
        When a pattern matches nothing.
    """
    found: dict[str, None] = {}
    for pattern in patterns:
        if not _MAGIC & set(pattern):
            found[pattern] = None
            continue
        matches = _remote(pattern, storage_options) if _is_remote(pattern) else _local(pattern)
        if not matches:
            raise CommandFailed(f"{pattern}: no files match this pattern")
        found.update(dict.fromkeys(matches))
    return list(found)


def _is_remote(pattern: str) -> bool:
    protocol = pattern.split("://", 1)[0] if "://" in pattern else "file"
    return protocol not in ("file", "local")


def _local(pattern: str) -> list[str]:
    path = pattern.split("://", 1)[1] if "://" in pattern else pattern
    matches = glob.glob(os.path.expanduser(path), recursive=True)
    return sorted(p for p in matches if os.path.isfile(p) or _is_store(os.listdir(p)))


def _remote(pattern: str, storage_options: Mapping[str, Any] | None) -> list[str]:
    import fsspec

    fs, _, _ = fsspec.core.get_fs_token_paths(pattern, storage_options=dict(storage_options or {}))
    matches = fs.glob(pattern, detail=True)
    files = [
        name
        for name, info in matches.items()
        if info.get("type") != "directory" or _is_store(fs.ls(name, detail=False))
    ]
    return sorted(fs.unstrip_protocol(name) for name in files)


_STORE_MARKERS = frozenset({".zgroup", ".zarray", ".zmetadata", "zarr.json"})


def _is_store(entries: Sequence[str]) -> bool:
    """Whether a directory with these entries is a Zarr store (scanned as one source)."""
    return any(entry.rstrip("/").rpartition("/")[2] in _STORE_MARKERS for entry in entries)
