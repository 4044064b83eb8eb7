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
reference set's own files (`call_within_deadline`) are retried by the same loop (`_retried`),
within the same deadline, each try in a thread of its own: the size as the reader's policy
says, the reference set's files as `set_reference_retries` says.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, closing
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar

import numpy as np

from refzarr.errors import ChunkFetchError, ReferenceFetchError, RefzarrError
from refzarr.io.allow import URLPolicy
from refzarr.io.http_range import is_http, read_range
from refzarr.io.plan import Block, ReadPlan, plan_reads

__all__ = [
    "DEFAULT_DEADLINE",
    "LOCAL_POLICY",
    "MAX_OPEN_FILES",
    "REMOTE_POLICY",
    "SMALL_LOCAL_BLOCK",
    "FetchPolicy",
    "FetchedBlock",
    "RangeReader",
    "call_within_deadline",
    "described_failure",
    "set_read_deadline",
    "set_reference_retries",
    "unreachable_endpoint",
]

T = TypeVar("T")

DEFAULT_DEADLINE = 60.0
"""Seconds a remote block may take, all tries included, unless a policy says otherwise."""

_deadline = {"default": DEFAULT_DEADLINE}


def set_read_deadline(seconds: float) -> None:
    """Set the process-wide deadline of remote reads whose policy gives none (seconds > 0).

    Raises
    ------
    ValueError
        When ``seconds`` is not a positive number.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"the deadline must be a positive number of seconds, got {seconds!r}")
    _deadline["default"] = float(seconds)


SMALL_LOCAL_BLOCK = 64 * 2**10
"""Local blocks up to this size are read in the calling thread: a pread from the page cache
takes microseconds, a hand-off to the pool tens (thousands of small files' coordinates)."""

MAX_OPEN_FILES = 128
"""Idle local file descriptors one read keeps open at most, besides the files being read (a
read across 10,000 files must not exhaust the process's limit, often 1,024): the least
recently used idle one is closed."""

_NOT_TRANSIENT = (
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
    ValueError,
    TypeError,
    KeyError,
    NotImplementedError,
)
"""Failures that another attempt cannot fix; everything else (timeouts, resets, 5xx) is retried."""

_TRANSIENT_STATUS = frozenset({408, 425, 429})
"""HTTP client-error statuses that another attempt may fix (timeout, too early, slow down)."""


def _transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed: not for the `_NOT_TRANSIENT` kinds nor an HTTP
    4xx answer (forbidden, bad request, ...) other than `_TRANSIENT_STATUS`; yes for the rest
    (timeouts, connection resets, 5xx answers)."""
    if isinstance(exc, _NOT_TRANSIENT) or _missing_credentials(exc):
        return False
    if unreachable_endpoint(exc) is not None:
        return False
    status = getattr(exc, "status", None)  # aiohttp's ClientResponseError (fsspec's HTTP)
    if isinstance(status, int) and 400 <= status < 500:
        return status in _TRANSIENT_STATUS
    return True


def _missing_credentials(exc: BaseException) -> bool:
    """Whether ``exc`` is botocore's "no credentials" (s3fs found none, or only half): no
    later try finds them (botocore is asked only when something loaded it)."""
    botocore = sys.modules.get("botocore.exceptions")
    if botocore is None:
        return False
    return isinstance(exc, botocore.NoCredentialsError | botocore.PartialCredentialsError)


def unreachable_endpoint(exc: BaseException | None) -> str | None:
    """The endpoint (``scheme://host:port``) botocore could not connect to when ``exc`` (or
    the failure it was raised from) is its ``EndpointConnectionError`` (connection refused, no
    such host), else None. botocore has retried the connection already: ours would only
    multiply its wait (a wrong ``endpoint_url`` took 37 s for 9 files with 4 tries)."""
    botocore = sys.modules.get("botocore.exceptions")
    if botocore is None or exc is None:
        return None
    found = next(
        (e for e in (exc, exc.__cause__) if isinstance(e, botocore.EndpointConnectionError)), None
    )
    if found is None:
        return None
    url = str(getattr(found, "kwargs", {}).get("endpoint_url", ""))
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url or "(unknown)"


def described_failure(exc: BaseException) -> str:
    """What failed, for messages: the exception's type and text; for an unreachable S3
    endpoint, which one and what to check."""
    endpoint = unreachable_endpoint(exc)
    if endpoint is None:
        return f"{type(exc).__name__}: {exc}"
    return (
        f"cannot connect to the S3 endpoint {endpoint} (nothing answers there: connection "
        "refused or no such host; botocore retried it); check the endpoint_url in the storage "
        "options' client_kwargs (--storage-options) and that the server is up and reachable"
    )


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """How to merge, parallelise and retry reads.

    Parameters
    ----------
    max_gap
        Largest run of unrequested bytes read to merge two ranges into one request.
    max_block
        Largest merged request in bytes (a single larger range is still one request).
    concurrency
        Requests in flight at once.
    attempts
        Tries per request before giving up (1: no retry).
    backoff
        Seconds to wait before the first retry; doubled each time, at most ``max_backoff``.
    max_backoff
        Longest wait between two tries, in seconds.
    deadline
        Seconds a block may take from its first try, all tries included, before the read
        fails with `ChunkFetchError`; None: the process-wide default (`set_read_deadline`,
        `DEFAULT_DEADLINE` unless changed). Local reads are not timed.
    """

    max_gap: int
    max_block: int
    concurrency: int
    attempts: int = 4
    backoff: float = 0.1
    max_backoff: float = 2.0
    deadline: float | None = None

    def __post_init__(self) -> None:
        if self.max_gap < 0 or self.max_block < 1 or self.concurrency < 1 or self.attempts < 1:
            raise ValueError(f"invalid fetch policy {self}")
        if self.deadline is not None and not self.deadline > 0:
            raise ValueError(f"invalid fetch policy {self}: the deadline must be positive")

    def seconds(self) -> float:
        """The deadline in force for this policy."""
        return self.deadline if self.deadline is not None else _deadline["default"]


LOCAL_POLICY = FetchPolicy(max_gap=64 * 2**10, max_block=16 * 2**20, concurrency=8, attempts=1)
"""Local disk: merging saves system calls only, so gaps stay small; nothing to retry."""

REMOTE_POLICY = FetchPolicy(max_gap=2 * 2**20, max_block=32 * 2**20, concurrency=16)
"""Object stores and HTTP: a request costs tens of milliseconds, about what a few megabytes of
transfer cost, so ranges up to 2 MiB apart are merged."""


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
        return _call_retried(
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
        return _call_retried(
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
            files = stack.enter_context(_LocalFiles()) if is_local else None
            pool = stack.enter_context(_Workers(policy.concurrency, is_local))
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
        pool: _Workers,
        policy: FetchPolicy,
        files: _LocalFiles | None,
        names: _Names,
        members: list[np.ndarray[Any, np.dtype[np.int64]]],
    ) -> Generator[tuple[int, bytes], None, None]:
        """Fetched blocks as they complete, with at most ``concurrency`` in flight."""
        pending: dict[Future[bytes], tuple[int, _Tries]] = {}
        queue = iter(range(len(plan.blocks)))
        timed = files is None
        alone = len(plan.blocks) == 1
        try:
            while True:
                for block_index in queue:
                    block = plan.blocks[block_index]
                    where = partial(names.of, members[block_index])  # named on failure only
                    tries = _Tries(policy.seconds() if timed else None)
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
        files: _LocalFiles | None,
        where: Callable[[], str],
        tries: _Tries,
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

        return _retried(fetch, policy, tries, fail)

    def _get(self, block: Block, files: _LocalFiles | None) -> bytes:
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


_SHARED_POOLS: dict[int, ThreadPoolExecutor] = {}
"""The process's pools for local reads, by size (one per policy concurrency in use)."""

_SHARED_LOCK = threading.Lock()


def _shared_pool(size: int) -> ThreadPoolExecutor:
    """The process's pool of ``size`` threads for local reads (made on first use; its idle
    threads end with the interpreter, joined by ``concurrent.futures``)."""
    with _SHARED_LOCK:
        pool = _SHARED_POOLS.get(size)
        if pool is None:
            pool = ThreadPoolExecutor(size, thread_name_prefix="refzarr-local")
            _SHARED_POOLS[size] = pool
        return pool


def _forget_shared_pools() -> None:
    """In a forked child: the parent's pool threads do not exist there, so new pools are made."""
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()
    _SHARED_POOLS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_shared_pools)


