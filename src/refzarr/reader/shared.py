"""Reference sets opened by path or URL travel to dask workers as that path: each worker process
reads the set once and shares it between the tasks it runs there.

A dask task that reads a variable of ``open_dataset(refs, chunks=...)`` carries the variable's
backend array. Pickled whole, that array would carry its chunk manifest and the set's source
record: the whole reference set, once per task with the ``"processes"`` scheduler (a
1,000-file set: ~270 kB per task, read and validated again by every task). A set opened from a
path or URL pickles instead as a `SetOrigin` (where it is, its storage options, the
allow-list and the source checks) plus the array's path and metadata; the first task a
process runs reads the set there (Parquet: only the record files it needs, kept for later
tasks), and every later task of that process finds it in `_OPENED`. Source checks run once per
file per worker process, and the allow-list holds there as in the process that opened it.
Each opening (each ``open_dataset`` call) is its own entry: a long-lived worker
(dask.distributed) reads a set again when it is opened again, so a set refreshed in place is
never read through the copy an earlier opening left there.

The set read in a worker must still hold the array as it was opened (same shape, dtype,
chunks, codecs, attributes): a set rewritten meanwhile (appended, refreshed to another shape)
raises `RefFormatError` saying to open it again, never reads other chunks in silence.
"""

from __future__ import annotations

import hashlib
import pickle
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from refzarr.errors import RefFormatError
from refzarr.formats.api import read
from refzarr.io import RangeReader
from refzarr.model import ArrayMeta, RefArray, RefGroup
from refzarr.reader.array import ArrayReader
from refzarr.sources.guard import SourceGuard, source_guard

__all__ = ["SetOrigin", "metadata_digest", "opened_set", "set_origin", "shared_reader"]

MAX_SETS = 8
"""Openings of reference sets a process keeps for unpickled arrays (least recently used first
out)."""


@dataclass(frozen=True)
class SetOrigin:
    """Where an opened reference set came from and how it is read: all a worker needs.

    Parameters
    ----------
    url
        The set's path or URL as it was opened.
    storage_options
        fsspec options for the set and its referenced files (credentials included).
    allowed
        The allow-list (`RangeReader.allowed`).
    check_sources
        ``"local"``, ``"all"`` or ``"none"``: the source checks of the reader.
    opening
        Unique per opening (`set_origin` draws it): a process keeps one copy of the set per
        opening, so a set opened again after a change (appended, refreshed) is read again by
        long-lived workers, never served from the copy of an earlier opening.
    """

    url: str
    storage_options: Mapping[str, Any] | None
    allowed: Sequence[str] | None
    check_sources: str
    opening: str = ""

    def reader(self, group: RefGroup) -> RangeReader:
        """The reader of ``group`` (read from this origin) with the allow-list and checks."""
        check: Any = self.check_sources
        guard = source_guard(group, check, self.url)
        return RangeReader(
            storage_options=self.storage_options, allowed=self.allowed, url_check=guard
        )

    def key(self) -> bytes:
        """The key of this origin in a process's cache of opened sets."""
        return pickle.dumps(
            (self.url, self.storage_options, self.allowed, self.check_sources, self.opening),
            protocol=5,
        )


def set_origin(url: str, reader: RangeReader) -> SetOrigin:
    """The origin of a set opened from ``url`` and read through ``reader``."""
    guard = reader.url_check
    check = "none" if not isinstance(guard, SourceGuard) else "all" if guard.remote else "local"
    allowed = None if reader.allowed is None else tuple(reader.allowed)
    options = None if reader.storage_options is None else dict(reader.storage_options)
    return SetOrigin(url, options, allowed, check, uuid.uuid4().hex)


@dataclass(frozen=True, slots=True)
class Opened:
    """A set as a process opened it from its origin: the group, its reader (shared by all
    that read it there: each source file checked once), and what was made from it so far
    (array readers by path, stores by mode)."""

    group: RefGroup
    reader: RangeReader
    made: dict[Any, Any]


_OPENED: OrderedDict[bytes, Opened] = OrderedDict()
_LOCK = threading.Lock()


def shared_reader(origin: SetOrigin, path: str, meta: ArrayMeta) -> ArrayReader:
    """The `ArrayReader` of array ``path`` of the set at ``origin``, opened once per process.

    Raises `RefFormatError` when the set no longer holds the array as ``meta`` describes it.
    """
    opened = opened_set(origin)
    found: ArrayReader | None = opened.made.get(path)
    if found is None:
        array = _array_at(opened.group, path, origin)
        _check_unchanged(array.meta, meta, path, origin)
        found = opened.made.setdefault(path, ArrayReader(array, path, opened.reader))
    elif found.array.meta is not meta and found.array.meta != meta:
        _check_unchanged(found.array.meta, meta, path, origin)
    return found


def metadata_digest(documents: Iterable[tuple[str, bytes]]) -> bytes:
    """A digest of a store's metadata documents (key, bytes), to tell a rewritten set."""
    digest = hashlib.blake2b(digest_size=16)
    for key, document in sorted(documents):
        digest.update(key.encode() + b"\0" + document + b"\0")
    return digest.digest()


def changed_set(origin: SetOrigin) -> RefFormatError:
    """The error for a set whose metadata changed since it was opened."""
    return RefFormatError(
        f"{origin.url}: the reference set changed since it was opened (its metadata differs "
        "now: it was rewritten, appended or refreshed) and a dask worker read the new one. "
        "Open it again"
    )


def opened_set(origin: SetOrigin) -> Opened:
    """The set at ``origin`` as this process opened it (read the first time)."""
    key = origin.key()
    with _LOCK:
        opened = _OPENED.get(key)
        if opened is not None:
            _OPENED.move_to_end(key)
            return opened
    group = read(origin.url, origin.storage_options)  # outside the lock: it may take a while
    with _LOCK:
        opened = _OPENED.setdefault(key, Opened(group, origin.reader(group), {}))
        _OPENED.move_to_end(key)
        while len(_OPENED) > MAX_SETS:
            _OPENED.popitem(last=False)
    return opened


def _array_at(group: RefGroup, path: str, origin: SetOrigin) -> RefArray:
    try:
        node = group[path]
    except KeyError:
        node = None
    if not isinstance(node, RefArray):
        raise RefFormatError(
            f"{origin.url}: array {path!r} is no longer in the reference set (it was when the "
            "dataset was opened; the set was rewritten since): open the dataset again"
        )
    return node


def _check_unchanged(now: ArrayMeta, then: ArrayMeta, path: str, origin: SetOrigin) -> None:
    if now == then:
        return
    differs = [
        f"{name} {getattr(then, name)} then, {getattr(now, name)} now"
        for name in ("shape", "dtype", "chunks")
        if getattr(now, name) != getattr(then, name)
    ] or ["its codecs, fill value or attributes"]
    raise RefFormatError(
        f"{origin.url}: array {path!r} changed since the dataset was opened ("
        f"{'; '.join(differs)}): the reference set was rewritten (appended, refreshed?) and a "
        "dask worker read the new one. Open the dataset again"
    )
