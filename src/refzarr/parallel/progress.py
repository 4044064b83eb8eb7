"""The progress bar of `scan_many`: tqdm on a terminal (or when asked), nothing otherwise.

Many files: a bar of files. One file (``refzarr scan big.h5``): a count of the arrays and
groups scanned so far, so that a long scan of one file shows it is moving."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from refzarr.scan.result import reporting_members

__all__ = ["Progress", "progress_bar", "scan_progress"]


class Progress(Protocol):
    """What `scan_many` calls on a progress bar."""

    def update(self, n: float | None = 1) -> bool | None:
        """Count ``n`` more files done."""
        ...


class _Silent:
    def update(self, n: float | None = 1) -> bool | None:
        return None


@contextmanager
def progress_bar(
    enabled: bool | None, total: int, description: str, unit: str = "file"
) -> Iterator[Progress]:
    """A tqdm bar of ``total`` files (or other ``unit``) on stderr when ``enabled`` (None:
    when stderr is a terminal), else a bar that shows nothing."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield _Silent()
        return
    from tqdm import tqdm  # type: ignore[import-untyped]  # no stubs installed

    with tqdm(total=total, desc=description, unit=unit, file=sys.stderr) as bar:
        yield bar


@contextmanager
def scan_progress(enabled: bool | None, names: list[str]) -> Iterator[Progress]:
    """`progress_bar` of the files; for one file, a count of its arrays and groups as the
    scanner builds them (when it runs in this thread), the files' bar showing nothing."""
    if len(names) != 1:
        with progress_bar(enabled, len(names), "scanning") as bar:
            yield bar
        return
    if not (sys.stderr.isatty() if enabled is None else enabled):
        yield _Silent()
        return
    from tqdm import tqdm

    label = f"scanning {names[0].rstrip('/').rpartition('/')[2]}"
    with (
        tqdm(desc=label, unit=" arrays", file=sys.stderr) as bar,
        reporting_members(lambda _path: bar.update(1)),
    ):
        yield _Silent()
