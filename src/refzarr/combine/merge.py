"""Merging groups that hold different variables of the same grid: the union of their
members, group by group; a variable present in several groups must be identical in all."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refzarr.combine.identical import SameSet, check_identical
from refzarr.combine.inputs import Inputs
from refzarr.errors import IncompatibleError
from refzarr.model import RefArray, RefGroup

__all__ = ["merge_inputs"]


def merge_inputs(inputs: Inputs, *, check: bool = True) -> RefGroup:
    """The union of every group's members (the first group's attributes).

    With ``check``, arrays present in several groups are compared (values included) and
    must be identical; dimensions of one name must have one length within a group.
    """
    sets: list[SameSet] = []
    merged = _merge(inputs, list(range(len(inputs))), list(inputs.groups), "", sets)
    if check:
        check_identical(sets, inputs.labels, inputs.storage_options, inputs.url_check)
    return merged


def _merge(
    inputs: Inputs, files: list[int], groups: Sequence[RefGroup], prefix: str, sets: list[SameSet]
) -> RefGroup:
    found: dict[str, list[tuple[int, Any]]] = {}
    for file, group in zip(files, groups, strict=True):
        for name, member in group.members.items():
            found.setdefault(name, []).append((file, member))
    members: dict[str, RefArray | RefGroup] = {}
    for name, holders in found.items():
        path = f"{prefix}{name}"
        kinds = {isinstance(m, RefGroup) for _, m in holders}
        if len(kinds) > 1:
            group_file = next(f for f, m in holders if isinstance(m, RefGroup))
            array_file = next(f for f, m in holders if isinstance(m, RefArray))
            raise IncompatibleError(
                f"{path!r} is a group in {inputs.labels([group_file])} but an array in "
                f"{inputs.labels([array_file])}"
            )
        if isinstance(holders[0][1], RefGroup):
            members[name] = _merge(
                inputs, [f for f, _ in holders], [m for _, m in holders], f"{path}/", sets
            )
            continue
        members[name] = holders[0][1]
        if len(holders) > 1:
            sets.append(
                SameSet(
                    f"variable {path!r}",
                    tuple(f for f, _ in holders),
                    tuple(m for _, m in holders),
                )
            )
    _check_dimensions(inputs, found, prefix)
    return RefGroup(groups[0].attributes, members)


def _check_dimensions(inputs: Inputs, found: dict[str, list[tuple[int, Any]]], prefix: str) -> None:
    """Arrays of one group that name a dimension must agree on its length."""
    lengths: dict[str, tuple[int, int, str]] = {}
    for name, holders in found.items():
        for file, member in holders:
            if not isinstance(member, RefArray) or member.meta.dimension_names is None:
                continue
            for dim, n in zip(member.meta.dimension_names, member.meta.shape, strict=True):
                seen = lengths.setdefault(dim, (n, file, name))
                if seen[0] != n:
                    raise IncompatibleError(
                        f"dimension {dim!r} has length {seen[0]} in {prefix}{seen[2]} of "
                        f"{inputs.labels([seen[1]])} but {n} in {prefix}{name} of "
                        f"{inputs.labels([file])}: merged variables must share their grid"
                    )
