"""Whether the per-file pieces of one variable can become one array: dtype, codecs, CF
packing attributes, dimension names, the axes not concatenated, and the fill value."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from refzarr.errors import IncompatibleError
from refzarr.model import ArrayMeta, RefArray
from refzarr.model.dtypes import encode_fill_value
from refzarr.model.frozen import json_identity, thaw_json

__all__ = ["CHECKED_ATTRIBUTES", "certainly_alike", "check_same", "combined_fill", "quick_key"]

CHECKED_ATTRIBUTES = (
    "scale_factor",
    "add_offset",
    "_FillValue",
    "missing_value",
    "units",
    "calendar",
    "valid_min",
    "valid_max",
    "valid_range",
    "_Unsigned",
)
"""Attributes that change what the stored numbers mean: they must agree across files (other
attributes are taken from the first file, as xarray's ``combine_attrs="override"`` does)."""

Describe = Callable[[Sequence[int]], str]

_CHECKED = frozenset(CHECKED_ATTRIBUTES)
_CHECKED_NOT_UNITS = _CHECKED - {"units", "calendar"}


def quick_key(meta: ArrayMeta, fixed_axes: Sequence[int], skip_units: bool = False) -> Any:
    """A cheap tuple that is equal for metas `check_same` accepts as alike.

    Unequal keys are not proof of a difference (attribute order, NaN objects): the slow
    field-by-field comparison decides then.
    """
    attrs = meta.attributes
    rect = meta.rectilinear
    checked = _CHECKED_NOT_UNITS if skip_units else _CHECKED
    return (
        meta.dtype,
        tuple([tuple(codec.items()) for codec in meta.codecs]),
        meta.order,
        meta.dimension_names,
        tuple(meta.shape[a] for a in fixed_axes),
        tuple(meta.chunks[a] for a in fixed_axes),
        tuple(None if rect is None else rect[a] for a in fixed_axes),
        tuple([item for item in attrs.items() if item[0] in checked]),
    )


def certainly_alike(a: ArrayMeta, b: ArrayMeta) -> bool:
    """Whether two metas are equal field by field by Python equality: a fast check for
    the usual case of files written alike (False is no proof of a difference: NaN fill
    values, say, take the slow comparisons)."""
    if a is b:
        return True
    if not (
        a.shape == b.shape
        and a.chunks == b.chunks
        and (a.dtype is b.dtype or a.dtype == b.dtype)
        and a.dimension_names == b.dimension_names
        and a.attributes.items() == b.attributes.items()
        and type(a.fill_value) is type(b.fill_value)
        and a.fill_value == b.fill_value
        and a.order == b.order
        and a.rectilinear == b.rectilinear
    ):
        return False
    codecs = b.codecs
    if len(a.codecs) != len(codecs):
        return False
    return all(codec.items() == codecs[k].items() for k, codec in enumerate(a.codecs))


def _fields(meta: ArrayMeta, fixed_axes: Sequence[int], skip_units: bool) -> dict[str, Any]:
    """What must be equal across files, by name (for the error message)."""
    attrs = meta.attributes
    rect = meta.rectilinear
    return {  # in the order differences are named: codecs after the chunks (a predictor's
        # configuration names the chunk shape, so other tile sizes are named as such)
        "dtype": meta.dtype,
        "dimension names": meta.dimension_names,
        "shape along the other dimensions": tuple(meta.shape[a] for a in fixed_axes),
        "chunks along the other dimensions": tuple(meta.chunks[a] for a in fixed_axes),
        "chunk grid along the other dimensions": (
            tuple(None if rect is None else rect[a] for a in fixed_axes)
        ),
        "codecs": meta.codecs,
        "memory order": meta.order,
        **{
            f"attribute {name!r}": json_identity(attrs[name]) if name in attrs else None
            for name in CHECKED_ATTRIBUTES
            if not (skip_units and name in ("units", "calendar"))
        },
    }


_ADVICE = {
    "dtype": "convert the files to one dtype, or combine each dtype's files separately",
    "codecs": "files compressed differently cannot share one array: rewrite them alike",
    "dimension names": "rename the dimensions so that every file uses the same names",
}
_PACKING = (
    "each file's stored numbers mean something else, so one array would decode some files "
    "wrongly: repack the files alike, or combine each set of files separately"
)


def check_same(
    metas: Sequence[ArrayMeta],
    fixed_axes: Sequence[int],
    describe: Describe,
    what: str,
    *,
    skip_units: bool = False,
) -> None:
    """Raise IncompatibleError when ``metas`` differ in anything but the concatenated axes.

    ``fixed_axes`` are the axes that must match exactly; ``describe(indices)`` names files;
    ``what`` names the variable.
    """
    quick = quick_key(metas[0], fixed_axes, skip_units)
    first = _fields(metas[0], fixed_axes, skip_units)
    firsts = tuple(first.values())
    for k in range(1, len(metas)):
        if certainly_alike(metas[k], metas[0]):
            continue
        if quick_key(metas[k], fixed_axes, skip_units) == quick:
            continue
        fields = _fields(metas[k], fixed_axes, skip_units)
        if tuple(fields.values()) == firsts:
            continue
        name = next(n for n in first if fields[n] != first[n])
        advice = _ADVICE.get(name, _PACKING if name.startswith("attribute") else "")
        if name.startswith("shape"):
            advice = "only the concatenated dimensions may differ between files"
        elif name.startswith("chunk"):
            advice = (
                "files chunked (tiled) differently cannot share one array: rewrite them "
                "alike, or combine each chunking's files separately"
            )
        shown = _name_axes(name, metas[0], fixed_axes)
        raise IncompatibleError(
            f"{what}: {shown} differs: {_show(first[name])} in {describe([0])}, "
            f"{_show(fields[name])} in {describe([k])}; {advice}"
        )


def _name_axes(name: str, meta: ArrayMeta, fixed_axes: Sequence[int]) -> str:
    """``name`` with "the other dimensions" spelled out as the array's dimension names (so
    that a file with one step less, or another grid, says which dimension differs)."""
    names = meta.dimension_names
    if names is None or "the other dimensions" not in name:
        return name
    return name.replace("the other dimensions", f"({', '.join(names[a] for a in fixed_axes)})")


def _show(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, tuple):
        return repr(thaw_json(value))
    return str(value)


def combined_fill(arrays: Sequence[RefArray], describe: Describe, what: str) -> Any:
    """The fill value of the combined array.

    The HDF5 scanner gives a null fill value when every chunk of the file is written (then
    the fill value is never read) and the file's HDF5 fill when chunks are missing (see
    NOTES.md). So a null fill from a file whose chunks are all written agrees with any
    other file's fill; otherwise fill values must be equal, or a missing chunk of some file
    would read as another file's fill value.
    """
    by_repr: dict[str, list[int]] = {}  # repr first: cheap, and NaN-safe
    for k, array in enumerate(arrays):
        by_repr.setdefault(repr(array.meta.fill_value), []).append(k)
    fills: dict[str, list[int]] = {}
    for members in by_repr.values():
        meta = arrays[members[0]].meta
        key = json_identity(encode_fill_value(meta.fill_value, meta.dtype))
        fills.setdefault(key, []).extend(members)
    null = json_identity(None)
    if len(fills) == 1:
        return arrays[0].meta.fill_value
    given = [ks for key, ks in fills.items() if key != null]
    if len(given) > 1:
        a, b = given[0][0], given[1][0]
        raise IncompatibleError(
            f"{what}: fill value differs: {arrays[a].meta.fill_value!r} in {describe([a])}, "
            f"{arrays[b].meta.fill_value!r} in {describe([b])}; unwritten chunks would read "
            "as the wrong value: rewrite the files with one fill value"
        )
    for k in fills.get(null, []):
        if arrays[k].manifest.count_written() < arrays[k].manifest.nchunks:  # some unwritten
            other = given[0][0]
            raise IncompatibleError(
                f"{what}: {describe([k])} has chunks never written and no fill value (they "
                f"read as zeros), {describe([other])} has fill value "
                f"{arrays[other].meta.fill_value!r}; rewrite the files with one fill value"
            )
    return arrays[given[0][0]].meta.fill_value
