"""The threads a read hands its blocks to: local reads share the process's pool (made anew
in a forked child), remote reads get one of their own, left behind if a request is stuck."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["Workers"]

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


class Workers:
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

    def __enter__(self) -> Workers:
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
