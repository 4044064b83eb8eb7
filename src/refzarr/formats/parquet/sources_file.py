"""The record of a Parquet reference set's sources, kept in a file of its own.

A combined set records every source file (~180 bytes each): in ``.zmetadata`` that record
was most of the file (3.4 of 3.7 MB at 20,000 files), read and parsed at every opening,
though only source checks, refreshes and appends need it. Sets written since keep it in
`SOURCES_FILE` beside ``.zmetadata``, named there by the top-level key `SOURCES_KEY` with
the file's digest::

    {"metadata": {...}, "record_size": 10000, "every_record_written": true,
     "refzarr_sources": {"version": 1, "blake2b": "<hex digest of .zsources.json.zst>"}}

The file (zstd-compressed text) holds the document of `RefGroup.sources` as lines of JSON:
its fields but ``scans`` (``{"version": 1}``), then the files each scan records (one list
per scan, in order), then one line per scan entry. A read's source check looks its files up
there, parsing only the lines of their scans (`FileStates`); the whole record is parsed when
a command needs it (validate, refresh, append). A record whose scans are not objects with
``files`` is written as one JSON document instead (and read whole).

The record is read when first used (`RefGroup.sources` is a `DeferredJSON`). Its digest ties
it to the ``.zmetadata`` read at the opening: a set rewritten in between (refreshed,
appended) is refused with "open it again" rather than checked against another set's record.
fsspec, zarr and kerchunk ignore the key and the file. Sets written before keep the record
in the root attribute ``_nc_refzarr_sources`` and are read as they are.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import zstandard

from refzarr.errors import RefFormatError
from refzarr.formats.source import Location, decompress
from refzarr.model.frozen import DeferredJSON, plain_json

__all__ = [
    "SOURCES_FILE",
    "SOURCES_KEY",
    "FileStates",
    "deferred_sources",
    "parse_entry",
    "sources_file",
]

SOURCES_FILE = ".zsources.json.zst"
"""The record's file, at the set's root (a member cannot be named ``.z...``)."""

SOURCES_KEY = "refzarr_sources"
"""The top-level ``.zmetadata`` key naming the record's digest."""

FILE_VERSION = 1
"""The layout of `SOURCES_FILE` (one JSON document); a reader refuses others by name."""

_LEVEL = 3


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def sources_file(sources: Mapping[str, Any] | None) -> tuple[bytes, dict[str, Any]] | None:
    """The bytes of `SOURCES_FILE` for a record (`RefGroup.sources`) and its `SOURCES_KEY`
    entry; None for a set without one."""
    if sources is None:
        return None
    document = plain_json(sources)
    scans = document.get("scans")
    if not isinstance(scans, list | tuple) or any(_files_of(s) is None for s in scans):
        return _whole(document)  # not a record refzarr reads: kept as it is, read whole
    header = {k: v for k, v in document.items() if k != "scans"}
    index = [list(_files_of(scan)) for scan in scans]
    lines = [header, index, *scans]
    text = "\n".join(json.dumps(line, separators=(",", ":")) for line in lines).encode()
    data = zstandard.ZstdCompressor(level=_LEVEL).compress(text)
    return data, {"version": FILE_VERSION, "blake2b": _digest(data)}


def _files_of(scan: Any) -> Any:
    files = scan.get("files") if isinstance(scan, Mapping) else None
    return files if isinstance(files, Mapping) else None


def _whole(document: Any) -> tuple[bytes, dict[str, Any]]:
    text = json.dumps(document, separators=(",", ":")).encode("utf-8")
    data = zstandard.ZstdCompressor(level=_LEVEL).compress(text)
    return data, {"version": FILE_VERSION, "blake2b": _digest(data)}


def parse_entry(value: Any, where: str) -> str | None:
    """The digest a `SOURCES_KEY` entry names (None when absent); RefFormatError if
    malformed."""
    if value is None:
        return None
    if isinstance(value, dict) and value.get("version") not in (FILE_VERSION, None):
        raise RefFormatError(
            f"{where}: its record of sources has file layout {value.get('version')!r}; this "
            f"refzarr reads layout {FILE_VERSION} (upgrade refzarr)"
        )
    digest = value.get("blake2b") if isinstance(value, dict) else None
    if not isinstance(digest, str) or len(digest) != 40 or "version" not in value:
        raise RefFormatError(
            f"{where}: {SOURCES_KEY!r} must be {{'version': {FILE_VERSION}, 'blake2b': <40 hex "
            f"digits>}}, got {value!r:.120}"
        )
    return digest


