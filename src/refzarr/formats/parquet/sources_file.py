"""The record of a Parquet reference set's sources, kept in a file of its own.

A combined set records every source file (~180 bytes each): in ``.zmetadata`` that record
was most of the file (3.4 of 3.7 MB at 20,000 files), read and parsed at every opening,
though only source checks, refreshes and appends need it. Sets written since keep it in
`SOURCES_FILE` beside ``.zmetadata`` (the document of `RefGroup.sources`, zstd-compressed
JSON), named in ``.zmetadata`` by the top-level key `SOURCES_KEY` with the file's digest::

    {"metadata": {...}, "record_size": 10000, "every_record_written": true,
     "refzarr_sources": {"version": 1, "blake2b": "<hex digest of .zsources.json.zst>"}}

The record is read when first used (`RefGroup.sources` is a `DeferredJSON`). Its digest ties
it to the ``.zmetadata`` read at the opening: a set rewritten in between (refreshed,
appended) is refused with "open it again" rather than checked against another set's record.
fsspec, zarr and kerchunk ignore the key and the file. Sets written before keep the record
in the root attribute ``_nc_refzarr_sources`` and are read as they are.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import zstandard

from refzarr.errors import RefFormatError
from refzarr.formats.source import Location, decompress
from refzarr.model.frozen import DeferredJSON, plain_json

__all__ = ["SOURCES_FILE", "SOURCES_KEY", "deferred_sources", "parse_entry", "sources_file"]

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
    text = json.dumps(plain_json(sources), separators=(",", ":")).encode("utf-8")
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
    return DeferredJSON(_Loader(location, digest))


class _Loader:
    """Reads and checks the record file (a callable for `DeferredJSON`)."""

    def __init__(self, location: Location, digest: str) -> None:
        self.location = location
        self.digest = digest

    def __call__(self) -> dict[str, Any]:
        from refzarr.formats.parquet.source import whole_file

        location = self.location
        shown = f"{location.shown.rstrip('/')}/{SOURCES_FILE}"
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
        try:
            document = json.loads(decompress(data, shown=shown))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RefFormatError(f"{shown}: not valid JSON ({exc})") from exc
        if not isinstance(document, dict):
            raise RefFormatError(f"{shown}: the record of sources must be a JSON object")
        return document
