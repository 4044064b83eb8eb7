"""The checks of ``refzarr validate``: every referenced range inside its file (one ``stat`` or
metadata request per file, not per chunk), every file as its scan recorded it (from the same
answers) and, on request, every chunk fetched and decoded.

Fetching and decoding reuse `refzarr.io.RangeReader` (merged, concurrent, retried reads) and
the reader's `ChunkDecoder`; chunks are taken a batch at a time, so memory stays bounded.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from refzarr.errors import RefzarrError
from refzarr.io import RangeReader
from refzarr.io.failures import unreachable_endpoint
from refzarr.model import INLINED, WHOLE_FILE, ManifestBlock, RefArray, RefGroup
from refzarr.model.hierarchy import chunk_key
from refzarr.parallel.progress import progress_bar
from refzarr.sources.check import SourceChange
from refzarr.sources.guard import source_guard
from refzarr.sources.state import NO_SUCH_FILE, SourceState, state_now

if TYPE_CHECKING:
    from refzarr.codecs.chunk import ChunkDecoder

__all__ = [
    "Failure",
    "Report",
    "changed_sources",
    "check_decode",
    "check_ranges",
    "file_states",
    "sizes_of",
]

_BATCH_CHUNKS = 1024
_BATCH_BYTES = 64 * 2**20
"""Chunks fetched and decoded together at most (and their stored bytes)."""


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed check: the key, the URL (or None for inlined data) and what is wrong."""

    key: str
    url: str | None
    reason: str

    def __str__(self) -> str:
        where = f" ({self.url})" if self.url else ""
        return f"{self.key}{where}: {self.reason}"


@dataclass
class Report:
    """Failures found (the first ``limit`` kept) and how many there were in all."""

    limit: int
    count: int = 0
    shown: list[Failure] = field(default_factory=list)

    def add(self, failure: Failure) -> None:
        """Count a failure; keep it while fewer than ``limit`` are kept."""
        self.count += 1
        if len(self.shown) < self.limit:
            self.shown.append(failure)


def file_states(
    reader: RangeReader, urls: list[str], threads: int = 16
) -> dict[str, SourceState | str]:
    """The state (size, modification time, ETag) of every file, or why it could not be had:
    one ``stat`` per local file, one metadata request per remote one (what its size alone
    costs), concurrent after the first, so that an unreachable endpoint is one wait, not the
    longest of many; a progress bar on a terminal when there are many."""
    shown = None if len(urls) >= _BAR_FROM else False
    with ThreadPoolExecutor(threads) as pool, progress_bar(shown, len(urls), "sizes") as bar:
        state = partial(_state, reader)
        first = [state(url) for url in urls[:1]]  # alone: an unreachable endpoint fails once
        asked = itertools.chain(first, pool.map(state, urls[1:]))
        states: dict[str, SourceState | str] = {}
        for url, found in zip(urls, asked, strict=True):
            states[url] = found
            bar.update(1)
        return states


def sizes_of(states: dict[str, SourceState | str]) -> dict[str, int | str]:
    """The sizes of `file_states` (or why there is none)."""
    return {url: s.size if isinstance(s, SourceState) else s for url, s in states.items()}


def _state(reader: RangeReader, url: str) -> SourceState | str:
    """`state_now` with its size (validate compares ranges with it); a remote file that
    cannot be asked is its reason, unless the endpoint is unreachable (raised: every remote
    file would fail alike)."""
    try:
        return state_now(url, reader.info, sized=True)
    except RefzarrError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return NO_SUCH_FILE
        if unreachable_endpoint(exc) is not None:
            raise  # every remote file fails alike: one error, not one per file
        return str(exc)


_BAR_FROM = 100
"""Files from which looking up their sizes shows a progress bar (on a terminal)."""


def changed_sources(
    group: RefGroup, states: dict[str, SourceState | str], where: str
) -> list[SourceChange]:
    """The files whose state (`file_states`) differs from what their scan recorded (none
    when the group records no sources; files it does not name are not compared)."""
    guard = source_guard(group, "all", where)
    if guard is None:
        return []
    found = []
    for url, now in states.items():
        then = guard.recorded(url)
        if then is None or not isinstance(now, SourceState):
            continue
        differences = then.changes(now)
        if differences:
            found.append(SourceChange(url, "changed", "; ".join(differences), url))
    return found


def referenced_urls(arrays: list[tuple[str, RefArray]]) -> list[str]:
    """Every URL a chunk of these arrays refers to, in first-seen order."""
    seen: dict[str, None] = {}
    for _, array in arrays:
        for block in array.manifest.iter_written_blocks():
            ids = np.unique(block.path_id[block.path_id >= 0])
            seen.update((block.paths[int(i)], None) for i in ids)
    return list(seen)


