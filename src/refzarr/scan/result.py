"""What a scan returns: the `RefGroup`, plus the list of what was skipped and why."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from refzarr.errors import UnsupportedFeatureError
from refzarr.model import RefGroup
from refzarr.model.pickling import tuple_state

__all__ = ["ScannedGroup", "Skipped", "build_or_skip", "reporting_members", "reports_members"]

T = TypeVar("T")

_ON_MEMBER: ContextVar[Callable[[str], None] | None] = ContextVar(
    "refzarr_scan_on_member", default=None
)
"""Called with each array or group a scanner has built or skipped (a progress bar's count)."""


@contextmanager
def reporting_members(callback: Callable[[str], None]) -> Iterator[None]:
    """Within the block, scanners in this thread (or task) call ``callback(path)`` after each
    array or group they build or skip: the progress of a long single-file scan."""
    token = _ON_MEMBER.set(callback)
    try:
        yield
    finally:
        _ON_MEMBER.reset(token)


@tuple_state
@dataclass(frozen=True, slots=True)
class Skipped:
    """Something a scan with ``on_unsupported="skip"`` left out.

    Parameters
    ----------
    path
        Path of the dataset, group or link in the file (``/grp/var``); an attribute is named
        ``/grp/var@name``.
    reason
        The message the `UnsupportedFeatureError` would have carried.
    """

    path: str
    reason: str


@tuple_state
@dataclass(frozen=True, slots=True, eq=False, repr=False)  # RefGroup's short repr
class ScannedGroup(RefGroup):
    """A scanned file's root group, with ``skipped``: what was left out, in scan order.

    Equal to any `RefGroup` with the same attributes and members (``skipped`` is a report on
    the scan, not part of the reference set).
    """

    skipped: tuple[Skipped, ...] = ()

    def __repr__(self) -> str:
        text = RefGroup.__repr__(self)
        if not self.skipped:
            return text
        return f"{text}\n  skipped ({len(self.skipped)}): {self.skipped[0].path}, ... (.skipped)"


def reports_members() -> bool:
    """Whether scanners in this thread (or task) report each member (`reporting_members`)."""
    return _ON_MEMBER.get() is not None


def build_or_skip(
    build: Callable[[], T], path: str, on_unsupported: str, skipped: list[Skipped]
) -> T | None:
    """``build()``; when it raises `UnsupportedFeatureError` and ``on_unsupported`` is
    ``"skip"``, None after appending ``Skipped(path, message)`` to ``skipped`` (with
    ``"raise"`` the error propagates)."""
    try:
        return build()
    except UnsupportedFeatureError as exc:
        if on_unsupported == "raise":
            raise
        skipped.append(Skipped(path, str(exc)))
        return None
    finally:
        report = _ON_MEMBER.get()
        if report is not None:
            report(path)