class _Workers:
    """The threads one read hands blocks to, taken on the first hand-off.

    Local reads share the process's pool of ``size`` threads (`_shared_pool`: no threads made
    per read; concurrent reads wait their turn). Remote reads get a pool of their own, left
    behind at the end without waiting: a request stuck past its deadline keeps its thread, not
    a shared one.
    """

    def __init__(self, size: int, is_local: bool) -> None:
        self._size = size
        self._is_local = is_local
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> _Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None and not self._is_local:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def submit(self, call: Callable[..., bytes], *args: Any) -> Future[bytes]:
        if self._pool is None:
            self._pool = (
                _shared_pool(self._size)
                if self._is_local
                else ThreadPoolExecutor(self._size, thread_name_prefix="refzarr-fetch")
            )
        return self._pool.submit(call, *args)


class _LocalFiles:
    """Descriptors of local files for the duration of one read, shared by the threads.

    At most ``max_open`` stay open: when more are needed, the least recently used ones that
    no thread is reading from are closed (they are opened again if asked for again).
    """

    def __init__(self, max_open: int = MAX_OPEN_FILES) -> None:
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._busy: dict[str, int] = {}
        self._max_open = max_open
        self._lock = threading.Lock()

    def __enter__(self) -> _LocalFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

    @property
    def open_count(self) -> int:
        """Descriptors open now."""
        return len(self._fds)

    def pread(self, path: str, offset: int, length: int) -> bytes:
        fd = self._acquire(path)
        try:
            parts = []
            while length > 0:  # pread may return less than asked (large reads, signals)
                data = os.pread(fd, length, offset)
                if not data:
                    break
                parts.append(data)
                offset += len(data)
                length -= len(data)
        finally:
            self._release(path)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _acquire(self, path: str) -> int:
        with self._lock:
            fd = self._fds.get(path)
            if fd is None:
                self._close_idle(self._max_open - 1)
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
                self._fds[path] = fd
            else:
                self._fds.move_to_end(path)
            self._busy[path] = self._busy.get(path, 0) + 1
            return fd

    def _release(self, path: str) -> None:
        with self._lock:
            left = self._busy[path] - 1
            if left:
                self._busy[path] = left
            else:
                del self._busy[path]

    def _close_idle(self, keep: int) -> None:
        """Close least recently used idle descriptors until at most ``keep`` are open."""
        for path in list(self._fds):
            if len(self._fds) <= keep:
                return
            if path not in self._busy:
                os.close(self._fds.pop(path))


