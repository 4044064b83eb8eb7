"""Where the batches of `scan_many` run: in-process, a thread or process pool, any
`concurrent.futures.Executor`, or a `dask.distributed.Client`, behind one small interface."""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import as_completed as cf_as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from refzarr.parallel.batches import Outcome

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

__all__ = ["SERIAL_BELOW", "Runner", "cpu_count", "open_runner", "process_pool"]

SERIAL_BELOW = 32
"""With the default executor, fewer files than this are scanned in-process: starting worker
processes (about half a second each to import h5py and refzarr) costs more than they save."""

Batch = Callable[[Sequence[str]], list[Outcome]]
Batches = Generator[tuple[int, list[Outcome]], None, None]
"""What `Runner.run` yields (a generator: closing it cancels the work not yet done)."""


class Runner(Protocol):
    """Runs batch tasks; `run` yields ``(batch index, outcomes)`` as batches complete.

    Closing the iterator early (an error, ``KeyboardInterrupt``) cancels the work not yet done.
    """

    workers: int

    def run(self, fn: Batch, batches: Sequence[list[str]]) -> Batches:
        """Every batch's outcomes, in completion order."""
        ...


def cpu_count() -> int:
    """The CPUs this process may use (its affinity mask where the OS has one)."""
    counter = getattr(os, "process_cpu_count", None)  # Python 3.13
    if counter is not None:
        return int(counter() or 1)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


@dataclass
class SerialRunner:
    """Every batch in this process, in order."""

    workers: int = 1

    def run(self, fn: Batch, batches: Sequence[list[str]]) -> Batches:
        for index, batch in enumerate(batches):
            yield index, fn(batch)


@dataclass
class FuturesRunner:
    """Batches submitted to a `concurrent.futures.Executor`."""

    executor: Executor
    workers: int

    def run(self, fn: Batch, batches: Sequence[list[str]]) -> Batches:
        with warnings.catch_warnings():  # a fork beside fsspec's threads (`_start_method`)
            warnings.filterwarnings("ignore", _FORK_WARNING, DeprecationWarning)
            futures: dict[Future[list[Outcome]], int] = {
                self.executor.submit(fn, batch): index for index, batch in enumerate(batches)
            }
        try:
            for future in cf_as_completed(futures):
                # dropped once handed over: a future holds its batch's groups, which the
                # caller may have combined and let go of by the time the next one comes
                yield futures.pop(future), future.result()
        finally:
            for future in futures:
                future.cancel()


@dataclass
class DaskRunner:
    """Batches as tasks of a dask.distributed cluster (results fetched as they complete)."""

    client: Any
    workers: int

    def run(self, fn: Batch, batches: Sequence[list[str]]) -> Batches:
        from distributed import as_completed

        futures = self.client.map(fn, batches, pure=False)
        index = {future.key: i for i, future in enumerate(futures)}
        try:
            for future, outcomes in as_completed(futures, with_results=True):  # type: ignore[no-untyped-call]
                yield index[future.key], outcomes
        finally:
            self.client.cancel(futures)


def is_dask_client(executor: object) -> bool:
    """Whether ``executor`` is a ``distributed.Client`` (without importing distributed)."""
    if "distributed" not in sys.modules:
        return False
    from distributed import Client

    return isinstance(executor, Client)


@contextmanager
def open_runner(executor: Any, count: int) -> Iterator[Runner]:
    """The runner for `scan_many`'s ``executor`` argument; pools it creates are shut down on
    exit (pending work cancelled)."""
    if executor is None:
        executor = "serial" if cpu_count() == 1 or count < SERIAL_BELOW else "processes"
    if executor == "serial":
        yield SerialRunner()
    elif executor in ("threads", "processes"):
        workers = max(1, min(cpu_count(), count))
        pool = _pool(executor, workers)
        try:
            yield FuturesRunner(pool, workers)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    elif is_dask_client(executor):
        yield DaskRunner(executor, max(1, sum(executor.nthreads().values())))
    elif isinstance(executor, Executor):
        yield FuturesRunner(executor, int(getattr(executor, "_max_workers", 0) or cpu_count()))
    else:
        raise TypeError(
            "executor must be None, 'serial', 'threads', 'processes', a "
            f"concurrent.futures.Executor or a dask.distributed.Client, not {executor!r}"
        )


def _pool(kind: str, workers: int) -> Executor:
    if kind == "threads":
        return ThreadPoolExecutor(workers, thread_name_prefix="refzarr-scan")
    return process_pool(workers)


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool for scanning: ``workers`` processes, forked when that is safe."""
    import multiprocessing  # with the process pool: `import refzarr` stays light
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(_start_method()))


def _start_method() -> str:
    """``fork`` while this process runs no thread but fsspec's: workers start at once, with
    refzarr and h5py already imported, and the caller's ``__main__`` is not imported again (a
    script without an ``if __name__ == "__main__"`` guard works). With other threads running,
    a forked child could inherit a lock held by one of them and hang: ``forkserver`` then.

    fsspec's event loop thread (started by any s3fs / gcsfs / http call, e.g. the listing of
    the files to scan) and its loop's idle executor threads do not count: fsspec drops its
    loop in a forked child and makes a new one (``os.register_at_fork``)."""
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and _only_fork_safe_threads():
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


_FORK_WARNING = r"This process \(pid=\d+\) is multi-threaded, use of fork\(\)"
"""Python 3.12's warning on a fork beside other threads, expected when they are fsspec's."""


def _only_fork_safe_threads() -> bool:
    """Whether every thread but this one is fsspec's loop thread or one of that loop's
    default executor's workers (blocked on their queue while the loop is idle)."""
    others = set(threading.enumerate()) - {threading.current_thread()}
    if not others:
        return True
    asyn = sys.modules.get("fsspec.asyn")
    if asyn is None:
        return False
    # fsspec's module state (one-item lists); read defensively, as it is not public API
    safe = {(getattr(asyn, "iothread", None) or [None])[0]}
    loop = (getattr(asyn, "loop", None) or [None])[0]
    executor = getattr(loop, "_default_executor", None) if loop is not None else None
    safe.update(getattr(executor, "_threads", ()))
    return others <= safe