def deferred_sources(location: Location, digest: str) -> DeferredJSON:
    """The record of the set at ``location``, read from `SOURCES_FILE` when first used.

    Reading it raises `RefFormatError` when the file is absent, is not the one whose
    ``digest`` the set's ``.zmetadata`` gave (rewritten since), or is no JSON object.
    """
    loader = _Loader(location, digest)
    return DeferredJSON(loader, lookup=loader.lookup)


class _Loader:
    """Reads and checks the record file (a callable for `DeferredJSON`), whole or only the
    scans of the files asked for (`lookup`)."""

    def __init__(self, location: Location, digest: str) -> None:
        self.location = location
        self.digest = digest
        self._lines: list[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def shown(self) -> str:
        return f"{self.location.shown.rstrip('/')}/{SOURCES_FILE}"

    def __call__(self) -> dict[str, Any]:
        lines = self.lines()
        if len(lines) == 1:  # one document (a record refzarr does not read as scans)
            return self._object(lines[0], "the record of sources")
        header = self._object(lines[0], "its first line")
        scans = self._json(b"[" + b",".join(lines[2:]) + b"]")
        return {**header, "scans": scans}

    def lookup(self) -> FileStates | None:
        """File URL -> its recorded state (JSON), reading only the scans of files asked;
        None for a record written as one document (read whole)."""
        lines = self.lines()
        if len(lines) == 1:
            return None
        header = self._object(lines[0], "its first line")
        index = self._json(lines[1])
        if not isinstance(index, list) or len(index) != len(lines) - 2:
            raise RefFormatError(f"{self.shown}: its index line does not list every scan")
        where: dict[str, int] = {}
        for number, files in enumerate(index):
            if not isinstance(files, list):
                raise RefFormatError(f"{self.shown}: malformed index entry {files!r:.80}")
            for url in files:
                where[url] = number  # later scans win
        return FileStates(header, where, lines[2:], self.shown)

    def _object(self, line: bytes, what: str) -> dict[str, Any]:
        found = self._json(line)
        if not isinstance(found, dict):
            raise RefFormatError(f"{self.shown}: {what} must be a JSON object")
        return found

    def _json(self, text: bytes) -> Any:
        try:
            return json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RefFormatError(f"{self.shown}: not valid JSON ({exc})") from exc

    def lines(self) -> list[bytes]:
        """The file's lines, read and checked once."""
        with self._lock:
            if self._lines is None:
                self._lines = self._read().split(b"\n")
            return self._lines

    def _read(self) -> bytes:
        from refzarr.formats.parquet.source import whole_file

        location = self.location
        shown = self.shown
        try:
            data = location.ask(
                f"reading {SOURCES_FILE}",
                lambda: whole_file(location.fs, location.join(SOURCES_FILE)),
            )
        except FileNotFoundError:
            raise RefFormatError(
                f"{shown}: the record of this set's sources is absent (its .zmetadata names "
                "one): the set was rewritten since it was opened (open it again) or is "
                "damaged (rewrite it)"
            ) from None
        if _digest(data) != self.digest:
            raise RefFormatError(
                f"{shown}: not the record of sources the set's .zmetadata names (another "
                "digest): the set was rewritten since it was opened (refreshed, appended); "
                "open it again"
            )
        data = decompress(data, shown=shown)
        return data


class FileStates(Mapping[str, Any]):
    """The recorded state (JSON) of each file a record names, each scan's line parsed when
    one of its files is first asked for; ``header``: the record's other fields."""

    def __init__(
        self, header: dict[str, Any], where: dict[str, int], lines: list[bytes], shown: str
    ) -> None:
        self.header = header
        self._where = where
        self._lines = lines
        self._shown = shown
        self._parsed: dict[int, Any] = {}

    def __getitem__(self, url: str) -> Any:
        number = self._where[url]
        entry = self._parsed.get(number)
        if entry is None:
            try:
                entry = json.loads(self._lines[number])
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise RefFormatError(f"{self._shown}: not valid JSON ({exc})") from exc
            self._parsed[number] = entry
        files = entry.get("files") if isinstance(entry, dict) else None
        if not isinstance(files, dict) or url not in files:
            raise RefFormatError(
                f"{self._shown}: scan {number} does not record {url} as its index says"
            )
        return files[url]

    def __contains__(self, url: object) -> bool:
        return url in self._where

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)
