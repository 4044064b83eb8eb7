"""Reading a selection of a referenced array: the chunks it needs fetched in one batch, decoded in
parallel, placed into one output array.

This is the fast path behind `refzarr.open_dataset`: no zarr in between, one `RangeReader` call
per selection (so neighbouring chunks become one request), decoding on a thread pool while later
blocks are still arriving. A chunk the source never wrote reads as the fill value; a chunk that
cannot be fetched or decoded raises. Irregular (rectilinear) chunk grids are read too: each chunk
decodes to the shape it was stored with, and only the positions it holds are used.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, overload

import numpy as np

from refzarr.codecs.batch import BatchDecoder
from refzarr.codecs.chunk import (
    ChunkDecoder,
    check_chunk_bytes,
    check_stored_bytes,
    max_chunk_bytes,
    missing_value,
)
from refzarr.io import FetchedBlock, RangeReader
from refzarr.model import INLINED, MISSING, WHOLE_FILE, RefArray
from refzarr.reader.select import Axis, normalize_selection
from refzarr.reader.tiles import consecutive_tiles, tile_numbers, tiled_view

__all__ = ["ArrayReader"]

_BACKLOG_PER_THREAD = 4
"""Decoding batches allowed to wait per thread before fetching pauses (bounds memory)."""

_NONE = np.zeros(0, dtype=np.int64)

_BATCH_BYTES = 1 << 20
_BATCH_CHUNKS = 256
"""A fetched block is cut into decoding tasks of at most about this many stored bytes and
this many chunks."""


@dataclass(frozen=True, slots=True)
class _Entries:
    """The manifest entries of the chunks a selection needs, column-wise."""

    coords: np.ndarray[Any, np.dtype[np.int64]]  # (n, ndim) chunk coordinates
    path_id: np.ndarray[Any, np.dtype[np.int32]]  # >= 0 referenced (see urls), else a sentinel
    urls: list[str | None]
    offsets: np.ndarray[Any, np.dtype[np.int64]]
    lengths: np.ndarray[Any, np.dtype[np.int64]]
    inlined: dict[int, bytes]  # row -> bytes


class ArrayReader:
    """Reads selections of one referenced array.

    Parameters
    ----------
    array
        The array (metadata and chunk manifest).
    name
        Its path in the hierarchy, used in chunk keys of error messages.
    reader
        The byte-range reader (shared by every array of a dataset).
    threads
        Decoding threads (default: the machine's CPU count).
    """

    def __init__(
        self, array: RefArray, name: str, reader: RangeReader, *, threads: int | None = None
    ) -> None:
        self.array = array
        self.name = name
        self.reader = reader
        self.threads = threads or os.cpu_count() or 1
        self.decoder = ChunkDecoder(array.meta, name)
        self.batch = BatchDecoder.of(self.decoder) if array.meta.rectilinear is None else None
        meta = array.meta
        self._bounds = (
            None
            if meta.rectilinear is None
            else [None if rect is None else rect.bounds() for rect in meta.rectilinear]
        )

    @property
    def shape(self) -> tuple[int, ...]:
        """The array's shape."""
        return self.array.meta.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        """The array's dtype."""
        return self.array.meta.dtype

    def __getitem__(self, selection: Any) -> np.ndarray[Any, Any]:
        """The values of a basic selection (integers, slices of any step, ``...``)."""
        return self.read(selection)

    def read(self, selection: Any = ...) -> np.ndarray[Any, Any]:
        """The values of a basic selection (integers, slices of any step, ``...``).

        Raises
        ------
        ChunkFetchError, ChunkDecodeError
            When a needed chunk cannot be read; never fill values in its place.
        """
        job = self._job(selection)
        _execute([job], self.reader, self.threads)
        return job.result()

    def _job(self, selection: Any) -> _Job:
        """The output array of a selection, with missing chunks already filled."""
        meta = self.array.meta
        axes = normalize_selection(selection, meta.shape, meta.chunks, self._bounds)
        out = np.empty(tuple(axis.size for axis in axes), dtype=meta.dtype)
        entries = self._entries(axes) if out.size else None
        if entries is not None:
            self._fill_missing(out, axes, entries)
        tiled = tiled_view(out, axes) if self.batch is not None and entries is not None else None
        return _Job(self, axes, out, entries, tiled)

    # -- which chunks ----------------------------------------------------------------------

    def _entries(self, axes: Sequence[Axis]) -> _Entries:
        manifest = self.array.manifest
        if all(len(axis.chunk_ids) == 1 for axis in axes):  # one chunk (a point, a window)
            return self._one_entry(tuple([int(axis.chunk_ids[0]) for axis in axes]))
        grids = np.meshgrid(*[axis.chunk_ids for axis in axes], indexing="ij")
        coords = np.stack([g.reshape(-1) for g in grids], axis=1).astype(np.int64)
        grid = manifest.grid_shape
        numbers = np.ravel_multi_index(tuple(coords.T), grid)
        count = len(numbers)
        path_id = np.empty(count, dtype=np.int32)
        offsets = np.empty(count, dtype=np.int64)
        lengths = np.empty(count, dtype=np.int64)
        urls: list[str | None] = [None] * count
        inlined: dict[int, bytes] = {}
        size = manifest.block_size
        block_numbers = numbers // size if size else np.zeros(count, dtype=np.int64)
        for block_number in np.unique(block_numbers):
            rows = np.flatnonzero(block_numbers == block_number)
            block = manifest.block(int(block_number))
            local = numbers[rows] - block.start
            ids = block.path_id[local]
            path_id[rows] = ids
            offsets[rows] = block.offset[local].astype(np.int64)
            raw_lengths = block.length[local]
            # -1 as int64 (numpy >= 2.5 refuses a Python -1 in a uint64 np.where)
            whole = raw_lengths == WHOLE_FILE
            lengths[rows] = np.where(whole, np.int64(-1), raw_lengths.astype(np.int64))
            for row, pid, number in zip(
                rows.tolist(), ids.tolist(), numbers[rows].tolist(), strict=True
            ):
                if pid >= 0:
                    urls[row] = block.paths[pid]
                elif pid == INLINED:
                    inlined[row] = block.inlined[number]
        self._check_sizes(coords, path_id, urls, lengths)
        return _Entries(coords, path_id, urls, offsets, lengths, inlined)

    def _one_entry(self, index: tuple[int, ...]) -> _Entries:
        """The entry of the chunk at ``index`` alone, looked up without column arithmetic."""
        value = self.array.manifest[index]
        coords = np.array([index], dtype=np.int64).reshape(1, len(index))
        url: str | None = None
        offset = length = 0
        inlined: dict[int, bytes] = {}
        if value is None:
            pid = MISSING
        elif isinstance(value, bytes):
            pid = INLINED
            inlined[0] = value
        else:  # a reference: its path id is only told apart from the sentinels
            pid, url, offset = 0, value.url, value.offset
            length = -1 if value.length is None else value.length
        if pid != MISSING:  # `_check_sizes` for one chunk
            check_chunk_bytes(self.array.meta.chunks, self.dtype, lambda: self._key(index))
            if url is not None and length > max_chunk_bytes():
                check_stored_bytes(length, self._key(index), url)
        path_id = np.array([pid], dtype=np.int32)
        lengths = np.array([length], dtype=np.int64)
        offsets = np.array([offset], dtype=np.int64)
        return _Entries(coords, path_id, [url], offsets, lengths, inlined)

    def _check_sizes(
        self,
        coords: np.ndarray[Any, Any],
        path_id: np.ndarray[Any, Any],
        urls: list[str | None],
        lengths: np.ndarray[Any, Any],
    ) -> None:
        """The per-chunk limit, before anything is fetched: on the decoded size of the
        array's chunks, on the stored length of each referenced one."""
        present = np.flatnonzero(path_id != MISSING)
        if not present.size:
            return
        first = coords[present[0]]
        check_chunk_bytes(self.array.meta.chunks, self.dtype, lambda: self._key(first))
        for row in np.flatnonzero(lengths > max_chunk_bytes()).tolist():
            check_stored_bytes(int(lengths[row]), self._key(coords[row]), str(urls[row]))

    def _key(self, coords: Sequence[int] | np.ndarray[Any, Any]) -> str:
        index = ".".join(str(int(c)) for c in coords) or "0"
        return f"{self.name}/{index}"

    # -- filling the output ----------------------------------------------------------------

    def _fill_missing(
        self, out: np.ndarray[Any, Any], axes: Sequence[Axis], entries: _Entries
    ) -> None:
        missing = np.flatnonzero(entries.path_id == MISSING)
        if not missing.size:
            return
        value = missing_value(self.array.meta)
        if missing.size == len(entries.path_id):
            out[...] = value
            return
        for row in missing.tolist():
            out[_out_region(axes, entries.coords[row].tolist())] = value

    def place_run(
        self,
        job: _Job,
        rows: np.ndarray[Any, np.dtype[np.int64]],
        data: memoryview,
        starts: np.ndarray[Any, np.dtype[np.int64]],
        lengths: np.ndarray[Any, np.dtype[np.int64]],
    ) -> None:
        """Decode stored chunks of ``job`` (``data[start : start + length]``) into the output:
        those selected whole in one batch when the codecs allow, the others one by one."""
        if job.tiled is None and len(rows) == 1:  # one chunk, not selected whole
            start = int(starts[0])
            self.place(job, int(rows[0]), data[start : start + int(lengths[0])])
            return
        alone = np.arange(len(rows))
        if self.batch is not None and job.tiled is not None and job.entries is not None:
            tiles = tile_numbers(job.axes, job.entries.coords[rows])
            whole = np.flatnonzero((tiles >= 0).all(axis=1))
            if whole.size:
                run = consecutive_tiles(job.tiled, tiles[whole])
                values, decoded = self.batch.decode(
                    data, starts[whole].tolist(), lengths[whole].tolist(), out=run
                )
                # what libdeflate refused is decoded alone below (and raises there)
                if run is None and decoded.all():
                    job.tiled[tuple(tiles[whole].T)] = values
                elif run is None:
                    job.tiled[tuple(tiles[whole[decoded]].T)] = values[decoded]
                if len(whole) == len(rows) and decoded.all():
                    return  # every chunk placed (one for each dask task, most often)
                alone = np.setdiff1d(alone, whole[decoded], assume_unique=True)
        for i in alone.tolist():
            start = int(starts[i])
            self.place(job, int(rows[i]), data[start : start + int(lengths[i])])

    def place(self, job: _Job, row: int, data: bytes | memoryview) -> None:
        """Decode one stored chunk of ``job`` and copy its selected part into the output."""
        assert job.entries is not None
        coords = job.entries.coords[row].tolist()
        # an irregular grid: the chunk decodes to the length it was stored with, which may
        # exceed what it holds (a file's padded edge chunk); `in_chunk` selects only data
        shape = None if self._bounds is None else self.array.meta.stored_chunk_shape(coords)
        chunk = self.decoder.decode(data, lambda: self._key(coords), shape)  # key: errors only
        axes = job.axes
        job.out[_out_region(axes, coords)] = chunk[
            tuple([axis.in_chunk(c) for axis, c in zip(axes, coords, strict=True)])
        ]


def read_many(readers: Sequence[ArrayReader], reader: RangeReader) -> list[np.ndarray[Any, Any]]:
    """Every value of several arrays, fetched in one batched read (shared requests merged).

    Used to load small coordinate variables together: one request instead of one per array.
    """
    jobs = [r._job(...) for r in readers]
    threads = max((r.threads for r in readers), default=1)
    _execute(jobs, reader, threads)
    return [job.result() for job in jobs]


@dataclass(frozen=True, slots=True)
class _Job:
    """One selection of one array being read: where its chunks go."""

    array: ArrayReader
    axes: Sequence[Axis]
    out: np.ndarray[Any, Any]
    entries: _Entries | None
    tiled: np.ndarray[Any, Any] | None  # `tiled_view` of out, when chunks decode in batches

    def result(self) -> np.ndarray[Any, Any]:
        # the trailing ... keeps a 0-d array (and its byte order) when every axis is an integer
        result: np.ndarray[Any, Any] = self.out[(*(axis.finish for axis in self.axes), ...)]
        return result


def _execute(jobs: Sequence[_Job], reader: RangeReader, threads: int) -> None:
    """Fetch the stored chunks of every job in one batched read and decode them in parallel."""
    inline = [(job, row) for job in jobs if job.entries is not None for row in job.entries.inlined]
    stored = _Stored.of(jobs)
    if not inline and not stored.rows.size:
        return
    with _Decoding(threads) as decoding:
        for first in range(0, len(inline), _BATCH_CHUNKS):
            decoding.submit(_place_inlined, inline[first : first + _BATCH_CHUNKS])
        if stored.rows.size:
            urls, offsets, lengths = stored.requests(reader)
            for block in reader.iter_blocks(urls, offsets, lengths, _ChunkKeys(stored)):
                decoding.add_block(stored, block)


@dataclass(frozen=True, slots=True)
class _Stored:
    """The referenced chunks of some jobs, column-wise: chunk ``k`` is row ``rows[k]`` of
    ``jobs[job_of[k]]`` (numpy columns: no Python object per chunk lives on)."""

    jobs: Sequence[_Job]
    job_of: np.ndarray[Any, np.dtype[np.int64]]
    rows: np.ndarray[Any, np.dtype[np.int64]]

    @classmethod
    def of(cls, jobs: Sequence[_Job]) -> _Stored:
        found = [
            np.flatnonzero(job.entries.path_id >= 0) if job.entries is not None else _NONE
            for job in jobs
        ]
        if len(jobs) == 1:  # one array's read (the usual case)
            return cls(jobs, np.zeros(len(found[0]), dtype=np.int64), found[0].astype(np.int64))
        job_of = np.repeat(np.arange(len(jobs), dtype=np.int64), [len(f) for f in found])
        rows = np.concatenate(found).astype(np.int64) if found else _NONE
        return cls(jobs, job_of, rows)

    def requests(
        self, reader: RangeReader
    ) -> tuple[list[str], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """URLs, offsets and lengths of the chunks (whole-file references measured)."""
        urls: list[str] = []
        offsets: list[np.ndarray[Any, Any]] = []
        lengths: list[np.ndarray[Any, Any]] = []
        if len(self.jobs) == 1:
            per_job = [self.rows]
        else:  # a job's chunks are consecutive, in the order of `jobs`
            counts = np.bincount(self.job_of, minlength=len(self.jobs))
            per_job = np.split(self.rows, np.cumsum(counts)[:-1])
        for job, rows in zip(self.jobs, per_job, strict=True):
            if job.entries is None or not rows.size:
                continue
            urls += [job.entries.urls[row] or "" for row in rows.tolist()]
            offsets.append(job.entries.offsets[rows])
            lengths.append(job.entries.lengths[rows])
        offset = np.concatenate(offsets).astype(np.int64, copy=False)
        length = np.concatenate(lengths).astype(np.int64, copy=True)
        for k in np.flatnonzero(length < 0).tolist():  # a whole-file reference: its size
            length[k] = reader.size(urls[k]) - offset[k]
        return urls, offset, length

    def key(self, k: int) -> str:
        """The key of chunk ``k`` (for messages)."""
        job = self.jobs[int(self.job_of[k])]
        assert job.entries is not None  # only jobs with entries have stored chunks
        return job.array._key(job.entries.coords[int(self.rows[k])])

    def place_run(
        self,
        chunks: np.ndarray[Any, np.dtype[np.int64]],
        data: memoryview,
        starts: np.ndarray[Any, np.dtype[np.int64]],
        lengths: np.ndarray[Any, np.dtype[np.int64]],
    ) -> None:
        """Decode ``chunks`` (``data[start : start + length]``) into their jobs' outputs."""
        if len(self.jobs) == 1:
            job = self.jobs[0]
            job.array.place_run(job, self.rows[chunks], data, starts, lengths)
            return
        job_of = self.job_of[chunks]
        for number in np.unique(job_of).tolist():
            mine = job_of == number
            job = self.jobs[number]
            job.array.place_run(job, self.rows[chunks[mine]], data, starts[mine], lengths[mine])


class _ChunkKeys(Sequence[str]):
    """The keys of the stored chunks being fetched, built only when an error names one."""

    def __init__(self, stored: _Stored) -> None:
        self.stored = stored

    def __len__(self) -> int:
        return len(self.stored.rows)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        return self.stored.key(index)


class _Decoding:
    """A thread pool decoding chunks in batches, with a bounded backlog (bounded memory).

    The pool is made only when a second task comes: a read whose chunks make one task (a
    dask task's chunk, most often) decodes it in the calling thread, without the threads'
    start and hand-off (which cost more than decoding a small chunk).
    """

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.pool: ThreadPoolExecutor | None = None
        self.held: tuple[Callable[..., None], tuple[Any, ...]] | None = None
        self.pending: set[Future[None]] = set()

    def __enter__(self) -> _Decoding:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                if self.held is not None:  # the only task: decoded here
                    task, args = self.held
                    self.held = None
                    task(*args)
                for future in self.pending:
                    future.result()
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)

    def add_block(self, stored: _Stored, block: FetchedBlock) -> None:
        """Decode the chunks of a fetched block, a batch of them per task."""
        count = len(block.requests)
        if count == 1:  # one chunk: one task
            self.submit(stored.place_run, block.requests, block.data, block.starts, block.lengths)
            return
        batches = max(-(-count // _BATCH_CHUNKS), -(-int(block.lengths.sum()) // _BATCH_BYTES), 1)
        for part in np.array_split(np.arange(count), min(batches, count or 1)):
            if part.size:
                first, last = int(part[0]), int(part[-1]) + 1
                self.submit(
                    stored.place_run,
                    block.requests[first:last],
                    block.data,
                    block.starts[first:last],
                    block.lengths[first:last],
                )

    def submit(self, task: Callable[..., None], *args: Any) -> None:
        """Run ``task(*args)`` on the pool, first waiting while the backlog is full."""
        if self.pool is None:
            if self.held is None:
                self.held = (task, args)
                return
            self.pool = ThreadPoolExecutor(self.threads)
            held, self.held = self.held, None
            self.pending.add(self.pool.submit(held[0], *held[1]))
        self.pending.add(self.pool.submit(task, *args))
        if len(self.pending) >= self.threads * _BACKLOG_PER_THREAD:
            done, _ = wait(self.pending, return_when=FIRST_COMPLETED)
            for future in done:
                self.pending.discard(future)
                future.result()


def _place_inlined(chunks: list[tuple[_Job, int]]) -> None:
    for job, row in chunks:
        assert job.entries is not None  # only jobs with entries have inlined chunks
        job.array.place(job, row, job.entries.inlined[row])


def _out_region(axes: Sequence[Axis], coords: Sequence[int]) -> tuple[slice, ...]:
    return tuple([axis.in_output(c) for axis, c in zip(axes, coords, strict=True)])
