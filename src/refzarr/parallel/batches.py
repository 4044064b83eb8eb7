"""The worker side of `scan_many`: scanning a batch of files in one task, failures as values.

One task per batch, not per file: for small files the cost of a task (pickling, scheduling,
a round trip) is about what scanning the file costs.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from refzarr.errors import ScanError
from refzarr.gcpause import gc_paused
from refzarr.model import RefGroup

__all__ = ["BatchScanner", "Failed", "OnError", "Outcome", "check_options", "split"]

OnError = Literal["raise", "skip"]

MAX_BATCH = 64
"""Files per task at most: a progress bar that moves, a failure that stops work soon."""

TASKS_PER_WORKER = 4
"""Tasks per worker at least (when there are enough files): evens out uneven files."""


@dataclass(frozen=True, slots=True)
class Failed:
    """A file whose scan raised: its URL, the message, the exception (when it pickles)."""

    url: str
    message: str
    error: BaseException | None

    def exception(self) -> BaseException:
        """The error to raise in the caller: the original when it names the file, else a
        `ScanError` that does (chained to the original)."""
        if self.error is not None and self.url in str(self.error):
            return self.error
        wrapped = ScanError(f"{self.url}: {self.message}")
        wrapped.__cause__ = self.error
        return wrapped


Outcome = RefGroup | Failed


@dataclass(frozen=True, slots=True)
class BatchScanner:
    """Scans the files of a batch in turn (a picklable callable: one task of `scan_many`).

    Parameters
    ----------
    options
        Keyword arguments of `refzarr.scan` (``storage_options``, scanner options).
    on_error
        ``"raise"``: stop the batch at the first failure; ``"skip"``: go on.
    """

    options: Mapping[str, Any]
    on_error: OnError = "raise"

    def __call__(self, urls: Sequence[str]) -> list[Outcome]:
        from refzarr.io.failures import described_failure
        from refzarr.scan import scan

        out: list[Outcome] = Outcomes()
        for url in urls:
            try:
                out.append(scan(url, **self.options))
            except Exception as exc:  # every failure is reported with its file name
                out.append(Failed(url, described_failure(exc), _picklable(exc)))
                if self.on_error == "raise":
                    break
        return out


class Outcomes(list[Outcome]):
    """A batch's outcomes, which a worker process sends back pickled within
    `refzarr.model.manifest.trusted_pickling`: the parent unpickles the groups' manifests
    without checking them again (they were checked, or valid by construction, when the
    worker built them; unpickling them was half the parent's work per small file)."""

    def __reduce__(self) -> tuple[Any, ...]:
        from refzarr.model.manifest import trusted_pickling

        with trusted_pickling():
            payload = pickle.dumps(list(self), protocol=pickle.HIGHEST_PROTOCOL)
        return (_unpickled_outcomes, (payload,))


def _unpickled_outcomes(payload: bytes) -> list[Outcome]:
    """The outcomes of `Outcomes.__reduce__`, unpickled with the cyclic garbage collector
    paused: unpickling makes thousands of objects (none of them garbage) that would set off
    collections of every object the caller holds, its results so far; that cost three
    times the unpickling itself in a `scan_many` of small files."""
    with gc_paused():
        outcomes: list[Outcome] = pickle.loads(payload)
    return outcomes


def _picklable(exc: BaseException) -> BaseException | None:
    """``exc`` when it survives a pickle round trip (to come back from a worker), else None."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # an exception with a custom constructor or unpicklable state
        return None
    exc.__traceback__ = None
    return exc


def check_options(options: Mapping[str, Any]) -> None:
    """Fail at once on scan options no scanner knows or accepts (not once per file, in the
    workers).

    Raises
    ------
    TypeError, ValueError
        As `refzarr.scan` would for every file.
    """
    from refzarr.errors import MissingDependencyError
    from refzarr.scan.base import (
        ScanOptions,
        all_option_names,
        format_named,
        registered_formats,
        scanner_for,
    )

    scanner_options = {k: v for k, v in options.items() if k != "format"}
    name = options.get("format")
    if name is not None:  # the scanner itself checks every value
        scanner_for(format_named(name), scanner_options)
        return
    unknown = sorted(set(scanner_options) - all_option_names())
    if unknown:
        raise TypeError(
            f"unknown scan options {unknown}; the options are {sorted(all_option_names())}"
        )
    shared = ScanOptions.__dataclass_fields__
    ScanOptions(**{k: v for k, v in scanner_options.items() if k in shared})
    for scan_format in registered_formats():  # formats whose own options were given
        if set(scanner_options) & set(scan_format.options):
            own = scan_format.option_names()
            try:
                scanner_for(scan_format, {k: v for k, v in scanner_options.items() if k in own})
            except MissingDependencyError:
                continue  # said per file, if a file of that format comes


def batch_size(count: int, workers: int) -> int:
    """Files per task: about ``TASKS_PER_WORKER`` tasks per worker, at most ``MAX_BATCH``."""
    return max(1, min(MAX_BATCH, math.ceil(count / (workers * TASKS_PER_WORKER))))


def split(urls: Sequence[str], size: int) -> list[list[str]]:
    """``urls`` cut into consecutive batches of ``size`` (the last one maybe shorter)."""
    return [list(urls[start : start + size]) for start in range(0, len(urls), size)]
