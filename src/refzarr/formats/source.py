"""Locating reference sets: fsspec URL resolution, format detection and decompression."""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

import fsspec
import zstandard

from refzarr.errors import ReferenceFetchError, RefFormatError, SourceNotFoundError

__all__ = [
    "Compression",
    "Location",
    "compression_from_suffix",
    "decompress",
    "detect_format",
    "locate",
    "read_bytes",
    "remote_call",
]

T = TypeVar("T")
Compression = Literal["zstd", "gzip"] | None
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"


class Location:
    """A filesystem and a path on it, with the text users see in messages."""

    def __init__(self, fs: Any, path: str, shown: str) -> None:
        self.fs = fs
        self.path = path.rstrip("/") or path
        self.shown = shown

    def join(self, *parts: str) -> str:
        """A path below this location."""
        return "/".join([self.path, *parts])

    def ask(self, what: str, call: Callable[[], T]) -> T:
        """``call()``, a request to this location's filesystem: within the read deadline
        when remote (`refzarr.io.call_within_deadline`; ``what`` names the request)."""
        return remote_call(self.fs, f"{self.shown}: {what}", call)

    @property
    def is_local(self) -> bool:
        """True when the filesystem is the local disk."""
        protocol = self.fs.protocol
        protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
        return "file" in protocols or "local" in protocols


def remote_call(fs: Any, what: str, call: Callable[[], T]) -> T:
    """``call()`` on filesystem ``fs``; for a remote one within the read deadline, its
    failures a `ReferenceFetchError` naming ``what``."""
    protocol = fs.protocol
    protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
    if "file" in protocols or "local" in protocols or "memory" in protocols:
        return call()
    from refzarr.io.fetch import call_within_deadline

    return call_within_deadline(call, what)


def locate(source: str | os.PathLike[str], storage_options: Mapping[str, Any] | None) -> Location:
    """Resolve a path or any fsspec URL to a `Location`."""
    shown = os.fspath(source)
    try:
        fs, path = fsspec.core.url_to_fs(shown, **dict(storage_options or {}))
    except (ValueError, ImportError) as exc:
        raise RefFormatError(f"{shown}: cannot open this URL ({exc})") from exc
    return Location(fs, path, shown)


def compression_from_suffix(path: str) -> Compression:
    """The compression a file name's suffix names (``.zst``/``.zstd``, ``.gz``), if any."""
    lowered = path.lower()
    if lowered.endswith((".zst", ".zstd")):
        return "zstd"
    if lowered.endswith(".gz"):
        return "gzip"
    return None


def detect_format(location: Location) -> Literal["json", "parquet"]:
    """``"parquet"`` for a Parquet reference directory (``.zmetadata`` inside), else ``"json"``."""
    lowered = location.path.lower()
    if lowered.endswith((".parq", ".parquet")):
        return "parquet"
    fs = location.fs
    try:
        # two requests, each retried on its own
        if location.ask("looking for .zmetadata", lambda: fs.isdir(location.path)) and (
            location.ask("looking for .zmetadata", lambda: _exists(fs, location.join(".zmetadata")))
        ):
            return "parquet"
    except ReferenceFetchError:
        raise
    except OSError:
        pass
    return "json"


def _exists(fs: Any, path: str) -> bool:
    """Whether ``path`` exists; a server's failure raises (fsspec's HTTP filesystem answers
    False to any error status unless asked ``strict``: a 503 would read as absent)."""
    protocol = fs.protocol
    protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
    if "http" in protocols or "https" in protocols:
        return bool(fs.exists(path, strict=True))
    return bool(fs.exists(path))


def read_bytes(location: Location) -> bytes:
    """The whole file at ``location``; SourceNotFoundError when it does not exist."""
    try:
        data: bytes = location.ask("reading it", lambda: location.fs.cat_file(location.path))
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"{location.shown}: no such reference set") from exc
    except IsADirectoryError as exc:
        raise RefFormatError(
            f"{location.shown}: is a directory but holds no .zmetadata (not a Parquet "
            "reference set)"
        ) from exc
    return data


def decompress(data: bytes, *, shown: str) -> bytes:
    """``data`` decompressed when it is a zstd or gzip stream (by magic bytes), else as is."""
    try:
        if data.startswith(ZSTD_MAGIC):
            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
            return reader.read()
        if data.startswith(GZIP_MAGIC):
            return gzip.decompress(data)
    except (zstandard.ZstdError, OSError, EOFError, zlib.error) as exc:
        raise RefFormatError(f"{shown}: corrupt compressed reference set ({exc})") from exc
    return data
