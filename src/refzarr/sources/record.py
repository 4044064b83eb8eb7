"""The record of a reference set's sources (`RefGroup.sources`): for every scan, the URL
scanned, its format and options, and the size / modification time / ETag of every file its
references point into, as they were when the scan began.

The document (written as the hidden root attribute ``_nc_refzarr_sources``)::

    {"version": 1,
     "scans": [{"url": "/data/a.nc", "format": "hdf5", "options": {},
                "files": {"/data/a.nc": {"size": 1024, "mtime": "2026-...Z"}}}]}
"""

from __future__ import annotations

import copy
import copyreg
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from refzarr.errors import RefFormatError
from refzarr.model import ChunkManifest, RefGroup
from refzarr.model.frozen import DeferredJSON, FrozenDict, freeze_json, plain_mapping, thaw_json
from refzarr.sources.state import SourceState, is_local, local_path, source_states

__all__ = [
    "RECORD_VERSION",
    "ScanRecord",
    "merged_sources",
    "read_record",
    "record_of_document",
    "record_scan",
    "recorded_files",
    "referenced_urls",
    "scanned_url",
    "sources_document",
]

RECORD_VERSION = 1


@dataclass(frozen=True, slots=True)
class ScanRecord:
    """One scan: the URL scanned, its format, options, and its files' states then."""

    url: str
    format: str
    options: Mapping[str, Any]
    files: Mapping[str, SourceState]

    def to_json(self) -> dict[str, Any]:
        """The scan's entry in the record."""
        return {
            "url": self.url,
            "format": self.format,
            "options": thaw_json(self.options),
            "files": {url: state.to_json() for url, state in self.files.items()},
        }


def scanned_url(url: str) -> str:
    """``url`` as recorded: local paths made absolute (a refresh may run elsewhere)."""
    return local_path(url) if is_local(url) and not url.startswith("file://") else url


def referenced_urls(group: RefGroup) -> list[str]:
    """Every URL the group's chunk references point to (each once, first seen first)."""
    urls: dict[str, None] = {}
    manifests: list[ChunkManifest] = []
    _collect_manifests(group, manifests)
    for manifest in manifests:
        for block in manifest.iter_written_blocks():
            paths = block.paths
            if not paths:
                continue  # inlined or missing chunks only (a loaded coordinate)
            if len(paths) == 1:
                if paths[0] not in urls and _any_referenced(block.path_id):
                    urls[paths[0]] = None
                continue  # the usual case: one file, seen in an earlier array
            if all(p in urls for p in paths):
                continue
            ids = block.path_id
            counts = np.bincount(ids[ids >= 0], minlength=len(paths))
            urls.update((paths[int(i)], None) for i in np.flatnonzero(counts))
    return list(urls)


def _collect_manifests(group: RefGroup, out: list[ChunkManifest]) -> None:
    """The manifests of the group's arrays, in the order of `RefGroup.arrays` (depth first,
    in member order), without its paths."""
    for member in group.members.values():
        if isinstance(member, RefGroup):
            _collect_manifests(member, out)
        else:
            out.append(member.manifest)


def _any_referenced(ids: npt.NDArray[np.int32]) -> bool:
    """Whether a block of path ids holds a reference (an id >= 0); a small block in plain
    Python (numpy's reductions cost microseconds: this runs for every array scanned)."""
    if ids.shape[0] <= 64:
        return max(ids.tolist(), default=-1) >= 0
    return bool(ids.size) and bool(ids.max() >= 0)


def record_scan(
    group: RefGroup,
    url: str,
    format_name: str,
    scanner: Any,
    before: SourceState | None,
    shown: str | None = None,
) -> RefGroup:
    """``group`` (a scan of ``url``) with its record: ``before`` is the scanned file's state
    taken before scanning (None for a directory); the other referenced files are asked now.
    ``shown``: ``scanned_url(url)``, when the caller has it."""
    storage_options = getattr(scanner, "storage_options", None)
    if shown is None:
        shown = scanned_url(url)
    files: dict[str, SourceState] = {}
    referenced = referenced_urls(group)
    if before is not None:
        files[_spelling(shown, referenced)] = before
    others = [u for u in referenced if u not in files]
    if others:
        states = source_states(others, storage_options)
        files.update((u, s) for u, s in states.items() if isinstance(s, SourceState))
    record = ScanRecord(shown, format_name, _options(scanner), files)
    recorded = _shallow_copy(group)
    object.__setattr__(recorded, "sources", _frozen_document(record))
    return recorded


