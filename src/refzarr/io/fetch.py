"""Fetching many byte ranges at once: merged into blocks, concurrent, retried, never short.

`RangeReader.read` returns one buffer per request; `RangeReader.iter_read` yields them block by
block as blocks arrive, so a caller can decode while later blocks are still in flight and hold
only what is in flight; `RangeReader.iter_blocks` yields the blocks themselves with where each
request sits in them (no Python object per request: a caller slices them where it decodes).
Local files are read with ``os.pread`` from a thread pool shared by the process (no event
loop; blocks of at most `SMALL_LOCAL_BLOCK` bytes, and a read of a single block, in the calling
thread, where a thread hand-off would cost more than it gains), keeping at most
`MAX_OPEN_FILES` descriptors open; any other fsspec URL through its filesystem's ``cat_file``,
from threads of the read's own. A failed block is retried with
exponential backoff a bounded number of times, then raises `ChunkFetchError` naming the URL, the
range and the keys that needed it. A range that comes back short (past the end of the object) is
an error at once: missing bytes are never padded or read as fill values.

Remote blocks have an overall deadline (`DEFAULT_DEADLINE`, 60 s, from the first try; the
policy's ``deadline`` or `set_read_deadline` change it): a server that accepts connections and
never answers, or keeps failing, raises `ChunkFetchError` naming the URL and what was tried
when the deadline passes, however the filesystem's own timeouts and retries are set. A request
stuck in the filesystem is left to finish in its thread; the read does not wait for it.

A file's size (`RangeReader.size`, for whole-file references) and requests for a remote
reference set's own files (`call_within_deadline`) are retried by the same loop (`retried`),
within the same deadline, each try in a thread of its own: the size as the reader's policy
says, the reference set's files as `set_reference_retries` says.

Its parts, a module each in `refzarr.io`: `plan` (ranges merged into blocks), `policy`
(`FetchPolicy`, the deadline), `local_files` (``pread`` through shared descriptors), `workers`
(the threads), `retry` (tries within the deadline), `failures` (what another try may fix).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from refzarr.errors import ChunkFetchError
from refzarr.io.allow import URLPolicy
from refzarr.io.http_range import is_http, read_range
from refzarr.io.local_files import SMALL_LOCAL_BLOCK, LocalFiles
from refzarr.io.plan import Block, ReadPlan, plan_reads
from refzarr.io.policy import LOCAL_POLICY, REMOTE_POLICY, FetchPolicy
from refzarr.io.retry import Tries, call_retried, retried
from refzarr.io.workers import Workers

__all__ = ["FetchedBlock", "RangeReader"]


@dataclass(frozen=True, slots=True)
class FetchedBlock:
    """One fetched block and the requests it holds, column-wise.

    Attributes
    ----------
    data
        The block's bytes.
    requests
        The indices of the requests it holds (positions in the lists given to the reader).
    starts, lengths
        Where each of those requests starts in ``data``, and its length.
    """

    data: memoryview
    requests: np.ndarray[Any, np.dtype[np.int64]]
    starts: np.ndarray[Any, np.dtype[np.int64]]
    lengths: np.ndarray[Any, np.dtype[np.int64]]

    def __iter__(self) -> Iterator[tuple[int, memoryview]]:
        """``(request index, bytes)`` per request it holds."""
        data = self.data
        for index, start, length in zip(
            self.requests.tolist(), self.starts.tolist(), self.lengths.tolist(), strict=True
        ):
            yield index, data[start : start + length]


@dataclass
class RangeReader:
    """Reads byte ranges of files named by local paths or fsspec URLs.

    Parameters
    ----------
    storage_options
        fsspec options for the filesystems of remote URLs (``{"anon": True}``, ...).
    local_policy, remote_policy
        Merging, concurrency and retry settings for local files and for everything else.
    allowed
        Protocols (``"s3"``) and URL prefixes (``"s3://bucket/data/"``) that may be read; a
        request for any other URL raises `ForbiddenURLError` before any byte is requested.
        None (default) allows everything.
    url_check
        Called as ``url_check(reader, urls)`` with the distinct URLs of every read (and the URL
        of every `size` asked) before any byte of them is requested; it raises to refuse them.
        `refzarr.sources.guard.SourceGuard` compares each source file with its scan's record
        there. None (default): no check. It travels with the reader when pickled.

    Examples
    --------
    >>> reader = RangeReader()  # doctest: +SKIP
    >>> first, second = reader.read(["a.nc", "a.nc"], [0, 4096], [100, 100])  # doctest: +SKIP
    """

    storage_options: Mapping[str, Any] | None = None
    local_policy: FetchPolicy = LOCAL_POLICY
    remote_policy: FetchPolicy = REMOTE_POLICY
    allowed: Sequence[str] | None = None
    url_check: Callable[[RangeReader, Sequence[str]], None] | None = None
    _filesystems: dict[str, tuple[Any, bool]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        # filesystems and the lock stay behind: a copy (a dask worker) makes its own
        return {
            "storage_options": self.storage_options,
            "local_policy": self.local_policy,
            "remote_policy": self.remote_policy,
            "allowed": self.allowed,
            "url_check": self.url_check,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def read(
        self,
        urls: Sequence[str],
        offsets: Sequence[int] | np.ndarray[Any, Any],
        lengths: Sequence[int] | np.ndarray[Any, Any],
        keys: Sequence[str] | None = None,
    ) -> list[memoryview]:
        """The bytes of every range, in request order.

        Parameters
        ----------
        urls, offsets, lengths
            One entry per range.
        keys
            What each range is (e.g. ``"temp/0.3.1"``), named in errors.

        Raises
        ------
        ChunkFetchError
            When a range cannot be read after the policy's attempts, or comes back short.
        """
        out: list[memoryview | None] = [None] * len(urls)
        for index, data in self.iter_read(urls, offsets, lengths, keys):
            out[index] = data
        return out  # type: ignore[return-value]  # every index is filled once

    def iter_read(
        self,
        urls: Sequence[str],
        offsets: Sequence[int] | np.ndarray[Any, Any],
        lengths: Sequence[int] | np.ndarray[Any, Any],
        keys: Sequence[str] | None = None,
    ) -> Iterator[tuple[int, memoryview]]:
        """``(request index, bytes)`` pairs, block by block as blocks arrive (any order).

        At most ``concurrency`` blocks are in flight; a block's buffers are yielded as soon as
        it arrives. Stopping the iteration early cancels the blocks not yet started.
        """
        for block in self.iter_blocks(urls, offsets, lengths, keys):
            yield from block

    def iter_blocks(
        self,
        urls: Sequence[str],
        offsets: Sequence[int] | np.ndarray[Any, Any],
        lengths: Sequence[int] | np.ndarray[Any, Any],
        keys: Sequence[str] | None = None,
    ) -> Iterator[FetchedBlock]:
        """The fetched blocks as they arrive (any order), each with the requests it holds.

        Every request is in exactly one block. At most ``concurrency`` blocks are in flight;
        stopping the iteration early cancels the blocks not yet started.

        Raises
        ------
        ChunkFetchError
            When a block cannot be read after the policy's attempts, or comes back short.
        """
        distinct = list(dict.fromkeys(urls))
        URLPolicy(self.allowed).check(distinct)
        if self.url_check is not None:
            self.url_check(self, distinct)
        _check_ends(urls, offsets, lengths, keys)
        is_local_url = {url: self._filesystem(url)[1] for url in distinct}
        local = [is_local_url[url] for url in urls]
        for is_local in (True, False):
            chosen = [i for i, flag in enumerate(local) if flag is is_local]
            if chosen:
                yield from self._read_group(chosen, urls, offsets, lengths, keys, is_local)

    def size(self, url: str) -> int:
        """The size in bytes of the file at ``url`` (for whole-file references); a remote one
        asked within ``remote_policy``'s deadline, retried on transient failures like a block.

        Raises
        ------
        ChunkFetchError
            When the file cannot be found or asked.
        """
        URLPolicy(self.allowed).check([url])
        if self.url_check is not None:
            self.url_check(self, [url])
        fs, is_local = self._filesystem(url)
        what = f"{url}: cannot get its size"
        if is_local:
            try:
                return int(fs.size(_local_path(fs, url)))
            except Exception as exc:
                raise ChunkFetchError(f"{what}: {type(exc).__name__}: {exc}") from exc
        path = _remote_path(fs, url)
        policy = self.remote_policy
        return call_retried(
            lambda: int(fs.size(path)), what, policy, ChunkFetchError, own_policy=True
        )

    def info(self, url: str) -> Mapping[str, Any]:
        """fsspec's ``info`` of the file at ``url`` (``size`` and, as the storage gives them,
        ``ETag``, ``LastModified``, ...): a remote one asked within ``remote_policy``'s
        deadline, retried on transient failures like a block. The allowed URLs are checked,
        not ``url_check`` (it is what asks).

        Raises
        ------
        FileNotFoundError
            When there is no such file.
        ChunkFetchError
            When the file cannot be asked.
        """
        URLPolicy(self.allowed).check([url])
        fs, is_local = self._filesystem(url)
        if is_local:
            found: Mapping[str, Any] = fs.info(_local_path(fs, url))
            return found
        path = _remote_path(fs, url)
        what = f"{url}: cannot get its size and state"
        return call_retried(
            lambda: fs.info(path),
            what,
            self.remote_policy,
            ChunkFetchError,
            own_policy=True,
            passing=(FileNotFoundError,),
        )

    def _read_group(
        self,
        chosen: list[int],
        urls: Sequence[str],
        offsets: Sequence[int] | np.ndarray[Any, Any],
        lengths: Sequence[int] | np.ndarray[Any, Any],
        keys: Sequence[str] | None,
        is_local: bool,
    ) -> Iterator[FetchedBlock]:
        policy = self.local_policy if is_local else self.remote_policy
        index = np.asarray(chosen, dtype=np.int64)
        plan = plan_reads(
            [urls[i] for i in chosen],
            np.asarray(offsets, dtype=np.int64)[index],
            np.asarray(lengths, dtype=np.int64)[index],
            max_gap=policy.max_gap,
            max_block=policy.max_block,
        )
        members = _members_by_block(plan)
        names = _Names(keys, chosen)
        with ExitStack() as stack:
            files = stack.enter_context(LocalFiles()) if is_local else None
            pool = stack.enter_context(Workers(policy.concurrency, is_local))
            # closed first: it cancels its blocks not started and waits for its local ones
            fetched = self._fetch_blocks(plan, pool, policy, files, names, members)
            for block_index, data in stack.enter_context(closing(fetched)):
                held = members[block_index]
                yield FetchedBlock(
                    memoryview(data),
                    index[held],
                    plan.offset_in_block[held],
                    plan.lengths[held],
                )

    def _fetch_blocks(
        self,
        plan: ReadPlan,
        pool: Workers,
        policy: FetchPolicy,
        files: LocalFiles | None,
        names: _Names,
        members: list[np.ndarray[Any, np.dtype[np.int64]]],
    ) -> Generator[tuple[int, bytes], None, None]:
        """Fetched blocks as they complete, with at most ``concurrency`` in flight."""
        pending: dict[Future[bytes], tuple[int, Tries]] = {}
        queue = iter(range(len(plan.blocks)))
        timed = files is None
        alone = len(plan.blocks) == 1
        try:
            while True:
                for block_index in queue:
                    block = plan.blocks[block_index]
                    where = partial(names.of, members[block_index])  # named on failure only
                    tries = Tries(policy.seconds() if timed else None)
                    if files is not None and (alone or block.length <= SMALL_LOCAL_BLOCK):
                        yield block_index, self._fetch_block(block, policy, files, where, tries)
                        continue
                    future = pool.submit(self._fetch_block, block, policy, files, where, tries)
                    pending[future] = (block_index, tries)
                    if len(pending) >= policy.concurrency:
                        break
                if not pending:
                    return
                timeout = min(t.left() for _, t in pending.values()) if timed else None
                done, _ = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
                for future in done:
                    yield pending.pop(future)[0], future.result()
                if not done:
                    _raise_overdue(pending, plan, names, members)
        finally:
            running = [future for future in pending if not future.cancel()]
            if files is not None:  # their descriptors close when the read ends
                wait(running)

    def _fetch_block(
        self,
        block: Block,
        policy: FetchPolicy,
        files: LocalFiles | None,
        where: Callable[[], str],
        tries: Tries,
    ) -> bytes:
        """One block, retried on transient failures; ChunkFetchError when it cannot be had
        (the read's watchdog ends it at the deadline: `_raise_overdue`)."""

        def fetch() -> bytes:
            data = self._get(block, files)
            if len(data) != block.length:
                reason = (
                    f"got {len(data)} bytes of {block.length}: the range is past the end; the "
                    "file was truncated or rewritten since it was scanned (`refzarr validate "
                    "--sources` tells), or the set's writer recorded a wrong length (kerchunk's "
                    "scan_grib does for GRIB1 messages): scan the file again with `refzarr scan`"
                )
                raise _fetch_error(block, where(), reason)
            return data

        def fail(reason: str) -> ChunkFetchError:
            return _fetch_error(block, where(), reason)

        return retried(fetch, policy, tries, fail)

    def _get(self, block: Block, files: LocalFiles | None) -> bytes:
        fs, is_local = self._filesystem(block.url)
        if is_local and files is not None:
            return files.pread(_local_path(fs, block.url), block.start, block.length)
        if is_http(fs):  # a server ignoring Range would send the whole file (read_range)
            return read_range(fs, block.url, block.start, block.end)
        data: bytes = fs.cat_file(_remote_path(fs, block.url), start=block.start, end=block.end)
        return data

    def _filesystem(self, url: str) -> tuple[Any, bool]:
        """The fsspec filesystem of a URL (one instance per protocol) and whether it is local."""
        protocol = _protocol(url)
        found = self._filesystems.get(protocol)  # made once: read without the lock
        if found is not None:
            return found
        import fsspec  # on first use: `import refzarr` stays light
        from fsspec.implementations.local import LocalFileSystem

        with self._lock:
            found = self._filesystems.get(protocol)
            if found is None:
                options = {} if protocol == "file" else dict(self.storage_options or {})
                fs = fsspec.filesystem(protocol, **options)
                found = self._filesystems[protocol] = (fs, isinstance(fs, LocalFileSystem))
        return found


def _raise_overdue(
    pending: Mapping[Future[bytes], tuple[int, Tries]],
    plan: ReadPlan,
    names: _Names,
    members: list[np.ndarray[Any, np.dtype[np.int64]]],
) -> None:
    """Raise ChunkFetchError for the first pending block past its deadline, if any."""
    for block_index, tries in pending.values():
        if tries.left() <= 0:
            block = plan.blocks[block_index]
            where = names.of(members[block_index])
            raise _fetch_error(block, where, tries.report())


@dataclass(frozen=True, slots=True)
class _Names:
    """The keys of requests, for messages (request numbers when no keys were given)."""

    keys: Sequence[str] | None
    chosen: list[int]

    def of(self, members: np.ndarray[Any, np.dtype[np.int64]], shown: int = 3) -> str:
        names = [
            self.keys[self.chosen[m]] if self.keys is not None else f"#{self.chosen[m]}"
            for m in members[:shown].tolist()
        ]
        more = f" and {len(members) - shown} more" if len(members) > shown else ""
        return ", ".join(names) + more


def _members_by_block(plan: ReadPlan) -> list[np.ndarray[Any, np.dtype[np.int64]]]:
    """For every block, the requests it holds (ascending)."""
    if len(plan.blocks) == 1:
        return [np.arange(len(plan.block_of), dtype=np.int64)]
    order = np.argsort(plan.block_of, kind="stable")
    bounds = np.searchsorted(plan.block_of[order], np.arange(len(plan.blocks) + 1))
    return [order[a:b] for a, b in itertools.pairwise(bounds.tolist())]


_LAST_BYTE = 2**63 - 1
"""The largest byte position a file can have (int64 offsets everywhere)."""


def _check_ends(
    urls: Sequence[str],
    offsets: Sequence[int] | np.ndarray[Any, Any],
    lengths: Sequence[int] | np.ndarray[Any, Any],
    keys: Sequence[str] | None,
) -> None:
    """Raise ChunkFetchError for a range that ends past any possible file end (a corrupt
    reference whose end would overflow); checked before anything is planned or read."""
    if len(offsets) == 1 == len(lengths):  # one range (a point read): without numpy
        start, size = int(offsets[0]), int(lengths[0])
        if size < 0 or start <= _LAST_BYTE - size:
            return
    starts = np.asarray(offsets, dtype=np.int64).reshape(-1)
    sizes = np.asarray(lengths, dtype=np.int64).reshape(-1)
    if starts.shape != sizes.shape or not starts.size or (sizes < 0).any():
        return  # the planner says what is wrong
    beyond = np.flatnonzero(starts > _LAST_BYTE - np.maximum(sizes, 0))
    if beyond.size:
        k = int(beyond[0])
        name = keys[k] if keys is not None else f"#{k}"
        start, size = int(starts[k]), int(sizes[k])
        raise ChunkFetchError(
            f"{urls[k]}: cannot read bytes {start}-{start + size} (offset {start}, length "
            f"{size}) for {name}: the range ends past the largest offset a file can have "
            f"({_LAST_BYTE}); the reference is corrupt"
        )


def _fetch_error(block: Block, where: str, reason: str) -> ChunkFetchError:
    return ChunkFetchError(
        f"{block.url}: cannot read bytes {block.start}-{block.end} "
        f"(offset {block.start}, length {block.length}) for {where}: {reason}"
    )


def _protocol(url: str) -> str:
    if "://" not in url:
        return "file"
    protocol = url.split("://", 1)[0]
    return "file" if protocol in ("file", "local") else protocol


def _local_path(fs: Any, url: str) -> str:
    path: str = fs._strip_protocol(url)
    return path


def _remote_path(fs: Any, url: str) -> str:
    # HTTP filesystems need the whole URL; others take the path without the protocol
    return url if _protocol(url) in ("http", "https") else str(fs._strip_protocol(url))
