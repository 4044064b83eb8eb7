"""How reads are merged, run concurrently, retried and timed: `FetchPolicy`, the defaults for
local files and for everything else, and the process-wide deadline of remote reads."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DEFAULT_DEADLINE",
    "LOCAL_POLICY",
    "REMOTE_POLICY",
    "FetchPolicy",
    "set_read_deadline",
]

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
