"""The summary line of ``refzarr scan``: how many files, combined along which dimensions (or
appended, with the dimension's length before and after), how many were built from ``.idx``
sidecars and how many were skipped."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from refzarr.cli.table import plural
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


def appended_lengths(
    written: RefGroup,
    dim: str,
    output: str,
    chosen: str,
    storage_options: Mapping[str, Any] | None,
) -> Appended:
    """The append of ``written`` to the set now at ``output`` (format ``chosen``) along
    ``dim``, from the length along ``dim`` of one of its arrays (``dim``'s coordinate, the
    shallowest, where there is one); the lengths unknown when no array has ``dim`` or the
    set cannot be read back (it was written: the summary does not fail the command)."""
    from refzarr.errors import RefzarrError

    ours = _along(_ref_arrays(written), dim)
    try:
        found = _length_now(output, chosen, dim, ours, storage_options)
    except (RefzarrError, OSError, ValueError):
        found = None
    if found is None:
        return Appended(dim)
    path, _, after = found
    names, shape = dict(_ref_arrays(written)).get(path, ((), ()))
    # a file without the dimension (one, not combined) is stacked along it: one step
    added = shape[names.index(dim)] if dim in names else 1
    return Appended(dim, after - added, after)


def _length_now(
    output: str,
    chosen: str,
    dim: str,
    ours: tuple[str, int, int] | None,
    storage_options: Mapping[str, Any] | None,
) -> tuple[str, int, int] | None:
    """`_along` of the set at ``output``; of a JSON set from the ``.zarray`` entry of the
    written array ``ours`` alone when it is there as refzarr writes it (reading every
    reference would cost as long as the append's own read, ~40% of it)."""
    if chosen == "icechunk":
        return _along(_icechunk_arrays(output, storage_options), dim)
    if chosen == "json" and ours is not None:
        path, axis, _ = ours
        shape = _json_shape(output, path, storage_options)
        if shape is not None and axis < len(shape):
            return path, axis, shape[axis]
    from refzarr.formats.api import read

    return _along(_ref_arrays(read(output, storage_options)), dim)


_ENTRY_BYTES = 1 << 16
"""Bytes of a ``.zarray`` entry read at most (its text is a few hundred)."""


def _json_shape(
    output: str, path: str, storage_options: Mapping[str, Any] | None
) -> list[int] | None:
    """The shape the JSON set at ``output`` gives the array at ``path``, from its one
    ``"path/.zarray":`` line (as refzarr writes entries: one per line); None when there is not
    exactly one such line, or it does not hold a shape."""
    from refzarr.formats.source import decompress, detect_format, locate

    location = locate(output, storage_options)
    kind, data = detect_format(location)
    if kind != "json":
        return None
    text = decompress(data, shown=location.shown)
    key = b"\n" + json.dumps(f"{path}/.zarray").encode() + b":"
    at = text.find(key)
    if at < 0 or text.find(key, at + 1) >= 0:
        return None
    start = at + len(key)
    entry = text[start : start + _ENTRY_BYTES].decode("utf-8", "replace")
    try:
        value, _ = json.JSONDecoder().raw_decode(entry)
        zarray = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        return None
    shape = zarray.get("shape") if isinstance(zarray, dict) else None
    if not isinstance(shape, list) or not all(isinstance(n, int) for n in shape):
        return None
    return shape


_Arrays = list[tuple[str, tuple[tuple[str, ...], tuple[int, ...]]]]
"""Arrays' paths with their dimension names and shapes."""


def _along(arrays: _Arrays, dim: str) -> tuple[str, int, int] | None:
    """The path of an array along ``dim`` (its coordinate, the shallowest, where there is
    one), the axis of ``dim`` in it and its length along ``dim``."""
    found = []
    for path, (names, shape) in arrays:
        if dim in names:
            axis = names.index(dim)
            rank = (path.rpartition("/")[2] != dim, path.count("/"))
            found.append((rank, path, axis, shape[axis]))
    if not found:
        return None
    _, path, axis, length = min(found, key=lambda item: item[0])
    return path, axis, length


def _ref_arrays(group: RefGroup) -> _Arrays:
    return [
        (path, (array.meta.dimension_names or (), array.meta.shape))
        for path, array in group.arrays()
    ]


def _icechunk_arrays(repository: str, storage_options: Mapping[str, Any] | None) -> _Arrays:
    """The arrays of branch main of an Icechunk repository."""
    import zarr

    from refzarr.formats.icechunk.repository import open_repository

    session = open_repository(repository, storage_options).readonly_session(branch="main")
    root = zarr.open_group(session.store, mode="r")
    return [
        (path, (_dimension_names(node.metadata), tuple(node.shape)))
        for path, node in root.members(max_depth=None)
        if isinstance(node, zarr.Array)
    ]


def _dimension_names(metadata: Any) -> tuple[str, ...]:
    """A Zarr v3 array's dimension names (``""`` for an unnamed one)."""
    return tuple(name or "" for name in getattr(metadata, "dimension_names", None) or ())
