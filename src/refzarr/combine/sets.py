"""Sets of files holding different variables: found by what each file holds, and checked to
line up along every concatenation dimension before combine merges them side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from refzarr.combine.cftimes import calendar_of, is_cf_time, rebase_times
from refzarr.combine.inputs import Inputs
from refzarr.combine.keys import DimInfo
from refzarr.errors import IncompatibleError
from refzarr.model import RefArray, RefGroup

__all__ = [
    "SetPlacement",
    "partitions",
    "reject_misaligned",
    "reject_overlap",
    "structure",
    "variable_sets",
]

SetPlacement = tuple[Sequence[DimInfo], Sequence[np.ndarray[Any, Any] | None]]
"""One set's placement: per concatenation dimension its `DimInfo` and its combined
coordinate values in slab order (None without values)."""

_NAMES_SHOWN = 6
"""Variables named per set in one error message before "and N more"."""

_SETS_SHOWN = 4
"""Sets described in one error message before "and N more sets"."""


def structure(group: RefGroup) -> tuple[Any, ...]:
    """What a group holds (member names, recursively), in name order: its sorted names when
    it holds arrays only (the usual case), else ``(name, structure or None)`` pairs."""
    members = group.members
    if not any(isinstance(m, RefGroup) for m in members.values()):
        return tuple(sorted(members))
    return tuple(
        sorted(
            (name, structure(m) if isinstance(m, RefGroup) else None) for name, m in members.items()
        )
    )


def partitions(inputs: Inputs) -> list[list[int]]:
    """The input indices of each set of groups holding the same members, in input order."""
    found: dict[tuple[Any, ...], list[int]] = {}
    for k, group in enumerate(inputs.groups):
        found.setdefault(structure(group), []).append(k)
    return list(found.values())


def variable_sets(groups: Sequence[RefGroup]) -> int:
    """How many sets of groups holding different members combine merges side by side."""
    return len({structure(group) for group in groups})


def reject_overlap(inputs: Inputs, parts: list[list[int]], dims: tuple[str, ...]) -> None:
    """Sets of files may only differ by whole variables: a variable along a concatenation
    dimension held by several sets means some file lacks what its neighbours hold."""
    along = []
    for ix in parts:
        group = inputs.groups[ix[0]]
        along.append({p for p, a in group.arrays() if _varies(p, a, dims)})
    for a in range(len(parts)):
        for b in range(a + 1, len(parts)):
            shared = along[a] & along[b]
            if shared:
                only_a = sorted(p for p, _ in inputs.groups[parts[a][0]].arrays())
                only_b = sorted(p for p, _ in inputs.groups[parts[b][0]].arrays())
                raise IncompatibleError(
                    f"the files do not all hold the same variables: {inputs.labels(parts[a])} "
                    f"hold {only_a}, {inputs.labels(parts[b])} hold {only_b}, and both hold "
                    f"{sorted(shared)} along {', '.join(dims)}; add the missing variables, or "
                    "leave those files out"
                )


def _varies(path: str, array: RefArray, dims: tuple[str, ...]) -> bool:
    names = array.meta.dimension_names or ()
    base = path.rsplit("/", 1)[-1]
    if base in dims or (len(names) == 1 and names[0] == base):
        return False  # a coordinate: merged sets share it
    return any(d in names for d in dims)


def reject_misaligned(
    inputs: Inputs, parts: list[list[int]], placed: Sequence[SetPlacement], dims: tuple[str, ...]
) -> None:
    """Sets merged side by side must hold the same coordinate values along every
    concatenation dimension: a set placed by input order (no coordinate values) or by other
    values cannot be lined up with the others without guessing.

    Raises
    ------
    IncompatibleError
        Naming the dimension, each set's files and the variables only some sets hold, and
        what to do.
    """
    for d, dim in enumerate(dims):
        seen = [_along(infos[d], values[d]) for infos, values in placed]
        if all(s is not None for s in seen) and all(_same(seen[0], s) for s in seen[1:]):
            continue
        held = [{p for p, _ in inputs.groups[ix[0]].arrays()} for ix in parts]
        shown = [
            f"{_held(inputs, parts[k], held, k)} with {_where(dim, s)}"
            for k, s in enumerate(seen[:_SETS_SHOWN])
        ]
        if len(parts) > _SETS_SHOWN:
            shown.append(f"and {len(parts) - _SETS_SHOWN} more sets")
        sets = "; ".join(shown)
        raise IncompatibleError(
            f"the files fall into {len(parts)} sets holding different variables, which combine "
            f"merges side by side, but along {dim!r} the sets do not line up: {sets}. A "
            f"variable some files lack cannot be filled in (xarray would pad it with NaN). If "
            f"the files are one dataset along {dim!r}, look for misnamed or mislabelled "
            "files (every file should hold the same variables) and leave them out; else "
            f"combine each set separately, give coordinate values along {dim!r} (coords=, "
            "--coord-regex) so the sets line up, or merge files of one grid without "
            "concatenating (refzarr.merge, concat_dims=[], or no --concat-dim)"
        )


def _along(info: DimInfo, values: np.ndarray[Any, Any] | None) -> tuple[Any, ...] | None:
    """What places a set's files along a dimension: new or not, values and their units."""
    if values is None:
        return None
    return (info.new, values, info.attributes)


def _same(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> bool:
    """Whether two sets are placed alike (CF times compared in one unit)."""
    if a is None or b is None or a[0] != b[0]:
        return False
    left, right = a[1], b[1]
    if _units(a[2]) != _units(b[2]):
        if not (is_cf_time(a[2]) and is_cf_time(b[2])) or calendar_of(a[2]) != calendar_of(b[2]):
            return False
        try:
            right = rebase_times(right, b[2], a[2], left.dtype)
        except (ValueError, OverflowError, TypeError):
            return False
    try:
        return left.shape == right.shape and bool(np.array_equal(left, right))
    except TypeError:  # values of kinds that cannot be compared differ
        return False


def _units(attributes: Mapping[str, Any]) -> tuple[str, str] | None:
    if "units" not in attributes:
        return None
    return str(attributes["units"]).strip(), calendar_of(attributes)


def _held(inputs: Inputs, files: list[int], held: list[set[str]], k: int) -> str:
    """Set ``k``'s files and the variables some other set lacks."""
    own = sorted(held[k].difference(held[0].intersection(*held[1:])))
    shown = ", ".join(own[:_NAMES_SHOWN])
    if len(own) > _NAMES_SHOWN:
        shown += f" and {len(own) - _NAMES_SHOWN} more"
    count = len(files)
    listed = f"{count} file{'s' if count > 1 else ''} ({inputs.labels(files)})"
    return f"{listed} holding {shown or 'only variables every set holds'}"


def _where(dim: str, seen: tuple[Any, ...] | None) -> str:
    if seen is None:
        return f"no coordinate values along {dim!r} (placed by input order)"
    new, values, attributes = seen
    units = attributes.get("units")
    if values.size == 0:
        return f"no positions along {dim!r}"
    span = str(values[0]) if values.size == 1 else f"{values[0]}..{values[-1]}"
    unit = f", {units}" if units else ""
    kind = ", a new dimension" if new else ""
    return f"{dim}={span} ({values.size} value{'s' if values.size > 1 else ''}{unit}{kind})"
