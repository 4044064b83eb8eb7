"""Coordinate specs: where `combine` finds each file's position and coordinate values along a
concatenation dimension (the coordinate variable's data, the URL, an attribute, a callable)."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from refzarr.model import RefGroup

__all__ = [
    "IMPLICIT_DATA",
    "CoordSpec",
    "CoordSpecLike",
    "FromAttribute",
    "FromCallable",
    "FromData",
    "FromRegex",
    "default_parse",
    "parse_coord_spec",
    "parse_coord_specs",
    "parse_date",
]

Parse: TypeAlias = Callable[[str], Any]


@dataclass(frozen=True, slots=True)
class FromData:
    """The values of a coordinate variable, read through the references.

    Parameters
    ----------
    variable
        Name of the variable (default: the dimension's name). It is found in the root group
        or else in the first group (breadth first) that holds it. Values with CF time
        ``units`` ("days since ...") are decoded, so files with different epochs combine;
        the combined coordinate is written in the first file's units.
    """

    variable: str | None = None


@dataclass(frozen=True, slots=True)
class FromRegex:
    """A value taken from each file's URL by a regular expression.

    Parameters
    ----------
    pattern
        Searched for in the URL (`re.search`). The value is the text of the group named
        ``value``, else of the group named like the dimension (``(?P<time>\\d{8})``), else
        of the first group, else the whole match.
    parse
        Turns the matched text into the value (default: an int when the text is digits
        only, else the text). E.g. ``lambda s: np.datetime64(f"{s[:4]}-{s[4:6]}-{s[6:]}")``.
    date_format
        A `datetime.datetime.strptime` format (``"%Y%m%d"``, ``"%Y-%m-%dT%H%M"``): the text
        is a date, and the combined coordinate a CF time (``units: "days since ..."``,
        ``calendar: "proleptic_gregorian"``) that xarray decodes to ``datetime64``. Dates
        with a UTC offset (``%z``) are converted to UTC. Not together with ``parse``.

    Examples
    --------
    >>> FromRegex(r"_(\\d{8})\\.tif$", date_format="%Y%m%d")  # doctest: +SKIP
    """

    pattern: str | re.Pattern[str]
    parse: Parse | None = None
    date_format: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", re.compile(self.pattern))
        if self.date_format is None:
            return
        if self.parse is not None:
            raise ValueError("FromRegex takes parse or date_format, not both")
        if not isinstance(self.date_format, str) or "%" not in self.date_format:
            raise ValueError(
                f"FromRegex(date_format={self.date_format!r}): expected a strptime format "
                "such as '%Y%m%d' (directives start with %)"
            )


@dataclass(frozen=True, slots=True)
class FromAttribute:
    """A value taken from a global attribute, or from an attribute of one variable.

    Parameters
    ----------
    name
        The attribute's name.
    variable
        The variable holding it (a path such as ``"air"`` or ``"grp/air"``); None for the
        root group's attributes.
    parse
        Applied to the attribute's value (default: the value as it is).
    """

    name: str
    variable: str | None = None
    parse: Callable[[Any], Any] | None = None


@dataclass(frozen=True, slots=True)
class FromCallable:
    """Values computed by ``function(url, group)``: one value, or one per position of the file
    along the dimension. ``url`` is the file's URL (None when it cannot be known)."""

    function: Callable[[str | None, RefGroup], Any]


IMPLICIT_DATA = FromData()
"""The spec of a dimension ``coords`` does not name: its variable's data when the files have
one, else their input order (compared by identity, so an explicit `FromData` still requires
the variable)."""

CoordSpec: TypeAlias = FromData | FromRegex | FromAttribute | FromCallable
"""A parsed coordinate spec."""

CoordSpecLike: TypeAlias = (
    CoordSpec | str | tuple[str, str] | tuple[str, str, str] | Callable[..., Any] | None
)
"""What ``combine(coords={dim: ...})`` accepts: a spec, ``"data"``, ``("regex", PATTERN)``,
``("attribute", NAME)``, ``("attribute", NAME, VARIABLE)``, a callable ``f(url, group)``, or
None (the files' input order, no coordinate written)."""


def parse_coord_spec(dim: str, spec: CoordSpecLike) -> CoordSpec | None:
    """The spec object for one dimension; ValueError says what forms are accepted."""
    if spec is None or isinstance(spec, FromData | FromRegex | FromAttribute | FromCallable):
        return spec
    if isinstance(spec, str):
        if spec == "data":
            return FromData()
        raise ValueError(_bad(dim, spec))
    if isinstance(spec, tuple):
        return _parse_tuple(dim, spec)
    if callable(spec):
        return FromCallable(spec)
    raise ValueError(_bad(dim, spec))


def parse_coord_specs(
    concat_dims: tuple[str, ...], coords: Mapping[str, CoordSpecLike] | None
) -> dict[str, CoordSpec | None]:
    """One parsed spec per concatenation dimension (default: `FromData`, used when the
    variable exists)."""
    given = dict(coords or {})
    unknown = sorted(set(given) - set(concat_dims))
    if unknown:
        raise ValueError(
            f"coords names {unknown}, which are not among concat_dims {list(concat_dims)}"
        )
    return {
        dim: parse_coord_spec(dim, given[dim]) if dim in given else IMPLICIT_DATA
        for dim in concat_dims
    }


def _parse_tuple(dim: str, spec: tuple[Any, ...]) -> CoordSpec:
    kind, *rest = spec
    if kind == "regex" and len(rest) == 1 and isinstance(rest[0], str):
        return FromRegex(rest[0])
    if kind == "attribute" and len(rest) in (1, 2) and all(isinstance(r, str) for r in rest):
        return FromAttribute(rest[0], rest[1] if len(rest) == 2 else None)
    if kind == "data" and len(rest) == 1 and isinstance(rest[0], str):
        return FromData(rest[0])
    raise ValueError(_bad(dim, spec))


def _bad(dim: str, spec: object) -> str:
    return (
        f"coords[{dim!r}] = {spec!r} is not a coordinate spec: use 'data', ('regex', PATTERN), "
        "('attribute', NAME[, VARIABLE]), a callable f(url, group), FromData / FromRegex / "
        "FromAttribute / FromCallable, or None"
    )


def default_parse(text: str) -> Any:
    """An int when ``text`` is only digits (with an optional sign), else ``text``."""
    return int(text) if re.fullmatch(r"[+-]?\d+", text) else text


def parse_date(text: str, date_format: str) -> np.datetime64:
    """``text`` read with a strptime format, as a naive UTC ``datetime64[us]``.

    Raises
    ------
    ValueError
        When the text does not match the format (strptime's message).
    """
    moment = datetime.datetime.strptime(text, date_format)  # naive unless %z
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.UTC).replace(tzinfo=None)
    return np.datetime64(moment, "us")
