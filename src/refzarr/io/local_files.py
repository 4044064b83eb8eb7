"""Local files read with ``os.pread`` through descriptors shared by one read's threads, at
most `MAX_OPEN_FILES` idle ones kept open."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

__all__ = ["MAX_OPEN_FILES", "SMALL_LOCAL_BLOCK", "LocalFiles"]

SMALL_LOCAL_BLOCK = 64 * 2**10
"""Local blocks up to this size are read in the calling thread: a pread from the page cache
takes microseconds, a hand-off to the pool tens (thousands of small files' coordinates)."""

MAX_OPEN_FILES = 128
"""Idle local file descriptors one read keeps open at most, besides the files being read (a
read across 10,000 files must not exhaust the process's limit, often 1,024): the least
recently used idle one is closed."""


class LocalFiles:
    """Descriptors of local files for the duration of one read, shared by the threads.

    At most ``max_open`` stay open: when more are needed, the least recently used ones that
    no thread is reading from are closed (they are opened again if asked for again).
    """

    def __init__(self, max_open: int = MAX_OPEN_FILES) -> None:
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._busy: dict[str, int] = {}
        self._max_open = max_open
        self._lock = threading.Lock()

    def __enter__(self) -> LocalFiles:
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
