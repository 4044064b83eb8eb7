"""Indexing GRIB files from their ``.idx`` sidecars, without reading their messages.

Operational archives publish an index next to each GRIB file: NOAA's ``wgrib2`` lines
(``n:offset:d=YYYYMMDDHH:VAR:LEVEL:FCST:...``, at ``<file>.idx``) or ECMWF's JSON lines
(``{"_offset": ..., "_length": ..., "date": ..., "time": ..., "step": ..., "param": ...}``,
at ``<file>.idx`` or, as ECMWF's open data names them, ``<file without suffix>.index``).
Files of one run share a *layout*: the same variables and levels in the same order (their
sidecars list the same lines but for time, step and offsets). Of each layout the first file
is scanned fully; each other file is built from its sidecar (one small request) and the first
bytes of its last message (one ranged request, both made concurrently for all the files),
placing its k-th message where the scanned file's k-th message was placed, at the time and
step its sidecar gives. A sidecar that does not agree (with its layout's scanned file, or a
last message whose sections 1 to 4 differ from that file's last message but for time and
step) leaves that file to a full scan: never a reference from a guess.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fsspec

from refzarr.errors import RefzarrError
from refzarr.model import RefGroup
from refzarr.scan.base import ManyBuilt
from refzarr.scan.grib.scanner import GribScanner, Placed, Recording
from refzarr.scan.grib.sections import HeadLayout, head_layout
from refzarr.sources.state import SourceState, source_states

__all__ = ["IndexEntry", "build_many", "parse_index", "scan_indexed"]

HEAD_BYTES = 1 << 15
"""Bytes read at the start of a file's last message to check it (sections 0 to 4; a reduced
Gaussian grid of 2,560 rows takes 5 KiB)."""

TRIES = 3
"""Files of a layout scanned at most to find one its sidecar describes (the others are then
scanned by `scan_many` as usual)."""

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
        return [_json_entry(entry) for entry in json.loads(f"[{','.join(lines)}]")]
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


@functools.lru_cache(maxsize=4096)
def _fcst(text: str) -> tuple[int | None, str]:
    """``(end of the step in seconds, kind)`` of a wgrib2 forecast time (None: unreadable)."""
    if text == "anl":
        return 0, "instant"
    found = _FCST.match(text)
    if found is None:
        return None, text
    return int(found.group(2)) * _UNITS[found.group(3)], found.group(4) or "instant"


def _json_entry(entry: Mapping[str, Any]) -> IndexEntry:
    if not isinstance(entry, dict):
        raise ValueError(f"not an ECMWF index line: {entry!r}")
    rest = sorted((k, v) for k, v in entry.items() if k not in _VARYING)
    date, hhmm = entry.get("date"), entry.get("time")
    time = _time(int(date), int(hhmm)) if date is not None and hhmm is not None else None
    step: int | None = None
    text = str(entry.get("step", ""))
    end = text.rpartition("-")[2]
    if end.isdigit():
        step = int(end) * 3600
    kind = "range" if "-" in text else "point"
    signature = repr((rest, kind))
    return IndexEntry(int(entry["_offset"]), int(entry["_length"]), time, step, signature)


@functools.lru_cache(maxsize=4096)
def _time(date: int, hhmm: int) -> int | None:
    try:
        when = dt.datetime(date // 10000, date // 100 % 100, date % 100, hhmm // 100, hhmm % 100)
    except ValueError:
        return None
    return int((when - _EPOCH).total_seconds())


def scan_indexed(
    urls: Sequence[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> list[RefGroup]:
    """The groups of GRIB files, those with sidecars that agree built from them, the others
    scanned (in this process; ``refzarr.scan_many(urls, grib_index="auto")`` scans them in
    parallel).

    Parameters
    ----------
    urls
        The files.
    storage_options
        fsspec options for the files and sidecars.
    **options
        Other `GribScanner` options.
    """
    from refzarr.sources.state import scanned_state

    scanner = GribScanner(storage_options=storage_options, grib_index="auto", **options)
    built = index_files(scanner, urls).groups
    return [
        built[k]
        if k in built
        else _recorded(scanner, url, scanned_state(url, storage_options), scanner(url))
        for k, url in enumerate(urls)
    ]


def build_many(urls: Sequence[str], options: Mapping[str, Any]) -> ManyBuilt:
    """`scan_many`'s hook (``FORMAT.many``): with ``grib_index="auto"`` among ``options``, the
    groups of the files built from their sidecars (and of the files scanned to learn their
    layouts), by position in ``urls``; `scan_many` scans the others."""
    names = set(GribScanner.__dataclass_fields__)
    own = {k: v for k, v in options.items() if k in names}
    if own.get("grib_index") is None:
        return ManyBuilt({})
    return index_files(GribScanner(**own), urls)


def index_files(scanner: GribScanner, urls: Sequence[str]) -> ManyBuilt:
    """The groups of the files whose layout could be learnt or whose sidecar agrees with
    their layout's, by position in ``urls``, each with its record of sources (`_states`),
    and the positions of those built from their sidecars."""
    states = _states(urls, scanner.storage_options)
    sidecars = _read_sidecars(urls, scanner.storage_options)
    layouts: dict[tuple[str, ...], list[int]] = {}
    for k, entries in enumerate(sidecars):
        if entries:
            layouts.setdefault(tuple(e.signature for e in entries), []).append(k)
    out: dict[int, RefGroup] = {}
    indexed: set[int] = set()
    for members in layouts.values():
        scanned, built = _Layout(scanner, urls, sidecars).build(members)
        out.update(scanned)
        out.update(built)
        indexed.update(built)
    groups = {k: _recorded(scanner, urls[k], states.get(urls[k]), g) for k, g in out.items()}
    return ManyBuilt(groups, frozenset(indexed))


def _states(
    urls: Sequence[str], storage_options: Mapping[str, Any] | None
) -> dict[str, SourceState]:
    """Each GRIB file's size, modification time and ETag before any of its bytes (or its
    sidecar's) is read, as `refzarr.scan` records a scanned file: ``os.stat`` locally;
    remotely one listing per folder of at least `LISTING_MIN` files, else one HEAD per file.
    Only the GRIB file is recorded: the references point into it alone (the sidecar gave
    offsets that its own bytes confirmed), so a rewritten sidecar changes no reference."""
    found = source_states(urls, storage_options)
    return {url: state for url, state in found.items() if isinstance(state, SourceState)}


def _recorded(scanner: GribScanner, url: str, before: SourceState | None, group: Any) -> Any:
    """``group`` with the members ``drop_variables`` names left out and the record of sources
    `refzarr.scan` gives it."""
    from refzarr.scan.base import without_members
    from refzarr.scan.grib import FORMAT
    from refzarr.sources.record import record_scan

    group = without_members(group, scanner.drop_variables)
    return record_scan(group, url, FORMAT.name, scanner, before)


@dataclass
class _Layout:
    """The files of one layout: one scanned, the others built from their sidecars."""

    scanner: GribScanner
    urls: Sequence[str]
    sidecars: list[list[IndexEntry] | None]

    def build(self, members: list[int]) -> tuple[dict[int, RefGroup], dict[int, RefGroup]]:
        """The groups of the files scanned to learn the layout, and of those then built from
        their sidecars, by position."""
        out: dict[int, RefGroup] = {}
        tried: set[int] = set()
        found: tuple[int, Recording] | None = None
        for k in members[:TRIES]:
            tried.add(k)
            try:
                group, recording = self.scanner.scan_recorded(self.urls[k])
            except (RefzarrError, OSError, ValueError):
                continue  # scan_many scans it again and reports why it failed
            out[k] = group
            entries = self.sidecars[k]
            if entries is not None and _agrees_with_scan(entries, recording):
                found = (k, recording)
                break
        if found is None:
            return out, {}
        return out, self._from_sidecars(*found, [k for k in members if k not in tried])

    def _from_sidecars(
        self, first: int, recording: Recording, others: list[int]
    ) -> dict[int, RefGroup]:
        heads = _last_heads([first, *others], self.urls, self.sidecars, self.scanner)
        reference = self.sidecars[first]
        if heads[0] is None or reference is None:
            return {}
        out: dict[int, RefGroup] = {}
        for k, head in zip(others, heads[1:], strict=True):
            entries = self.sidecars[k]
            placed = None
            if entries is not None and head is not None:
                placed = _placements(recording, entries, head, heads[0], self.scanner)
            if placed is not None:
                out[k] = self.scanner.from_placements(self.urls[k], placed, recording.grids)
        return out


def _read_sidecars(
    urls: Sequence[str], storage_options: Mapping[str, Any] | None
) -> list[list[IndexEntry] | None]:
    """Each file's sidecar entries: ``<url>.idx``, else ``<url without suffix>.index``
    (None: neither exists or parses)."""
    texts = _cat_many([f"{url}.idx" for url in urls], None, storage_options)
    missing = [k for k, text in enumerate(texts) if text is None]
    if missing:
        again = _cat_many([_ecmwf_sidecar(urls[k]) for k in missing], None, storage_options)
        for k, text in zip(missing, again, strict=True):
            texts[k] = text
    return [None if text is None else _parsed(text) for text in texts]


def _ecmwf_sidecar(url: str) -> str:
    stem, dot, suffix = url.rpartition(".")
    return f"{stem}.index" if dot and "/" not in suffix else f"{url}.index"


def _parsed(data: bytes) -> list[IndexEntry] | None:
    try:
        return parse_index(data.decode())
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def _cat_many(
    urls: list[str], starts: list[int] | None, storage_options: Mapping[str, Any] | None
) -> list[bytes | None]:
    """The bytes of many files (whole, or ``HEAD_BYTES`` from ``starts``), read concurrently
    where the filesystem can (None where a read failed)."""
    out: list[bytes | None] = [None] * len(urls)
    by_fs: dict[int, tuple[Any, list[int], list[str]]] = {}
    for k, url in enumerate(urls):
        try:
            fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
        except (OSError, ValueError, TypeError):
            continue
        by_fs.setdefault(id(fs), (fs, [], []))[1].append(k)
        by_fs[id(fs)][2].append(path)
    for fs, indices, paths in by_fs.values():
        # whole files as ``bytes=0-``: s3fs asks for the size first when given no range
        begins = [0] * len(indices) if starts is None else [starts[k] for k in indices]
        ends = None if starts is None else [b + HEAD_BYTES for b in begins]
        got = fs.cat_ranges(paths, begins, ends, on_error="return")
        for k, data in zip(indices, got, strict=True):
            out[k] = bytes(data) if isinstance(data, bytes | bytearray | memoryview) else None
    return out


def _last_heads(
    indices: list[int],
    urls: Sequence[str],
    sidecars: list[list[IndexEntry] | None],
    scanner: GribScanner,
) -> list[HeadLayout | None]:
    """What the first bytes of each file's last message (at its sidecar's last offset) say."""
    starts = []
    for k in indices:
        entries = sidecars[k]
        starts.append(entries[-1].offset if entries else 0)
    heads = _cat_many([urls[k] for k in indices], starts, scanner.storage_options)
    return [None if head is None else head_layout(head) for head in heads]


def _lengths(entries: list[IndexEntry]) -> list[int | None]:
    """Each message's length: given (JSON lines), else up to the next offset (None: the last
    one of a wgrib2 sidecar)."""
    ends: list[int | None] = [e.offset for e in entries[1:]]
    ends.append(None)
    return [
        e.length if e.length is not None else (None if end is None else end - e.offset)
        for e, end in zip(entries, ends, strict=True)
    ]


def _agrees_with_scan(entries: list[IndexEntry], recording: Recording) -> bool:
    """Whether a sidecar describes the scanned file: one entry per single-field message, at
    the scanned offsets and lengths (so no padding between messages), times and steps."""
    placed = recording.placed
    if recording.skipped or len(entries) != len(placed):
        return False
    return all(
        p.fields == 1
        and e.offset == p.offset
        and n in (None, p.length)
        and e.time == p.keys.time
        and e.step == p.keys.step
        for e, p, n in zip(entries, placed, _lengths(entries), strict=True)
    )


def _placements(
    recording: Recording,
    entries: list[IndexEntry],
    head: HeadLayout,
    reference: HeadLayout,
    scanner: GribScanner,
) -> list[Placed] | None:
    """The fields of another file of the layout, from its sidecar and the first bytes of its
    last message (None when these disagree with the layout's scanned file)."""
    lengths = _lengths(entries)
    last = entries[-1]
    if lengths[-1] is None:
        lengths[-1] = head.length
    if (
        entries[0].offset != recording.placed[0].offset
        or head.template != reference.template
        or head.length != lengths[-1]
        or head.time != last.time
        or head.step not in (None, last.step)
    ):
        return None
    out = []
    for entry, length, first in zip(entries, lengths, recording.placed, strict=True):
        if entry.time is None or entry.step is None or length is None:
            return None
        if length < max(1, scanner.inline_threshold):  # a full scan would hold it inline
            return None
        keys = first.keys._replace(time=entry.time, step=entry.step)
        out.append(Placed(entry.offset, length, 1, 0, keys, first.known))
    return out
