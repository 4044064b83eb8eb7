"""One listing of a Zarr store: every key under its root with its size, sorted, so that each
array's chunk keys are a slice of it (no request per chunk, no listing per array)."""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import fsspec
import numpy as np
from fsspec.implementations.local import LocalFileSystem

from refzarr.errors import ScanError, SourceNotFoundError
from refzarr.scan.paths import opened_path

__all__ = ["StoreListing", "list_store"]


@dataclass(frozen=True, slots=True)
class StoreListing:
    """The keys of a store (relative to its root, ``/``-separated, sorted) and their sizes.

    Parameters
    ----------
    url
        The store as the user named it, without a trailing ``/`` (for messages).
    fs
        Its fsspec filesystem.
    root
        The root's path in ``fs``.
    keys
        Every object (file) under the root, relative to it, sorted.
    sizes
        Their sizes in bytes, aligned with ``keys``.
    """

    url: str
    fs: fsspec.AbstractFileSystem
    root: str
    keys: tuple[str, ...]
    sizes: np.ndarray[Any, np.dtype[np.uint64]]

    @property
    def is_local(self) -> bool:
        """Whether the store is on the local filesystem."""
        return isinstance(self.fs, LocalFileSystem)

    def __contains__(self, key: object) -> bool:
        k = bisect.bisect_left(self.keys, key) if isinstance(key, str) else len(self.keys)
        return k < len(self.keys) and self.keys[k] == key

    def under(self, prefix: str) -> tuple[tuple[str, ...], np.ndarray[Any, np.dtype[np.uint64]]]:
        """The keys below ``prefix`` (a node's path, ``""`` for the root), relative to it,
        and their sizes."""
        if not prefix:
            return self.keys, self.sizes
        start = f"{prefix}/"
        lo = bisect.bisect_left(self.keys, start)
        hi = bisect.bisect_left(self.keys, f"{prefix}0")  # "0" follows "/" in code points
        return tuple(k[len(start) :] for k in self.keys[lo:hi]), self.sizes[lo:hi]

    def urls_of(self, keys: list[str]) -> list[str]:
        """The URLs references to ``keys`` hold: absolute paths for a local store, else the
        objects' URLs with their protocol."""
        if self.is_local:
            base = opened_path(self.root)
        else:
            base = self.fs.unstrip_protocol(self.root).rstrip("/")
        return [f"{base}/{key}" for key in keys]

    def read(self, keys: list[str]) -> list[bytes]:
        """The bytes of ``keys`` (fetched concurrently where the filesystem can)."""
        if not keys:
            return []
        paths = [f"{self.root}/{k}" for k in keys]
        found = self.fs.cat(paths, on_error="raise")
        return [bytes(found[p]) for p in paths]


def list_store(url: str, storage_options: Mapping[str, Any] | None) -> StoreListing:
    """List every key of the store at ``url`` once.

    Raises
    ------
    SourceNotFoundError
        When nothing exists at ``url``.
    ScanError
        When ``url`` is a file, or the listing fails.
    """
    shown = url.rstrip("/") or url
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    root = path.rstrip("/") or path
    try:
        if isinstance(fs, LocalFileSystem):
            entries = sorted(_walk_local(root, ""))
        else:
            entries = sorted(_listed(fs.find(root, detail=True, withdirs=False), f"{root}/"))
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"{shown}: no such store (directory)") from exc
    except NotADirectoryError as exc:
        raise ScanError(f"{shown}: a file, not a Zarr store (a directory)") from exc
    except OSError as exc:
        raise ScanError(f"{shown}: listing the store failed: {exc}") from exc
    if not entries:
        if fs.isfile(root):
            raise ScanError(f"{shown}: a file, not a Zarr store (a directory)")
        if not fs.exists(root):
            raise SourceNotFoundError(f"{shown}: no such store (directory)")
    keys = tuple(k for k, _ in entries)
    sizes = np.fromiter((s for _, s in entries), dtype=np.uint64, count=len(entries))
    return StoreListing(shown, fs, root, keys, sizes)


def _listed(found: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, int]]:
    """(key, size) of each object an fsspec ``find`` found below ``prefix``."""
    for name, info in found.items():
        if name.startswith(prefix) and info.get("type", "file") != "directory":
            yield name[len(prefix) :], int(info.get("size") or 0)


def _walk_local(root: str, relative: str) -> Iterator[tuple[str, int]]:
    """(key, size) of each file below the local directory ``root`` (one ``stat`` each, by
    ``os.scandir``: fsspec's local ``find`` costs ~100 µs a file in Python)."""
    with os.scandir(os.path.join(root, relative) if relative else root) as entries:
        for entry in entries:
            key = f"{relative}/{entry.name}" if relative else entry.name
            if entry.is_dir():
                yield from _walk_local(root, key)
            elif entry.is_file():
                yield key, entry.stat().st_size
