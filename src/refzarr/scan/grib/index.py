"""Indexing GRIB files from their ``.idx`` sidecars, without reading them.

Operational archives publish an index next to each GRIB file: NOAA's ``wgrib2`` lines
(``n:offset:d=YYYYMMDDHH:VAR:LEVEL:FCST:...``) or ECMWF's JSON lines (``{"_offset": ...,
"_length": ..., "date": ..., "time": ..., "step": ..., "param": ..., ...}``). Files of one
run share a layout: the same variables and levels in the same order, differing in reference
time, step and byte ranges. `scan_indexed` scans the first file fully, then builds every
other file's references from its sidecar alone (one small request per file), placing its
k-th message where the first file's k-th message was placed, at the time and step its
sidecar gives. A sidecar that does not agree with the first file's layout (another count of
messages, another variable or level at a position, a step it cannot read) makes that file
be scanned fully: never a reference from a guess.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fsspec

from refzarr.model import RefGroup
from refzarr.scan.grib.scanner import GribScanner, Placed, Recording

__all__ = ["IndexEntry", "parse_index", "scan_indexed"]

_EPOCH = dt.datetime(1970, 1, 1)
_UNITS = {"min": 60, "hour": 3600, "day": 86400}
_VARYING = frozenset({"_offset", "_length", "date", "time", "step"})
_FCST = re.compile(r"^(?:(\d+)-)?(\d+) (min|hour|day) (?:(acc|ave|max|min) )?fcst$")


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One message of a sidecar: byte offset, length (None: up to the next message),
    reference time and step in seconds (None: unreadable), and what it holds besides them
    (variable, level, kind of step...), compared between files."""

    offset: int
    length: int | None
    time: int | None
    step: int | None
    signature: str


def parse_index(text: str) -> list[IndexEntry]:
    """The entries of a wgrib2 or ECMWF JSON-lines sidecar, in file order.

    Raises
    ------
    ValueError
        When a line is in neither form.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and lines[0].lstrip().startswith("{"):
        return [_json_entry(json.loads(line)) for line in lines]
    return [_wgrib2_entry(line) for line in lines]


def _wgrib2_entry(line: str) -> IndexEntry:
    parts = line.split(":")
    if len(parts) < 6 or not parts[2].startswith("d="):
        raise ValueError(f"not a wgrib2 index line: {line!r}")
    stamp = parts[2][2:]
    time = _time(int(stamp[:8]), int(stamp[8:10] or 0) * 100) if stamp.isdigit() else None
    step, kind = _fcst(parts[5])
    signature = ":".join([parts[3], parts[4], kind, *parts[6:]])
    return IndexEntry(int(parts[1]), None, time, step, signature)


def _fcst(text: str) -> tuple[int | None, str]:
    """``(end of the step in seconds, kind)`` of a wgrib2 forecast time (None: unreadable)."""
    if text == "anl":
        return 0, "instant"
    found = _FCST.match(text)
    if found is None:
        return None, text
    return int(found.group(2)) * _UNITS[found.group(3)], found.group(4) or "instant"


def _json_entry(entry: Mapping[str, Any]) -> IndexEntry:
    rest = {
        k: v for k, v in entry.items() if k not in ("_offset", "_length", "date", "time", "step")
    }
    date, hhmm = entry.get("date"), entry.get("time")
    time = _time(int(date), int(hhmm)) if date is not None and hhmm is not None else None
    step: int | None = None
    text = str(entry.get("step", ""))
    end = text.rpartition("-")[2]
    if end.isdigit():
        step = int(end) * 3600
    kind = "range" if "-" in text else "point"
    signature = json.dumps({**rest, "_kind": kind}, sort_keys=True)
    return IndexEntry(int(entry["_offset"]), int(entry["_length"]), time, step, signature)


def _time(date: int, hhmm: int) -> int | None:
    try:
        when = dt.datetime(date // 10000, date // 100 % 100, date % 100, hhmm // 100, hhmm % 100)
    except ValueError:
        return None
    return int((when - _EPOCH).total_seconds())


def scan_indexed(
    urls: Sequence[str],
    *,
    suffix: str = ".idx",
    storage_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> list[RefGroup]:
    """The groups of GRIB files of one layout: the first scanned, the others built from
    their sidecars (``url + suffix``) when these agree with it, else scanned.

    Parameters
    ----------
    urls
        The files, the first of which is scanned (with its sidecar, which must agree with
        the scan: else every file is scanned).
    suffix
        What the sidecars' URLs add to the files' URLs.
    storage_options
        fsspec options for the files and sidecars.
    **options
        Other `GribScanner` options.
    """
    scanner = GribScanner(storage_options=storage_options, **options)
    if not urls:
        return []
    first, recording = scanner.scan_recorded(urls[0])
    reference = _read_index(urls[0] + suffix, storage_options)
    usable = reference is not None and _agrees_with_scan(reference, recording)
    groups: list[RefGroup] = [first]
    for url in urls[1:]:
        entries = _read_index(url + suffix, storage_options) if usable else None
        placed = None
        if entries is not None and reference is not None:
            placed = _placements(recording, reference, entries, url, storage_options)
        groups.append(
            scanner(url)
            if placed is None
            else scanner.from_placements(url, placed, recording.grids)
        )
    return groups


def _read_index(url: str, storage_options: Mapping[str, Any] | None) -> list[IndexEntry] | None:
    try:
        with fsspec.open(url, "rt", **dict(storage_options or {})) as f:
            return parse_index(f.read())
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _agrees_with_scan(entries: list[IndexEntry], recording: Recording) -> bool:
    """Whether a sidecar describes the scanned file: one entry per single-field message, at
    the scanned offsets, with the scanned times and steps."""
    placed = recording.placed
    if recording.skipped or len(entries) != len(placed):
        return False
    return all(
        p.fields == 1 and e.offset == p.offset and e.time == p.keys.time and e.step == p.keys.step
        for e, p in zip(entries, placed, strict=True)
    )


def _placements(
    recording: Recording,
    reference: list[IndexEntry],
    entries: list[IndexEntry],
    url: str,
    storage_options: Mapping[str, Any] | None,
) -> list[Placed] | None:
    """The fields of another file, from its sidecar (None when it disagrees)."""
    if len(entries) != len(reference):
        return None
    if any(e.signature != r.signature for e, r in zip(entries, reference, strict=True)):
        return None
    lengths = _lengths(entries, url, storage_options)
    if lengths is None:
        return None
    out = []
    for entry, length, first in zip(entries, lengths, recording.placed, strict=True):
        if entry.time is None or entry.step is None:
            return None
        keys = first.keys._replace(time=entry.time, step=entry.step)
        out.append(Placed(entry.offset, length, 1, 0, keys, first.known))
    return out


def _lengths(
    entries: list[IndexEntry], url: str, storage_options: Mapping[str, Any] | None
) -> list[int] | None:
    """Each message's length: given (JSON lines), else up to the next offset, the last one
    up to the end of the file (one size request)."""
    if all(e.length is not None for e in entries):
        return [int(e.length) for e in entries if e.length is not None]
    offsets = [e.offset for e in entries]
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
        size = int(fs.size(path))
    except (OSError, TypeError, ValueError):
        return None
    ends = [*offsets[1:], size]
    lengths = [end - start for start, end in zip(offsets, ends, strict=True)]
    return lengths if all(n > 0 for n in lengths) else None