@dataclass(slots=True)
class _Tries:
    """What was tried for one block (the watchdog reads it from another thread)."""

    deadline: float | None
    started: float = field(default_factory=time.monotonic)
    count: int = 0
    last: str = ""

    def left(self) -> float:
        """Seconds until the deadline (infinite without one)."""
        if self.deadline is None:
            return float("inf")
        return self.started + self.deadline - time.monotonic()

    def past(self, late: bool) -> str:
        """Why no more tries: the policy's count, or (``late``) the deadline."""
        if not late or self.deadline is None:
            return ""
        return f"; another would end past the read deadline of {self.deadline:g} s"

    def report(self, setter: bool = True) -> str:
        """Why a request is given up when its deadline passed (``setter``: name the
        `FetchPolicy` setting too)."""
        failed = f"; the last failed with {self.last}" if self.last else ""
        policy = " or FetchPolicy(deadline=...)" if setter else ""
        return (
            f"no answer within the read deadline of {self.deadline:g} s "
            f"({self.count} attempt(s) started{failed}); raise it with "
            f"refzarr.io.set_read_deadline{policy}"
        )


def _raise_overdue(
    pending: Mapping[Future[bytes], tuple[int, _Tries]],
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


_reference_retries = {"default": REMOTE_POLICY}
"""The policy of requests for a remote reference set's files: only its ``attempts``,
``backoff`` and ``max_backoff`` count (`set_reference_retries`); its deadline is the
process-wide one."""


def set_reference_retries(
    attempts: int = REMOTE_POLICY.attempts,
    backoff: float = REMOTE_POLICY.backoff,
    max_backoff: float = REMOTE_POLICY.max_backoff,
) -> None:
    """Set how requests for a remote reference set's own files are retried, process-wide.

    A request that fails transiently (no answer to one attempt, a connection reset, an HTTP
    5xx, 408 or 429) is tried again after ``backoff`` seconds, doubled each time up to
    ``max_backoff``, at most ``attempts`` tries in all, and never past the read deadline
    (`set_read_deadline`), which bounds all tries of a request together. The defaults are
    those of chunk reads (`REMOTE_POLICY`: 4 tries, 0.1 s doubling to 2 s); ``attempts=1``
    turns retries off.

    Raises
    ------
    ValueError
        When ``attempts`` is not a positive integer or a wait is negative.
    """
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"attempts must be a positive integer, got {attempts!r}")
    for name, value in (("backoff", backoff), ("max_backoff", max_backoff)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")
    _reference_retries["default"] = replace(
        REMOTE_POLICY, attempts=attempts, backoff=float(backoff), max_backoff=float(max_backoff)
    )


def call_within_deadline(call: Callable[[], T], what: str) -> T:
    """``call()``, a request to a remote filesystem, retried on transient failures, all
    tries within the process-wide read deadline.

    Raises
    ------
    ReferenceFetchError
        Naming ``what`` (the URL and what was asked) and what was tried, when no answer came
        within the deadline (`set_read_deadline`), the request failed in a way another
        attempt cannot fix, or every attempt (`set_reference_retries`) failed; a missing
        file (FileNotFoundError) and refzarr's own errors pass through.
    """
    passing = (FileNotFoundError, IsADirectoryError, NotADirectoryError)
    policy = _reference_retries["default"]
    return _call_retried(call, what, policy, ReferenceFetchError, own_policy=False, passing=passing)


def _call_retried(
    call: Callable[[], T],
    what: str,
    policy: FetchPolicy,
    error: type[ChunkFetchError],
    *,
    own_policy: bool,
    passing: tuple[type[Exception], ...] = (),
) -> T:
    """``call()``, a remote request, tried again after transient failures as ``policy`` says,
    each try in a thread of its own and all within the deadline; ``error`` naming ``what``
    when it cannot be had. Refzarr's own errors and those of ``passing`` pass through.
    ``own_policy``: messages name the `FetchPolicy` settings (the caller chose it), else the
    process-wide setters only."""
    tries = _Tries(policy.seconds())
    setting = "FetchPolicy(attempts=...)" if own_policy else "refzarr.io.set_reference_retries"

    def fail(reason: str) -> ChunkFetchError:
        return error(f"{what}: {reason}")

    try:
        return _retried(lambda: _attempt(tries.left(), call), policy, tries, fail, setting, passing)
    except _Overdue:
        raise error(f"{what}: {tries.report(setter=own_policy)}") from None


def _retried(
    call: Callable[[], T],
    policy: FetchPolicy,
    tries: _Tries,
    fail: Callable[[str], ChunkFetchError],
    setting: str = "",
    passing: tuple[type[Exception], ...] = (),
) -> T:
    """``call()``, tried again after a transient failure (`_transient`) ``policy.backoff``
    seconds later, doubling up to ``max_backoff``, at most ``policy.attempts`` tries and none
    that would end past ``tries``' deadline; ``fail(why)`` is raised when it cannot be had
    (``setting``: where to set how often). Refzarr's own errors, `_Overdue` and ``passing``
    pass through. ``tries`` records what was tried (a watchdog may read it meanwhile)."""
    through: tuple[type[Exception], ...] = (RefzarrError, _Overdue, *passing)
    delay = policy.backoff
    for attempt in range(1, policy.attempts + 1):
        tries.count = attempt
        try:
            return call()
        except Exception as exc:  # 5xx, resets, an unreachable host: named, not foreign
            failure = _answered(exc)
            if isinstance(failure, through):
                raise
            tries.last = described_failure(failure)
            if not _transient(failure):
                raise fail(f"{tries.last} (not retried)") from exc
            late = tries.left() < delay
            if attempt == policy.attempts or late:
                how = f"; set how often with {setting}" if setting else ""
                done = f"after {attempt} attempt(s){tries.past(late)}{how}"
                raise fail(f"{tries.last} ({done})") from exc
            time.sleep(delay)
            delay = min(2 * delay, policy.max_backoff)
    raise AssertionError("unreachable")  # pragma: no cover


def _answered(exc: Exception) -> BaseException:
    """The failure to judge: fsspec's HTTP ``info`` (so ``size``) raises FileNotFoundError
    for any failed answer, chained from it; a transient answer (a 503) is judged as itself."""
    cause = exc.__cause__
    answered = isinstance(getattr(cause, "status", None), int)
    if isinstance(exc, FileNotFoundError) and cause is not None and answered and _transient(cause):
        return cause
    return exc


class _Overdue(Exception):
    """An attempt that did not return before the deadline (left running in its thread)."""


def _attempt(seconds: float, call: Callable[[], T]) -> T:
    """``call()``, or `_Overdue` when it has not returned after ``seconds`` (it is left to
    finish in its own thread); its own exceptions, TimeoutError included, pass through."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="refzarr-fetch")
    try:
        future = pool.submit(call)
        try:
            return future.result(timeout=max(seconds, 0.0))
        except TimeoutError:
            if future.done():
                raise  # the call's own timeout: an attempt that failed
            raise _Overdue from None
    finally:
        pool.shutdown(wait=False)


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
