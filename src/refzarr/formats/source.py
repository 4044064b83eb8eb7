"""Locating reference sets: fsspec URL resolution, format detection and decompression."""

from __future__ import annotations

import errno
import gzip
import io
import os
import zlib
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

import zstandard

from refzarr.codecs.bounded import read_at_most
from refzarr.errors import ReferenceFetchError, RefFormatError, SourceNotFoundError

__all__ = [
    "Compression",
    "Location",
    "compression_from_suffix",
    "decompress",
    "detect_format",
    "locate",
    "remote_call",
    "set_max_expansion",
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
        protocols = _protocols(self.fs)
        return "file" in protocols or "local" in protocols

    @property
    def is_http(self) -> bool:
        """True on fsspec's HTTP filesystem (no directories: asking whether a path is one,
        or whether a file exists, downloads it)."""
        return bool({"http", "https"} & set(_protocols(self.fs)))


def remote_call(fs: Any, what: str, call: Callable[[], T]) -> T:
    """``call()`` on filesystem ``fs``; for a remote one within the read deadline, its
    failures a `ReferenceFetchError` naming ``what``."""
    if {"file", "local", "memory"} & set(_protocols(fs)):
        return call()
    from refzarr.io.retry import call_within_deadline

    return call_within_deadline(call, what)


def _protocols(fs: Any) -> tuple[str, ...]:
    """The protocols fsspec filesystem ``fs`` answers to."""
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def locate(source: str | os.PathLike[str], storage_options: Mapping[str, Any] | None) -> Location:
    """Resolve a path or any fsspec URL to a `Location`."""
    import fsspec  # on first use: `import refzarr` stays light

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


def detect_format(
    location: Location, *, head: int | None = None
) -> tuple[Literal["json", "parquet"], bytes]:
    """The format of the reference set at ``location`` and, for JSON, the file's bytes (its
    first ``head`` bytes when given); for Parquet, the bytes of its ``.zmetadata`` when they
    were read to tell (over HTTP), else none.

    A name ending ``.parq``/``.parquet`` says Parquet. Otherwise the file is read first, head
    first (`HEAD_READ` bytes; the rest only when they begin like a JSON document or a
    zstd/gzip stream, which are the set), so a JSON set costs one request, two when larger
    than the head (asking whether it is a directory costs fsspec's HTTP filesystem a download
    of it); anything else (no such file, a directory, an HTTP directory listing) is a Parquet
    set when ``.zmetadata`` is inside it (over HTTP it is read at once: asking whether it
    exists downloads it too, and the caller would download it again).

    Raises
    ------
    SourceNotFoundError
        Nothing is at ``location``.
    RefFormatError
        A directory without ``.zmetadata`` is there (named as such when it is an Icechunk
        repository).
    """
    if location.path.lower().endswith((".parq", ".parquet")):
        return "parquet", b""
    try:
        data = _read(location, head)
    except (FileNotFoundError, IsADirectoryError) as exc:
        zmetadata = _zmetadata(location)
        if zmetadata is not None:
            return "parquet", zmetadata
        if isinstance(exc, IsADirectoryError):
            if _is_icechunk(location):
                raise RefFormatError(
                    f"{location.shown}: is an Icechunk repository, not a reference set: open "
                    "it with Icechunk (xr.open_zarr(repo.readonly_session('main').store, "
                    "group=..., consolidated=False), the repository opened with its virtual "
                    "chunk containers authorized), or read the JSON / Parquet set it was "
                    "written from"
                ) from exc
            raise RefFormatError(
                f"{location.shown}: is a directory but holds no .zmetadata (not a Parquet "
                "reference set)"
            ) from exc
        raise SourceNotFoundError(f"{location.shown}: no such reference set") from exc
    if looks_like_json(data) or _is_source_file(location, data):
        return "json", data  # a source file (a netCDF given by mistake): the caller names it
    zmetadata = _zmetadata(location)
    return ("json", data) if zmetadata is None else ("parquet", zmetadata)


def _is_source_file(location: Location, data: bytes) -> bool:
    """Whether ``data``, the first bytes of the file at ``location``, begin like a file
    refzarr scans (netCDF, HDF5, TIFF, GRIB, ...): then no Parquet set is looked for inside
    it (on an object store a HEAD for ``big.nc/.zmetadata``). Only the scanners' detectors
    are asked, on those bytes alone."""
    from refzarr.errors import ScanError
    from refzarr.scan.base import HEAD_BYTES, Probe
    from refzarr.scan.detect import detect_probe

    head = data[: 8 * HEAD_BYTES]
    try:
        detect_probe(Probe(location.shown, head, lambda at, n: head[at : at + n]))
    except (ScanError, SourceNotFoundError):
        return False
    return True


HEAD_READ = 65536
"""Bytes of a file read before the rest: one that does not begin like a JSON set (a 10 GB
netCDF file given by mistake) is not read whole. Remote files are asked for them in one ranged
request, which is the whole of a smaller set (s3fs sends no HEAD before a ranged read)."""


def _read(location: Location, head: int | None) -> bytes:
    """The file at ``location``, or its first ``head`` bytes. A file that does not begin like
    a JSON set is read only up to `HEAD_READ` bytes (it cannot be one).

    A remote set larger than the head is read again from its start in the second request,
    head included: one response is one version of the object, whereas a head and a rest
    could come from two (a set replaced between the requests would be read as a splice of
    both, parsed or not). fsspec's reads give no ETag or version to compare, and asking for
    one costs a request; the head read twice costs `HEAD_READ` bytes."""
    fs, path = location.fs, location.path
    if head is None and location.is_local:
        with fs.open(path, "rb") as f:
            first = bytes(f.read(HEAD_READ))
            return first + bytes(f.read()) if looks_like_json(first) else first
    if head is not None:
        return location.ask("reading it", lambda: _first_bytes(fs, path, head))
    first = location.ask("reading it", lambda: _first_bytes(fs, path, HEAD_READ))
    if len(first) != HEAD_READ or not looks_like_json(first):
        return first  # all of it (a server that ignores ranges sends all), or not a set
    # ranged from 0 (not the whole object: s3fs would ask its size first, one HEAD more)
    return location.ask("reading it", lambda: _all_bytes(fs, path))


def _all_bytes(fs: Any, path: str) -> bytes:
    """The whole file at ``path`` on ``fs``, in one request (a range from byte 0)."""
    return bytes(fs.cat_file(path, start=0))


def _first_bytes(fs: Any, path: str, size: int) -> bytes:
    """The first ``size`` bytes of the file at ``path`` on ``fs`` (fewer when it is shorter);
    over HTTP never more, also from a server that ignores ``Range`` (`read_range`)."""
    from refzarr.io.http_range import is_http, read_range

    try:
        if is_http(fs):
            return read_range(fs, path, 0, size)[:size]
        return bytes(fs.cat_file(path, start=0, end=size))
    except Exception as exc:
        refused = getattr(exc, "status", None) == 416  # aiohttp's answer (fsspec's HTTP)
        if not refused and not (isinstance(exc, OSError) and exc.errno == errno.EINVAL):
            raise
        return bytes(fs.cat_file(path))  # empty: any range of it is refused (416)


def looks_like_json(data: bytes) -> bool:
    """Whether ``data`` begins like a JSON object, or a zstd or gzip stream (of one)."""
    return data.startswith((ZSTD_MAGIC, GZIP_MAGIC)) or data.lstrip()[:1] == b"{"


def _is_icechunk(location: Location) -> bool:
    """Whether the directory at ``location`` looks like an Icechunk repository (``snapshots/``
    and ``refs/`` or a ``repo`` object), to name it in the error for reading it as a set."""
    fs = location.fs
    try:
        return bool(
            fs.isdir(location.join("snapshots"))
            and (fs.isdir(location.join("refs")) or fs.isfile(location.join("repo")))
        )
    except OSError:
        return False


def _zmetadata(location: Location) -> bytes | None:
    """None unless ``.zmetadata`` is inside ``location`` (a Parquet reference directory);
    over HTTP its bytes, elsewhere b"" (not read)."""
    path = location.join(".zmetadata")
    fs = location.fs
    try:
        if location.is_http:
            return bytes(location.ask("reading .zmetadata", lambda: fs.cat_file(path)))
        return b"" if location.ask("looking for .zmetadata", lambda: fs.exists(path)) else None
    except ReferenceFetchError:
        raise
    except OSError:  # none there; a file where the folder would be, no permission: no set
        return None


MAX_EXPANSION = 100
"""How many times its own size a compressed JSON set may decompress to (beyond
`EXPANSION_FLOOR`): refzarr's sets reach 9-17x; a 33 KB zstd file of spaces reaches 32,000x
(1 GiB), and was held in memory and parsed whole before anything looked at it."""

EXPANSION_FLOOR = 2**26
"""Bytes any compressed JSON set may decompress to, whatever its size (64 MiB)."""

_expansion = {"ratio": MAX_EXPANSION}


def set_max_expansion(ratio: int) -> None:
    """Allow compressed JSON reference sets to decompress to up to ``ratio`` times their
    size (process-wide; trusted sets only; `EXPANSION_FLOOR` bytes are always allowed).

    Raises
    ------
    ValueError
        When ``ratio`` is not a positive integer.
    """
    if isinstance(ratio, bool) or not isinstance(ratio, int) or ratio < 1:
        raise ValueError(f"the ratio must be a positive integer, got {ratio!r}")
    _expansion["ratio"] = ratio


def decompress(data: bytes, *, shown: str) -> bytes:
    """``data`` decompressed when it is a zstd or gzip stream (by magic bytes), else as is.

    Raises
    ------
    RefFormatError
        When the stream is damaged, or would decompress to more than `MAX_EXPANSION` times
        its size and `EXPANSION_FLOOR` (checked as it is decompressed, never held whole).
    """
    bound = max(EXPANSION_FLOOR, _expansion["ratio"] * len(data))
    try:
        if data.startswith(ZSTD_MAGIC):
            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
            return _bounded_read(reader, bound, len(data), shown)
        if data.startswith(GZIP_MAGIC):
            with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as stream:
                return _bounded_read(stream, bound, len(data), shown)
    except (zstandard.ZstdError, OSError, EOFError, zlib.error) as exc:
        raise RefFormatError(f"{shown}: corrupt compressed reference set ({exc})") from exc
    return data


_PIECE = 2**24


def _bounded_read(stream: Any, bound: int, size: int, shown: str) -> bytes:
    """All of ``stream``, read a piece at a time; RefFormatError past ``bound`` bytes."""
    data = read_at_most(stream, bound, _PIECE)
    if data is not None:
        return data
    raise RefFormatError(
        f"{shown}: the compressed reference set ({size:,} bytes) decompresses to more than "
        f"{bound:,} bytes ({_expansion['ratio']:,} times its size; a decompression bomb?): "
        "not read. For a set you trust, raise the ratio with "
        "refzarr.formats.source.set_max_expansion"
    )
