"""`check_sources`: every file a reference set's record names, compared with what it is now:
changed (size, modification time or ETag), vanished, or unreachable."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from refzarr.errors import RefFormatError
from refzarr.model import RefGroup
from refzarr.sources.record import ScanRecord, read_record
from refzarr.sources.state import SourceState, Unreachable, source_states

__all__ = ["SourceChange", "changes_of", "check_sources", "require_record", "required"]

Kind = Literal["changed", "vanished", "unreachable"]


@dataclass(frozen=True, slots=True)
class SourceChange:
    """A source file that is not as its scan found it.

    Attributes
    ----------
    url
        The file.
    kind
        ``"changed"``, ``"vanished"`` or ``"unreachable"`` (its state could not be asked for).
    detail
        What changed (``"size 10 -> 12 bytes; modified ... -> ..."``), or why it is unreachable.
    scan
        The URL whose scan referenced the file (the same file, but for sidecars and Zarr
        stores); what `refresh` scans again.
    """

    url: str
    kind: Kind
    detail: str
    scan: str

    def __str__(self) -> str:
        via = "" if self.scan == self.url else f" (scanned as {self.scan})"
        return f"{self.url}: {self.kind}{via}: {self.detail}"


def check_sources(
    refs: RefGroup | str | os.PathLike[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    refs_options: Mapping[str, Any] | None = None,
) -> list[SourceChange]:
    """Every source file of a reference set that changed, vanished or cannot be reached since
    it was scanned (an empty list: all as scanned).

    Only file states are compared (one ``stat`` or metadata request per file, none of their
    bytes read): a file counts as changed when its size differs, or its ETag (where the
    storage gives one on both sides, as object stores do), else its modification time.

    Parameters
    ----------
    refs
        A group (from `refzarr.read`, `refzarr.combine`, ...), the path / URL of a
        reference set, or of an Icechunk repository refzarr wrote (its ``main`` branch's
        record, kept in the root group's attributes).
    storage_options
        fsspec options for the source files.
    refs_options
        fsspec options for reading ``refs`` when it is a path or URL.

    Raises
    ------
    RefFormatError
        When the reference set records no sources (written by another tool, or by a refzarr
        before sources were recorded): scan the files again.
    """
    if not isinstance(refs, RefGroup):
        from refzarr.formats.icechunk.reading import is_icechunk_repository, read_icechunk_record

        where = os.fspath(refs)
        if is_icechunk_repository(where, refs_options):
            scans = required(read_icechunk_record(where, refs_options).scans, where)
            return changes_of(scans, storage_options)
    group, where = _group(refs, refs_options)
    scans = require_record(group, where)
    return changes_of(scans, storage_options)


def _group(
    refs: RefGroup | str | os.PathLike[str], refs_options: Mapping[str, Any] | None
) -> tuple[RefGroup, str]:
    if isinstance(refs, RefGroup):
        return refs, "the group"
    from refzarr.formats.api import read

    return read(refs, refs_options), os.fspath(refs)


def require_record(group: RefGroup, where: str) -> list[ScanRecord]:
    """The scans ``group`` records; RefFormatError when it records none."""
    return required(read_record(group, where), where)


def required(scans: list[ScanRecord], where: str) -> list[ScanRecord]:
    """``scans``; RefFormatError naming ``where`` when there are none."""
    if not scans:
        raise RefFormatError(
            f"{where}: records no sources (it was not made by a refzarr scan that records "
            "them, or the record was dropped); scan the files again to check them later"
        )
    return scans


def changes_of(
    scans: list[ScanRecord], storage_options: Mapping[str, Any] | None
) -> list[SourceChange]:
    """The changes of every file the scans recorded, in record order."""
    urls = [url for scan in scans for url in scan.files]
    now = source_states(urls, storage_options)
    found = []
    for scan in scans:
        for url, then in scan.files.items():
            change = _change(url, then, now[url], scan.url)
            if change is not None:
                found.append(change)
    return found


def _change(
    url: str, then: SourceState, now: SourceState | Unreachable | None, scan: str
) -> SourceChange | None:
    if now is None:
        return SourceChange(url, "vanished", "no such file any more", scan)
    if isinstance(now, Unreachable):
        return SourceChange(url, "unreachable", now.reason, scan)
    differences = then.changes(now)
    if not differences:
        return None
    return SourceChange(url, "changed", "; ".join(differences), scan)
