"""Running a call in a thread with a hard time bound: a hang fails the test instead of holding
the suite (the hostile-input tests' shared kit)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["finish_within", "raised_within"]


def finish_within(seconds: float, call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """``(result, None)`` or ``(None, the exception)`` of ``call``; fails the test when it has
    not returned after ``seconds`` (the thread is a daemon: it cannot hold the process)."""
    outcome: list[tuple[Any, BaseException | None]] = []

    def run() -> None:
        try:
            outcome.append((call(), None))
        except BaseException as exc:
            outcome.append((None, exc))

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    return outcome[0]


def raised_within(seconds: float, call: Callable[[], Any]) -> BaseException | None:
    """The exception ``call`` raised (None when it returned), within ``seconds``."""
    return finish_within(seconds, call)[1]
