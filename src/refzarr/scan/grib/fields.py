"""The keys of one GRIB field that place it in a hypercube, read with ecCodes without
decoding its values (``codes_new_from_message`` and key lookups only)."""

from __future__ import annotations

import datetime as dt
from typing import Any, NamedTuple

from refzarr.codecs.grib_eccodes import load_eccodes
from refzarr.errors import UnsupportedFeatureError

__all__ = ["FieldKeys", "field_keys", "read_key"]

STEP_UNIT_SECONDS = {
    0: 60, 1: 3600, 2: 86400, 10: 10800, 11: 21600, 12: 43200, 13: 1, 14: 900, 15: 1800,
}  # fmt: skip
"""Seconds per unit of ecCodes' ``stepUnits`` codes that are a fixed duration (months, years
and longer are not)."""

_EPOCH = dt.datetime(1970, 1, 1)


class FieldKeys(NamedTuple):
    """What places a field: its variable and the hypercube coordinates of its cell."""

    name: str
    step_type: str
    level_type: str
    param_id: int
    number: int | None
    time: int
    step: int
    level: float
    bounds: tuple[float, float] | None


def read_key(handle: Any, key: str, kind: type = str) -> Any:
    """A key's value as ``kind`` (str, int or float), or None when the message lacks it."""
    eccodes = load_eccodes()
    try:
        if kind is int:
            return eccodes.codes_get_long(handle, key)
        if kind is float:
            return eccodes.codes_get_double(handle, key)
        return eccodes.codes_get_string(handle, key)
    except eccodes.KeyValueNotFoundError:
        return None


def field_keys(handle: Any, edition: int, where: str) -> FieldKeys:
    """The placing keys of the field ecCodes opened as ``handle``.

    Raises
    ------
    UnsupportedFeatureError
        When the step is in months or longer (no exact duration).
    """
    number = read_key(handle, "number", int)
    level_type = read_key(handle, "typeOfLevel") or "unknown"
    return FieldKeys(
        name=variable_name(handle, edition),
        step_type=read_key(handle, "stepType") or "unknown",
        level_type=level_type,
        param_id=read_key(handle, "paramId", int) or 0,
        number=None if number is None or number < 0 else number,
        time=_reference_time(handle),
        step=_step_seconds(handle, where),
        level=float(read_key(handle, "level", float) or 0.0),
        bounds=_bounds(handle),
    )


def variable_name(handle: Any, edition: int) -> str:
    """cfVarName, else shortName; for a parameter ecCodes does not know, its table entry."""
    for key in ("cfVarName", "shortName"):
        name = read_key(handle, key)
        if name and name not in ("unknown", "~"):
            return str(name)
    parts: tuple[str, ...] = ("table2Version", "indicatorOfParameter")
    if edition == 2:
        parts = ("discipline", "parameterCategory", "parameterNumber")
    return "param_" + "_".join(str(read_key(handle, key, int)) for key in parts)


def _reference_time(handle: Any) -> int:
    """The forecast's reference time (dataDate, dataTime) in seconds since 1970."""
    date = int(read_key(handle, "dataDate", int))
    hhmm = int(read_key(handle, "dataTime", int))
    when = dt.datetime(date // 10000, date // 100 % 100, date % 100, hhmm // 100, hhmm % 100)
    return int((when - _EPOCH).total_seconds())


def _step_seconds(handle: Any, where: str) -> int:
    """The step (endStep, in its stepUnits) in seconds, exact."""
    eccodes = load_eccodes()
    unit = read_key(handle, "stepUnits", int)
    try:
        step = read_key(handle, "endStep", int)
    except eccodes.DecodingError:  # not a whole number of stepUnits: GRIB1 minutes (hours)
        step, unit = _end_step_seconds(handle, unit), 13
    step, unit = (0 if step is None else step), (1 if unit is None else unit)
    seconds = STEP_UNIT_SECONDS.get(unit)
    if seconds is None:
        raise UnsupportedFeatureError(
            f"{where}: its step is in time-range unit {unit} (months or longer), which has no "
            "exact duration"
        )
    return step * seconds


def _end_step_seconds(handle: Any, unit: int | None) -> int:
    """endStep in seconds: ecCodes gives a GRIB1 step in hours unless told otherwise, and
    cannot give a step of minutes that way ("unable to represent the step in h"). The output
    unit is only what ecCodes reports, not what the message holds; it is put back."""
    eccodes = load_eccodes()
    eccodes.codes_set(handle, "stepUnits", "s")
    try:
        return int(eccodes.codes_get_long(handle, "endStep"))
    finally:
        if unit is not None:
            eccodes.codes_set_long(handle, "stepUnits", unit)


def _bounds(handle: Any) -> tuple[float, float] | None:
    top = read_key(handle, "topLevel", float)
    bottom = read_key(handle, "bottomLevel", float)
    if top is None or bottom is None or top == bottom:
        return None
    return (float(top), float(bottom))
