"""The progress bar of `scan_many`: tqdm on a terminal (or when asked), nothing otherwise."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

__all__ = ["Progress", "progress_bar"]


class Progress(Protocol):
    """What `scan_many` calls on a progress bar."""

    def update(self, n: float | None = 1) -> bool | None:
        """Count ``n`` more files done."""
        ...


class _Silent:
    def update(self, n: float | None = 1) -> bool | None:
        return None


@contextmanager
def progress_bar(enabled: bool | None, total: int, description: str) -> Iterator[Progress]:
    """A tqdm bar of ``total`` files on stderr when ``enabled`` (None: when stderr is a
    terminal), else a bar that shows nothing."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield _Silent()
        return
    from tqdm import tqdm  # type: ignore[import-untyped]  # no stubs installed

    with tqdm(total=total, desc=description, unit="file", file=sys.stderr) as bar:
        yield bar
