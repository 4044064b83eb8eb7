"""Each file's coordinate values along each concatenation dimension, from its coordinate
spec: the coordinate variable's data (CF times re-encoded to one epoch), the URL, an
attribute or a callable; all files' variable reads batched into one fetch."""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refzarr.combine.cftimes import is_cf_time, rebase_times, reencode_times
from refzarr.combine.inputs import Inputs
from refzarr.combine.layout import DimKeys
from refzarr.combine.specs import (
    IMPLICIT_DATA,
    CoordSpec,
    FromAttribute,
    FromCallable,
    FromData,
    FromRegex,
    default_parse,
    parse_date,
)
from refzarr.combine.values import read_values
from refzarr.errors import IncompatibleError
from refzarr.model import ArrayMeta, RefArray, RefGroup
from refzarr.model.frozen import thaw_json

__all__ = ["DimInfo", "coordinate", "dim_infos", "dim_length", "find_array"]


@dataclass(frozen=True)
class DimInfo:
    """What combine knows about one concatenation dimension.

    Parameters
    ----------
    keys
        Each file's length and coordinate values along it.
    new
        Whether the files lack the dimension (stacking along a new one).
    path
        Where the combined coordinate variable is written (None: no coordinate written).
    source
        The path of the files' own coordinate variable (replaced by the written one).
    attributes
        The attributes that go with ``keys.values`` (the first input's, ``units`` updated).
    reencoded
        Whether CF times were re-encoded into the first input's units.
    file_attributes
        Each file's coordinate variable attributes (for `FromData`), the units its CF
        time bounds are encoded with.
    """

    keys: DimKeys
    new: bool
    path: str | None = None
    source: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    reencoded: bool = False
    file_attributes: tuple[Mapping[str, Any], ...] = ()


def find_array(group: RefGroup, name: str) -> str | None:
    """The path of the array called ``name``: in the root group, else breadth first."""
    level: list[tuple[str, RefGroup]] = [("", group)]
    while level:
        following: list[tuple[str, RefGroup]] = []
        for prefix, node in level:
            member = node.members.get(name)
            if isinstance(member, RefArray):
                return f"{prefix}{name}"
            following.extend(
                (f"{prefix}{n}/", m) for n, m in node.members.items() if isinstance(m, RefGroup)
            )
        level = following
    return None


def dim_length(group: RefGroup, dim: str) -> int | None:
    """The length of dimension ``dim`` in a group (its first array using it), or None."""
    for member in group.members.values():  # the root's arrays first: the usual place
        if isinstance(member, RefArray):
            names = member.meta.dimension_names
            if names is not None and dim in names:
                return member.meta.shape[names.index(dim)]
    return _first_length(group, dim)


def _first_length(group: RefGroup, dim: str) -> int | None:
    """`dim_length` depth first in member order (plain recursion: a group per call)."""
    for member in group.members.values():
        if isinstance(member, RefGroup):
            found = _first_length(member, dim)
            if found is not None:
                return found
            continue
        names = member.meta.dimension_names
        if names is not None and dim in names:
            return member.meta.shape[names.index(dim)]
    return None


def dim_infos(
    inputs: Inputs, concat_dims: Sequence[str], specs: dict[str, CoordSpec | None]
) -> list[DimInfo]:
    """The keys and coordinate of every concatenation dimension."""
    return [_dim_info(inputs, dim, specs[dim]) for dim in concat_dims]


def _dim_info(inputs: Inputs, dim: str, spec: CoordSpec | None) -> DimInfo:
    lengths_or_none = [dim_length(g, dim) for g in inputs.groups]
    missing = [k for k, n in enumerate(lengths_or_none) if n is None]
    new = len(missing) == len(inputs)
    if missing and not new:
        having = next(k for k, n in enumerate(lengths_or_none) if n is not None)
        raise IncompatibleError(
            f"dimension {dim!r} is in {inputs.labels([having])} but not in "
            f"{inputs.labels(missing)}: files must all have it (concatenate) or all lack it "
            "(stack along a new dimension)"
        )
    lengths = np.array([1 if new else n for n in lengths_or_none], dtype=np.int64)
    if isinstance(spec, FromData):
        return _from_data(inputs, dim, spec, lengths, new)
    values = None if spec is None else _from_files(inputs, dim, spec, lengths)
    source = find_array(inputs.groups[0], dim)
    attributes = _attributes(inputs, source)
    values, attributes = _encode_dates(values, attributes)
    path = None if values is None else (source or dim)
    return DimInfo(DimKeys(dim, lengths, values), new, path, source, attributes)


