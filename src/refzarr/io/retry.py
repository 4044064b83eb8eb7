"""Trying a request again: after transient failures, with exponential backoff, a bounded
number of attempts, all within a deadline (`retried`); a remote call each try in a thread of
its own (`call_retried`); requests for a remote reference set's own files retried as
`set_reference_retries` says (`call_within_deadline`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TypeVar

from refzarr.errors import ChunkFetchError, ReferenceFetchError, RefzarrError
from refzarr.io.failures import answered, described_failure, transient
from refzarr.io.policy import REMOTE_POLICY, FetchPolicy

__all__ = [
    "Overdue",
    "Tries",
    "call_retried",
    "call_within_deadline",
    "retried",
    "set_reference_retries",
]

T = TypeVar("T")


@dataclass(slots=True)
class Tries:
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
    return call_retried(call, what, policy, ReferenceFetchError, own_policy=False, passing=passing)


def call_retried(
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
    tries = Tries(policy.seconds())
    setting = "FetchPolicy(attempts=...)" if own_policy else "refzarr.io.set_reference_retries"

    def fail(reason: str) -> ChunkFetchError:
        return error(f"{what}: {reason}")

    try:
        return retried(lambda: _attempt(tries.left(), call), policy, tries, fail, setting, passing)
    except Overdue:
        raise error(f"{what}: {tries.report(setter=own_policy)}") from None


def retried(
    call: Callable[[], T],
    policy: FetchPolicy,
    tries: Tries,
    fail: Callable[[str], ChunkFetchError],
    setting: str = "",
    passing: tuple[type[Exception], ...] = (),
) -> T:
    """``call()``, tried again after a transient failure (`transient`) ``policy.backoff``
    seconds later, doubling up to ``max_backoff``, at most ``policy.attempts`` tries and none
    that would end past ``tries``' deadline; ``fail(why)`` is raised when it cannot be had
    (``setting``: where to set how often). Refzarr's own errors, `Overdue` and ``passing``
    pass through. ``tries`` records what was tried (a watchdog may read it meanwhile)."""
    through: tuple[type[Exception], ...] = (RefzarrError, Overdue, *passing)
    delay = policy.backoff
    for attempt in range(1, policy.attempts + 1):
        tries.count = attempt
        try:
            return call()
        except Exception as exc:  # 5xx, resets, an unreachable host: named, not foreign
            failure = answered(exc)
            if isinstance(failure, through):
                raise
            tries.last = described_failure(failure)
            if not transient(failure):
                raise fail(f"{tries.last} (not retried)") from exc
            late = tries.left() < delay
            if attempt == policy.attempts or late:
                how = f"; set how often with {setting}" if setting else ""
                done = f"after {attempt} attempt(s){tries.past(late)}{how}"
                raise fail(f"{tries.last} ({done})") from exc
            time.sleep(delay)
            delay = min(2 * delay, policy.max_backoff)
    raise AssertionError("unreachable")  # pragma: no cover


class Overdue(Exception):
    """An attempt that did not return before the deadline (left running in its thread)."""


def _attempt(seconds: float, call: Callable[[], T]) -> T:
    """``call()``, or `Overdue` when it has not returned after ``seconds`` (it is left to
    finish in its own thread); its own exceptions, TimeoutError included, pass through."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="refzarr-fetch")
    try:
        future = pool.submit(call)
        try:
            return future.result(timeout=max(seconds, 0.0))
        except TimeoutError:
            if future.done():
                raise  # the call's own timeout: an attempt that failed
            raise Overdue from None
    finally:
        pool.shutdown(wait=False)
