"""What `scan_many` returns: the scanned groups in input order, and the files that failed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, overload

from refzarr.model import RefGroup

__all__ = ["ScanFailure", "ScanResults"]


class ScanFailure(NamedTuple):
    """A file that could not be scanned (``on_error="skip"``).

    Parameters
    ----------
    url
        The file, as it was given.
    message
        The error, as ``"ExceptionType: message"``.
    """

    url: str
    message: str


@dataclass(frozen=True, slots=True)
class ScanResults(Sequence[RefGroup]):
    """The groups of the files scanned, in input order, with the failures left out.

    A sequence of `RefGroup` (``combine(scan_many(urls), ...)`` works as is); ``urls[i]`` is the
    file ``self[i]`` came from, ``errors`` lists the files skipped and why, and ``indexed``
    the files built from an index instead of being scanned whole. Picklable.

    Parameters
    ----------
    groups
        One group per file scanned, in input order.
    urls
        The file of each group.
    errors
        The files that failed (only with ``on_error="skip"``), in input order.
    indexed
        The files (among ``urls``) built from an index without reading their data: GRIB
        files from their ``.idx`` sidecars (``grib_index="auto"``), in input order.
    """

    groups: tuple[RefGroup, ...]
    urls: tuple[str, ...]
    errors: tuple[ScanFailure, ...] = ()
    indexed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.groups) != len(self.urls):
            raise ValueError(f"{len(self.groups)} groups but {len(self.urls)} urls")

    @overload
    def __getitem__(self, index: int) -> RefGroup: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[RefGroup]: ...

    def __getitem__(self, index: int | slice) -> RefGroup | Sequence[RefGroup]:
        return self.groups[index]

    def __len__(self) -> int:
        return len(self.groups)

    def __iter__(self) -> Iterator[RefGroup]:
        return iter(self.groups)

    def __repr__(self) -> str:
        return f"ScanResults({len(self.groups)} groups, {len(self.errors)} errors)"