def _attributes(inputs: Inputs, source: str | None, k: int = 0) -> dict[str, Any]:
    node = None if source is None else inputs.groups[k][source]
    return dict(thaw_json(node.meta.attributes)) if isinstance(node, RefArray) else {}


def coordinate(
    info: DimInfo, inputs: Inputs, values: np.ndarray[Any, Any], first: int
) -> tuple[np.ndarray[Any, Any], dict[str, Any], ArrayMeta | None]:
    """The written coordinate of one dimension: values, attributes and the template array
    (metadata) of file ``first``, the first on the combined grid (CF times re-encoded into
    its units, so the result does not depend on the input order)."""
    node = None if info.source is None else inputs.groups[first][info.source]
    template = node.meta if isinstance(node, RefArray) else None
    attributes = _attributes(inputs, info.source, first) or dict(info.attributes)
    if is_cf_time(info.attributes) and is_cf_time(attributes):
        dtype = template.dtype if template is not None else values.dtype
        values = rebase_times(values, info.attributes, attributes, dtype)
    elif is_cf_time(info.attributes):
        attributes = {**attributes, **{k: info.attributes[k] for k in ("units", "calendar")}}
    elif is_cf_time(attributes):  # values from a spec, not dates: not in the files' units
        attributes = {k: v for k, v in attributes.items() if k not in ("units", "calendar")}
    return values, attributes, template


def _from_data(
    inputs: Inputs, dim: str, spec: FromData, lengths: np.ndarray[Any, Any], new: bool
) -> DimInfo:
    name = spec.variable or dim
    path = find_array(inputs.groups[0], name)
    if path is None:
        if spec is IMPLICIT_DATA:  # no coordinate variable: the input order
            return DimInfo(DimKeys(dim, lengths, None), new)
        raise IncompatibleError(
            f"coords[{dim!r}]: there is no variable {name!r} in {inputs.labels([0])}"
        )
    arrays = [_coordinate(inputs, k, path, dim, int(lengths[k]), new) for k in range(len(inputs))]
    values = read_values(
        arrays,
        lambda k: f"{inputs.label(k)}: {path}",
        inputs.storage_options,
        url_check=inputs.url_check,
    )
    attributes = dict(thaw_json(arrays[0].meta.attributes))
    reencoded = False
    if is_cf_time(attributes):
        values, reencoded = reencode_times(
            values, [a.meta.attributes for a in arrays], inputs.labels, f"variable {path!r}"
        )
    joined = np.concatenate([np.asarray(v).reshape(-1) for v in values])
    file_attributes = tuple(a.meta.attributes for a in arrays)
    keys = DimKeys(dim, lengths, joined)
    return DimInfo(keys, new, path, path, attributes, reencoded, file_attributes)


def _coordinate(inputs: Inputs, k: int, path: str, dim: str, length: int, new: bool) -> RefArray:
    group = inputs.groups[k]
    if "/" in path:
        node = group[path] if path in group else None  # noqa: SIM401
    else:
        node = group.members.get(path)
    if not isinstance(node, RefArray):
        raise IncompatibleError(
            f"coordinate variable {path!r} is in {inputs.labels([0])} but not in "
            f"{inputs.labels([k])}"
        )
    meta = node.meta
    expected = () if new else (dim,)
    ok = (meta.dimension_names in (expected, None) and meta.ndim == len(expected)) or (
        new and meta.shape == (1,)
    )
    if not ok or (not new and meta.shape != (length,)):
        raise IncompatibleError(
            f"coordinate variable {path!r} in {inputs.labels([k])} has shape {meta.shape} and "
            f"dimensions {meta.dimension_names}; a coordinate of {dim!r} must be "
            f"{'a scalar' if new else f'1-D along {dim!r} with length {length}'}"
        )
    return node