def _shallow_copy(group: RefGroup) -> RefGroup:
    """``copy.copy(group)`` (no validation of the members again), made as it makes it for
    the model's `tuple_state` classes, without the `copy` module's dispatch."""
    cls = type(group)
    plain = cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__
    if not plain or getattr(cls, "__copy__", None) is not None or cls in copyreg.dispatch_table:
        return copy.copy(group)
    recorded = cls.__new__(cls)
    recorded.__setstate__(group.__getstate__())  # type: ignore[attr-defined]
    return recorded


def _frozen_document(record: ScanRecord) -> FrozenDict:
    """``{"version": 1, "scans": [record]}`` frozen as `freeze_json` would freeze it, built
    directly (a small file's scan is a few hundred microseconds: this runs for each)."""
    files = FrozenDict({url: FrozenDict(s.to_json()) for url, s in record.files.items()})
    options = freeze_json(record.options) if record.options else FrozenDict()
    scan = FrozenDict(
        {"url": record.url, "format": record.format, "options": options, "files": files}
    )
    return FrozenDict({"version": RECORD_VERSION, "scans": (scan,)})


def _spelling(url: str, referenced: Sequence[str]) -> str:
    """How the references spell the scanned file (``/abs/a.nc`` for ``a.nc``), else ``url``."""
    if url in referenced or not is_local(url):
        return url
    for candidate in referenced:
        if is_local(candidate) and local_path(candidate) == local_path(url):
            return candidate
    return url


def _options(scanner: Any) -> dict[str, Any]:
    """The scanner's options that differ from their defaults (storage options left out: they
    may hold credentials), as JSON: a refresh scans with them again."""
    out: dict[str, Any] = {}
    for name, default in _defaults(type(scanner)):
        value = getattr(scanner, name)
        if value == default:
            continue
        if isinstance(value, str | int | float | bool) or value is None:
            out[name] = value
        elif isinstance(value, list | tuple) and all(isinstance(v, str | int) for v in value):
            out[name] = list(value)
    return out


_DEFAULTS: dict[type, tuple[tuple[str, Any], ...]] = {}


def _defaults(cls: type) -> tuple[tuple[str, Any], ...]:
    """A scanner class's fields but ``storage_options``, each with its default (its
    ``default_factory`` called once: defaults are immutable, as options of a frozen class)."""
    found = _DEFAULTS.get(cls)
    if found is None:
        fields = dataclasses.fields(cls)
        found = tuple((f.name, _default(f)) for f in fields if f.name != "storage_options")
        _DEFAULTS[cls] = found
    return found


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def read_record(group: RefGroup, where: str = "reference set") -> list[ScanRecord]:
    """The scans ``group.sources`` records (empty when it has none).

    Raises
    ------
    RefFormatError
        When the record is malformed or of a newer version (names ``where``).
    """
    return record_of_document(group.sources, where)


def record_of_document(doc: Mapping[str, Any] | None, where: str) -> list[ScanRecord]:
    """The scans a record document holds (`read_record` of a group whose ``sources`` it is),
    read from the JSON as it is: a document of thousands of scans is not frozen first.

    Raises
    ------
    RefFormatError
        When the record is malformed or of a newer version (names ``where``).
    """
    if doc is None:
        return []
    if not isinstance(doc, Mapping):
        raise RefFormatError(f"{where}: its record of sources is no JSON object: {doc!r}")
    # a record read from a set is read as parsed (`plain_mapping`), not frozen first
    return [_scan_record(plain_mapping(entry), where) for entry in _scans(doc, where)]


