"""One writer at a time per local target: a lock held from reading a set to replacing it.

An append (or a refresh) reads the set at its target, builds the new one beside it and
exchanges the two. Two such writers at once would both read the old set and the later
exchange would drop the other's data. So every local write holds the target's lock: an
append from before it reads the set until its exchange is done, a whole write around its
exchange only (it reads nothing). The second appender waits, then reads the first one's
result and appends onto it.

The lock is an ``flock`` on the target itself (the JSON file or the Parquet directory; its
inode changes with each replacement, so a lock taken on an inode the target no longer is
is dropped and taken again on the new one) or, while nothing stands at the target, on its
parent directory (so that two writers creating a set, or a writer moving an old set aside
for a moment, are serialised too; a writer that finds the target gone takes the parent's
lock and waits). The lock is re-entrant within a thread: a write inside a held lock uses
the held descriptor and never locks the same target twice (two descriptors of one file
exclude each other even within a process). Other threads and processes wait, at most
`DEFAULT_LOCK_TIMEOUT` seconds unless the caller says otherwise (`lock_timeout`): then
`ConcurrentWriteError` names the target and, when the system tells it, the process holding
the lock.

Nothing is locked on object stores or in memory (fsspec offers no lock there): see
`refzarr.formats.atomic` for the check that refuses an exchange over a set that changed.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Callable, Iterator

from refzarr.errors import ConcurrentWriteError
from refzarr.formats.source import Location
from refzarr.io.paths import opened_path

__all__ = ["DEFAULT_LOCK_TIMEOUT", "Held", "hold_parent", "lock_timeout", "target_lock"]

DEFAULT_LOCK_TIMEOUT = 3600.0
"""Seconds a writer waits by default for another writer of its target (an append of a large
set takes seconds to minutes: an hour means a writer that hangs, or a stopped process)."""

_TIMEOUT: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "refzarr_lock_timeout", default=DEFAULT_LOCK_TIMEOUT
)
"""The wait of the writes in progress in this context (None: no limit)."""

_POLL = (0.005, 0.25)
"""First and longest pause between two tries of a lock another writer holds (seconds)."""


@contextlib.contextmanager
def lock_timeout(seconds: float | None) -> Iterator[None]:
    """Writers of local targets in the body wait at most ``seconds`` (None: as long as it
    takes) for another writer of their target, then raise `ConcurrentWriteError`."""
    if seconds is not None and not (isinstance(seconds, int | float) and seconds >= 0):
        raise ValueError(f"lock_timeout must be None or seconds >= 0, got {seconds!r}")
    token = _TIMEOUT.set(None if seconds is None else float(seconds))
    try:
        yield
    finally:
        _TIMEOUT.reset(token)


class Held:
    """A lock held on a local target: on the target's inode or (nothing there) its parent."""

    __slots__ = ("handle", "on_parent", "parent_handle")

    def __init__(self, handle: int, on_parent: bool) -> None:
        self.handle = handle
        self.on_parent = on_parent
        self.parent_handle: int | None = handle if on_parent else None


_HELD = threading.local()


def _held_here() -> dict[str, Held]:
    held: dict[str, Held] | None = getattr(_HELD, "locks", None)
    if held is None:
        held = _HELD.locks = {}
    return held


@contextlib.contextmanager
def target_lock(
    location: Location, *, restore: Callable[[str], object] | None = None
) -> Iterator[Held | None]:
    """Hold the lock of local ``location`` for the body (None elsewhere: nothing locked).

    ``restore(path)`` is called with the parent's lock held when nothing stands at the
    target (a directory writer puts back a set a dead writer moved aside there).
    """
    if not location.is_local or os.name != "posix":
        yield None
        return
    path = opened_path(location.path)  # the file the system opens (``link/..`` followed)
    held = _held_here()
    if path in held:  # this thread holds it already: one descriptor per target
        yield held[path]
        return
    lock = _acquire(path, restore)
    held[path] = lock
    try:
        yield lock
    finally:
        del held[path]
        os.close(lock.handle)


@contextlib.contextmanager
def hold_parent(lock: Held, path: str) -> Iterator[None]:
    """Hold the lock of ``path``'s parent too (for a moment when nothing stands at ``path``)."""
    if lock.parent_handle is not None:
        yield
        return
    handle = _locked(os.path.dirname(path), _deadline(), path)
    lock.parent_handle = handle
    try:
        yield
    finally:
        lock.parent_handle = None
        os.close(handle)


def _acquire(path: str, restore: Callable[[str], object] | None) -> Held:
    """Wait for the lock of ``path``'s current inode (or of its parent while it is absent)."""
    deadline = _deadline()
    while True:
        try:
            handle = _locked(path, deadline, path)
        except FileNotFoundError:
            parent = _locked(os.path.dirname(path), deadline, path)
            if restore is not None:
                restore(path)
            if not os.path.lexists(path):
                return Held(parent, on_parent=True)
            os.close(parent)  # a set appeared meanwhile: lock it instead
            continue
        if _same_file(handle, path):
            return Held(handle, on_parent=False)
        os.close(handle)  # replaced while waiting: lock what stands there now


def _deadline() -> float | None:
    """When the writer stops waiting (`time.monotonic`; None: never)."""
    seconds = _TIMEOUT.get()
    return None if seconds is None else time.monotonic() + seconds


def _locked(path: str, deadline: float | None, target: str) -> int:
    """A descriptor of ``path`` holding its lock, waited for until ``deadline`` (the lock of
    ``target``, or of its folder while nothing stands there)."""
    import fcntl

    from refzarr.formats.atomic import step  # (atomic imports this module)

    handle = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            step("waiting for the lock")  # another writer holds it (tests see the wait)
            _wait(handle, deadline, target)
    except BaseException:
        os.close(handle)
        raise
    return handle


def _wait(handle: int, deadline: float | None, target: str) -> None:
    """Take the lock of ``handle`` another writer holds, by ``deadline`` (else
    `ConcurrentWriteError`)."""
    import fcntl

    if deadline is None:
        fcntl.flock(handle, fcntl.LOCK_EX)
        return
    pause = _POLL[0]
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _timed_out(handle, target)
        time.sleep(min(pause, left))
        pause = min(2 * pause, _POLL[1])
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            continue


def _timed_out(handle: int, target: str) -> ConcurrentWriteError:
    seconds = _TIMEOUT.get()
    holder = _holder(handle)
    by = f" (held by process {holder})" if holder else ""
    return ConcurrentWriteError(
        f"{target}: another writer of this reference set still holds its lock{by} after "
        f"{seconds:g} s; nothing was written. Run this again when it is done, or give a "
        "longer lock_timeout (the CLI's --lock-timeout); a stopped writer releases the lock "
        "when its process ends"
    )


def _holder(handle: int) -> str:
    """The process holding an ``flock`` on the file of ``handle`` ("" when the system does
    not say: /proc/locks is Linux's)."""
    stat = os.fstat(handle)
    inode = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as table:
            lines = table.read().splitlines()
    except OSError:
        return ""
    for line in lines:
        fields = line.split()
        if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == inode:
            pid = fields[4]
            return f"{pid}, this process" if pid == str(os.getpid()) else pid
    return ""


def _same_file(handle: int, path: str) -> bool:
    try:
        return os.path.samestat(os.fstat(handle), os.stat(path))
    except FileNotFoundError:
        return False