def check_ranges(path: str, array: RefArray, sizes: dict[str, int | str], report: Report) -> None:
    """Report every chunk of ``array`` whose file is missing or too short for its range."""
    separator = array.meta.dimension_separator
    grid = array.manifest.grid_shape
    for block in array.manifest.iter_written_blocks():
        for row in _bad_rows(block, sizes).tolist():
            url = block.paths[int(block.path_id[row])]
            size = sizes[url]
            key = chunk_key(path, _index(block.start + row, grid), separator)
            if isinstance(size, str):
                report.add(Failure(key, url, size))
                continue
            offset, length = int(block.offset[row]), int(block.length[row])
            shown = "to the end" if block.length[row] == WHOLE_FILE else f"length {length}"
            report.add(
                Failure(key, url, f"offset {offset}, {shown}: past the end of the file ({size})")
            )


def _bad_rows(block: ManifestBlock, sizes: dict[str, int | str]) -> np.ndarray[Any, Any]:
    """Rows of ``block`` whose file is missing or too short for their range (vectorised)."""
    limits = np.array(
        [size if isinstance(size, int) else -1 for size in (sizes.get(u, -1) for u in block.paths)],
        dtype=np.int64,
    ).reshape(-1)
    present = np.flatnonzero(block.path_id >= 0)
    if not present.size:
        return present
    file_size = limits[block.path_id[present]]
    offset = block.offset[present].astype(np.int64)
    length = block.length[present]
    whole = length == WHOLE_FILE
    end = offset + np.where(whole, 0, length).astype(np.int64)
    bad = (file_size < 0) | (end > file_size) | (whole & (offset > file_size))
    rows: np.ndarray[Any, Any] = present[bad]
    return rows


def check_decode(
    path: str, array: RefArray, reader: RangeReader, sizes: dict[str, int | str], report: Report
) -> int:
    """Fetch and decode every chunk of ``array`` whose range is valid; return how many."""
    from refzarr.codecs.chunk import ChunkDecoder  # numcodecs: the command starts without it

    try:
        decoder = ChunkDecoder(array.meta, path)
    except RefzarrError as exc:
        report.add(Failure(path, None, str(exc)))
        return 0
    decoded = 0
    with ThreadPoolExecutor() as pool:
        for batch in _batches(path, array, sizes):
            decoded += len(batch.keys)
            for failure in _decode_batch(batch, decoder, reader, pool):
                report.add(failure)
    return decoded


@dataclass
class _Batch:
    keys: list[str] = field(default_factory=list)
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    urls: list[str | None] = field(default_factory=list)  # None: inlined
    offsets: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    inlined: dict[int, bytes] = field(default_factory=dict)
    nbytes: int = 0


def _batches(path: str, array: RefArray, sizes: dict[str, int | str]) -> Iterator[_Batch]:
    """The chunks to decode, a batch at a time (chunks with bad ranges left out)."""
    meta, separator = array.meta, array.meta.dimension_separator
    grid = array.manifest.grid_shape
    batch = _Batch()
    for block in array.manifest.iter_written_blocks():
        bad = set(_bad_rows(block, sizes).tolist())
        ids = block.path_id
        for row in np.flatnonzero((ids >= 0) | (ids == INLINED)).tolist():
            if row in bad:
                continue
            number = block.start + row
            index = _index(number, grid)
            batch.keys.append(chunk_key(path, index, separator))
            batch.shapes.append(meta.stored_chunk_shape(index))
            pid = int(ids[row])
            if pid == INLINED:
                batch.inlined[len(batch.urls)] = block.inlined[number]
                batch.urls.append(None)
                batch.offsets.append(0)
                batch.lengths.append(0)
                continue
            url = block.paths[pid]
            offset, length = int(block.offset[row]), block.length[row]
            size = sizes[url]
            assert isinstance(size, int)  # bad ranges were left out
            stored = size - offset if length == WHOLE_FILE else int(length)
            batch.urls.append(url)
            batch.offsets.append(offset)
            batch.lengths.append(stored)
            batch.nbytes += stored
            if len(batch.keys) >= _BATCH_CHUNKS or batch.nbytes >= _BATCH_BYTES:
                yield batch
                batch = _Batch()
    if batch.keys:
        yield batch


def _decode_batch(
    batch: _Batch, decoder: ChunkDecoder, reader: RangeReader, pool: ThreadPoolExecutor
) -> list[Failure]:
    """Fetch the batch's referenced chunks in one read, decode every chunk on ``pool``."""
    rows = [k for k, url in enumerate(batch.urls) if url is not None]
    data: dict[int, bytes | memoryview] = dict(batch.inlined)
    if rows:
        urls = [batch.urls[k] or "" for k in rows]
        try:
            fetched = reader.read(
                urls,
                [batch.offsets[k] for k in rows],
                [batch.lengths[k] for k in rows],
                [batch.keys[k] for k in rows],
            )
        except RefzarrError as exc:  # a fetch failing after retries: report the batch once
            return [Failure(batch.keys[rows[0]], urls[0], str(exc))]
        data.update(zip(rows, fetched, strict=True))

    def decode(k: int) -> Failure | None:
        try:
            decoder.decode(data[k], batch.keys[k], batch.shapes[k])
        except RefzarrError as exc:
            return Failure(batch.keys[k], batch.urls[k], str(exc))
        return None

    return [found for found in pool.map(decode, sorted(data)) if found is not None]


def _index(number: int, grid: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(number, grid)) if grid else ()