def recorded_files(doc: Mapping[str, Any], where: str = "reference set") -> Mapping[str, Any]:
    """Every file a record document (`RefGroup.sources`) names -> its state as recorded (a
    JSON object: `SourceState.from_json` reads it), later scans winning; built without
    reading every state (a reader asks for the states of the files it reads only). A record
    read from a Parquet set's record file and not loaded yet answers from that file, each
    scan read when one of its files is asked for (`DeferredJSON.partial`).

    Raises
    ------
    RefFormatError
        When the record or a scan entry is malformed, or of a newer version (a scan entry
        read later raises when one of its files is asked for).
    """
    if type(doc) is DeferredJSON:
        states = doc.partial()
        if states is not None:
            _check_version(states.header, where)
            return states  # type: ignore[no-any-return]
    found: dict[str, Any] = {}
    update = found.update
    for entry in _scans(doc, where):
        # a record read from a set holds dicts (`DeferredJSON`: taken first, without a call
        # or an ABC check, as this runs for each of thousands of scans at a set's first read),
        # one built in memory FrozenDicts (the dicts behind them)
        if type(entry) is dict:
            files = entry.get("files")
            if type(files) is dict:
                update(files)
                continue
        plain = plain_mapping(entry)
        files = plain_mapping(plain.get("files")) if isinstance(plain, Mapping) else None
        if not isinstance(files, Mapping):
            raise RefFormatError(
                f"{where}: malformed scan entry in its record of sources: {entry!r}"
            )
        update(files)
    return found


def _scans(doc: Mapping[str, Any], where: str) -> Sequence[Any]:
    """The scan entries of a record document; RefFormatError for another version."""
    doc = plain_mapping(doc)
    scans = doc.get("scans")
    if not isinstance(scans, Sequence):
        _refuse_version(doc.get("version"), where)
    _check_version(doc, where)
    return scans


def _check_version(doc: Mapping[str, Any], where: str) -> None:
    """RefFormatError unless a record document (or its header) is of `RECORD_VERSION`."""
    if doc.get("version") != RECORD_VERSION:
        _refuse_version(doc.get("version"), where)


def _refuse_version(version: Any, where: str) -> NoReturn:
    raise RefFormatError(
        f"{where}: its record of sources has version {version!r}; this refzarr "
        f"reads version {RECORD_VERSION} (upgrade refzarr)"
    )


def _scan_record(entry: Any, where: str) -> ScanRecord:
    if not _is_mapping(entry) or not _is_mapping(entry.get("files")):
        raise RefFormatError(f"{where}: malformed scan entry in its record of sources: {entry!r}")
    url, name = entry.get("url"), entry.get("format")
    options = entry.get("options") or _NO_OPTIONS
    if not isinstance(url, str) or not isinstance(name, str) or not _is_mapping(options):
        raise RefFormatError(f"{where}: malformed scan entry in its record of sources: {entry!r}")
    if options is not _NO_OPTIONS:
        try:
            options = freeze_json(options, where="options")
        except TypeError as exc:
            raise RefFormatError(
                f"{where}: malformed scan entry in its record of sources: {exc}"
            ) from exc
    files = {
        str(file): SourceState.from_json(state, f"{where}: source {file}")
        for file, state in entry["files"].items()
    }
    return ScanRecord(url, name, options, files)


_NO_OPTIONS = FrozenDict()


def _is_mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)``, a parsed dict told without the ABC's check."""
    return type(value) is dict or isinstance(value, Mapping)


def sources_document(scans: Iterable[ScanRecord]) -> dict[str, Any] | None:
    """The record of ``scans`` (each scanned URL once, the last entry winning); None if none."""
    by_url = {scan.url: scan for scan in scans}
    if not by_url:
        return None
    return {"version": RECORD_VERSION, "scans": [s.to_json() for s in by_url.values()]}


def merged_sources(groups: Iterable[RefGroup]) -> dict[str, Any] | None:
    """The records of every group merged (what `refzarr.combine` gives its result)."""
    scans: list[ScanRecord] = []
    for group in groups:
        scans.extend(read_record(group))
    return sources_document(scans)
