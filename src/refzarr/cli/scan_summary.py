"""The summary line of ``refzarr scan``: how many files, combined along which dimensions (or
appended, with the dimension's length before and after), how many were built from ``.idx``
sidecars and how many were skipped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from refzarr.cli.table import plural
from refzarr.formats.written import WriteResult, dimension_lengths
from refzarr.model import RefGroup
from refzarr.parallel import ScanFailure, ScanResults

__all__ = ["Appended", "appended_lengths", "summary"]


class Scanned(Protocol):
    """What the summary counts: the files scanned (``len``), those skipped, those built
    from an index; `ScanResults`, or the CLI's record of files combined as they came (which
    counts its sets of variables as they came: ``variable_sets``)."""

    @property
    def errors(self) -> tuple[ScanFailure, ...]:
        """The files skipped."""
        ...

    @property
    def indexed(self) -> tuple[str, ...]:
        """The files built from an index."""
        ...

    def __len__(self) -> int:
        """The files scanned."""
        ...


@dataclass(frozen=True, slots=True)
class Appended:
    """An append along ``dim``: its length in the set before and after (None: unknown)."""

    dim: str
    before: int | None = None
    after: int | None = None


def summary(
    output: str,
    results: Scanned,
    concat_dims: Sequence[str],
    *,
    appended: Appended | None = None,
    from_sidecars: bool = False,
) -> str:
    """One line: ``out.parq: 3 files appended along time (length 4 -> 7), 2 from .idx
    sidecars, 1 scanned whole, 1 skipped``.

    Parameters
    ----------
    output
        Where the set was written.
    results
        The scans.
    concat_dims
        The dimensions the files were combined along (the append dimension among them).
    appended
        The append, when ``--append-dim`` was given.
    from_sidecars
        Say how many files were built from ``.idx`` sidecars (``--grib-index``).
    """
    parts = [f"{output}: {plural(len(results), 'file')}{_how(results, concat_dims, appended)}"]
    sets = _variable_sets(results) if concat_dims else 1
    if sets > 1:
        parts.append(f"{sets:,} sets of variables merged")
    if from_sidecars:
        indexed = len(results.indexed)
        parts.append(f"{indexed:,} from .idx sidecars, {len(results) - indexed:,} scanned whole")
    if results.errors:
        parts.append(f"{len(results.errors):,} skipped")
    return ", ".join(parts)


def _how(results: Scanned, concat_dims: Sequence[str], appended: Appended | None) -> str:
    """`` along time``, `` merged`` (several files, no dimension), `` appended along time
    (length 4 -> 7)``, `` along time (new set)`` (an append to nothing)."""
    if appended is None:
        if concat_dims:
            return f" along {', '.join(concat_dims)}"
        return " merged" if len(results) > 1 else ""
    if appended.before == 0:  # nothing was there to append to
        return f" along {', '.join(concat_dims)} (new set)"
    others = [dim for dim in concat_dims if dim != appended.dim]
    along = f" along {', '.join(others)}," if others else ""
    how = f"{along} appended along {appended.dim}"
    if appended.before is None or appended.after is None:
        return how
    return f"{how} (length {appended.before:,} -> {appended.after:,})"


def _variable_sets(results: Scanned) -> int:
    """How many sets of files holding different variables were merged side by side."""
    if len(results) < 2:
        return 1
    counted = getattr(results, "variable_sets", None)
    if isinstance(counted, int):
        return counted
    assert isinstance(results, ScanResults)
    from refzarr.combine.sets import variable_sets

    return variable_sets(results)


def appended_lengths(written: RefGroup, result: WriteResult) -> Appended:
    """The append of ``written`` that made ``result`` (a write with ``append_dim``): the
    dimension's length in the set after it, as the write reports it (nothing is read back),
    and before it, less ``written``'s own length along it (1 when ``written`` has none: one
    file stacked along it); 0 before when there was no set yet, both unknown when no array
    has the dimension."""
    dim = result.append_dim or ""
    after = result.dims.get(dim)
    if after is None:
        return Appended(dim)
    if not result.appended:
        return Appended(dim, 0, after)
    added = dimension_lengths(written).get(dim, 1)
    return Appended(dim, after - added, after)