def _from_files(
    inputs: Inputs, dim: str, spec: CoordSpec, lengths: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    parts = []
    for k in range(len(inputs)):
        value = np.asarray(_value(inputs, k, dim, spec))
        if value.dtype.kind == "O":
            value = _dates(value)
        if value.size != lengths[k]:
            raise IncompatibleError(
                f"coords[{dim!r}] gave {value.size} values for {inputs.labels([k])}, which "
                f"holds {int(lengths[k])} positions along {dim!r}: give one value per "
                "position (a callable can return several)"
            )
        parts.append(value.reshape(-1))
    try:
        return np.concatenate(parts)
    except (TypeError, ValueError) as exc:
        raise IncompatibleError(f"coords[{dim!r}]: the files' values do not mix: {exc}") from exc


def _value(inputs: Inputs, k: int, dim: str, spec: CoordSpec) -> Any:
    group = inputs.groups[k]
    if isinstance(spec, FromAttribute):
        return _attribute(inputs, k, dim, spec)
    url = inputs.url(k)
    if isinstance(spec, FromCallable):
        return spec.function(url, group)
    assert isinstance(spec, FromRegex)
    if url is None:
        raise IncompatibleError(
            f"coords[{dim!r}] reads the URL, but {inputs.label(k)} references "
            f"{len(inputs.referenced(k))} files: pass urls= to combine (for an already "
            "combined group, use the coordinate's data: coords={dim!r: 'data'})"
        )
    pattern = spec.pattern
    assert not isinstance(pattern, str)
    match = pattern.search(url)
    if match is None:
        raise IncompatibleError(
            f"coords[{dim!r}]: the regular expression {pattern.pattern!r} does not match {url}"
        )
    text = _matched_text(match, dim)
    if spec.date_format is None:
        return (spec.parse or default_parse)(text)
    try:
        return parse_date(text, spec.date_format)
    except ValueError as exc:
        raise IncompatibleError(
            f"coords[{dim!r}]: {text!r}, taken from {url} by {pattern.pattern!r}, is not a "
            f"date of the format {spec.date_format!r} ({exc})"
        ) from None


def _matched_text(match: re.Match[str], dim: str) -> str:
    """The group named ``value``, else the one named like the dimension, else the first
    group, else the whole match."""
    named = match.re.groupindex
    for name in ("value", dim):
        if name in named:
            return match.group(name)
    return match.group(1) if match.re.groups else match.group(0)


def _attribute(inputs: Inputs, k: int, dim: str, spec: FromAttribute) -> Any:
    group = inputs.groups[k]
    attributes: Any = None
    if spec.variable is None:
        attributes = group.attributes
    elif spec.variable in group:
        node = group[spec.variable]
        attributes = node.meta.attributes if isinstance(node, RefArray) else node.attributes
    where = "global attributes" if spec.variable is None else f"variable {spec.variable!r}"
    if attributes is None or spec.name not in attributes:
        raise IncompatibleError(
            f"coords[{dim!r}]: {inputs.labels([k])} has no attribute {spec.name!r} in its {where}"
        )
    value = thaw_json(attributes[spec.name])
    return spec.parse(value) if spec.parse is not None else value


def _dates(value: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Python datetimes as datetime64 (other objects, e.g. cftime dates, stay objects)."""
    flat = value.reshape(-1)
    if flat.size and all(isinstance(v, datetime.date) for v in flat.tolist()):
        return value.astype("datetime64[ns]")
    return value


def _encode_dates(
    values: np.ndarray[Any, Any] | None, attributes: dict[str, Any]
) -> tuple[np.ndarray[Any, Any] | None, dict[str, Any]]:
    """Dates given by a spec are written as CF numbers (the files' units when they have
    them); ordering is unchanged by the encoding. Other values given by a spec (numbers or
    text from a file name, say) are not in the files' time units: those are left out, so
    that no reader decodes them as dates."""
    if values is None:
        return values, attributes
    if not _is_dates(values):
        if is_cf_time(attributes):
            attributes = {k: v for k, v in attributes.items() if k not in ("units", "calendar")}
        return values, attributes
    from xarray.coding.times import encode_cf_datetime

    units = attributes.get("units") if is_cf_time(attributes) else _earliest_units(values)
    calendar = attributes.get("calendar")
    encoded, units, calendar = encode_cf_datetime(values, units, calendar)
    return np.asarray(encoded), {**attributes, "units": units, "calendar": calendar}


def _earliest_units(values: np.ndarray[Any, Any]) -> str | None:
    """CF units counting from the earliest date (xarray counts from the first given), so
    the written coordinate does not depend on the input order; None: xarray's choice."""
    from xarray.coding.times import infer_datetime_units

    try:
        return str(infer_datetime_units(np.sort(values.reshape(-1))))
    except (TypeError, ValueError):  # dates that do not sort (mixed calendars)
        return None


def _is_dates(values: np.ndarray[Any, Any]) -> bool:
    if values.dtype.kind == "M":
        return True
    if values.dtype.kind != "O" or not values.size:
        return False
    first = values.reshape(-1)[0]
    return hasattr(first, "calendar") and hasattr(first, "year")  # cftime dates
