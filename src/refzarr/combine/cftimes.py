"""CF time coordinates from files with different epochs: decoded with xarray's CF decoding and
re-encoded in one common unit (the first file's), so they can be ordered and written as one."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from refzarr.errors import IncompatibleError

__all__ = ["calendar_of", "is_cf_time", "rebase_times", "reencode_times"]

_CALENDAR_ALIASES = {"gregorian": "standard", "": "standard"}


def is_cf_time(attributes: Mapping[str, Any]) -> bool:
    """Whether ``units`` is a CF time unit (``"<unit> since <epoch>"``)."""
    units = attributes.get("units")
    return isinstance(units, str) and " since " in units


def calendar_of(attributes: Mapping[str, Any]) -> str:
    """The CF calendar, aliases merged (``gregorian`` and no calendar mean ``standard``)."""
    calendar = str(attributes.get("calendar", "standard")).strip().lower()
    return _CALENDAR_ALIASES.get(calendar, calendar)


def reencode_times(
    values: Sequence[np.ndarray[Any, Any]],
    attributes: Sequence[Mapping[str, Any]],
    describe: Callable[[Sequence[int]], str],
    what: str,
) -> tuple[list[np.ndarray[Any, Any]], bool]:
    """Every file's time values in the first file's units; and whether any value changed.

    Files sharing the first file's ``units`` and calendar keep their values untouched. The
    others are decoded to dates and encoded in the first file's units: as integers of the
    first file's dtype when every value is a whole number of that unit, else as float64.

    Raises
    ------
    IncompatibleError
        When calendars differ (``describe(indices)`` names the files; ``what`` the variable).
    """
    first_units = str(attributes[0]["units"]).strip()
    first_calendar = calendar_of(attributes[0])
    given: dict[tuple[Any, Any], list[int]] = {}  # as written first: one lookup per file
    for k, attrs in enumerate(attributes):
        given.setdefault((attrs.get("units", ""), attrs.get("calendar")), []).append(k)
    groups: dict[tuple[str, str], list[int]] = {}
    for (units, _), members in given.items():
        key = (str(units).strip(), calendar_of(attributes[members[0]]))
        groups.setdefault(key, []).extend(members)
    calendars = {calendar for _, calendar in groups}
    if len(calendars) > 1:
        by_calendar = {
            cal: [k for (_, c), ks in groups.items() if c == cal for k in ks] for cal in calendars
        }
        shown = "; ".join(f"{cal!r} in {describe(ks)}" for cal, ks in sorted(by_calendar.items()))
        raise IncompatibleError(
            f"{what}: the files use different calendars ({shown}); dates of different "
            "calendars cannot be put on one axis: combine each calendar's files separately"
        )
    if len(groups) == 1:
        return list(values), False
    from xarray.coding.times import decode_cf_datetime, encode_cf_datetime

    out = list(values)
    for (units, calendar), members in groups.items():
        if units == first_units:
            continue
        joined = np.concatenate([np.asarray(values[k]).ravel() for k in members])
        try:
            dates = decode_cf_datetime(joined, units, calendar)
            encoded, _, _ = encode_cf_datetime(
                dates, first_units, first_calendar, dtype=np.dtype("float64")
            )
        except (ValueError, OverflowError, TypeError) as exc:
            raise IncompatibleError(
                f"{what}: cannot decode the times of {describe(members)} with units {units!r} "
                f"and re-encode them in {first_units!r}: {exc}"
            ) from exc
        cuts = np.cumsum([np.asarray(values[k]).size for k in members])[:-1]
        for k, part in zip(members, np.split(np.asarray(encoded), cuts), strict=True):
            out[k] = part.reshape(np.shape(values[k]))
    return _common_dtype(out, np.asarray(values[0]).dtype), True


def _common_dtype(
    values: list[np.ndarray[Any, Any]], first: np.dtype[Any]
) -> list[np.ndarray[Any, Any]]:
    """Integers of the first file's dtype when every value is whole, else float64."""
    if first.kind in "iu":
        joined = np.concatenate([v.ravel() for v in values]) if values else np.zeros(0)
        info = np.iinfo(first)
        whole = np.all(np.isfinite(joined)) and np.all(joined == np.round(joined))
        if whole and (joined.size == 0 or (joined.min() >= info.min and joined.max() <= info.max)):
            return [np.asarray(v).astype(first) for v in values]
    return [np.asarray(v, dtype=np.float64) for v in values]


def rebase_times(
    values: np.ndarray[Any, Any],
    source: Mapping[str, Any],
    target: Mapping[str, Any],
    dtype: np.dtype[Any],
) -> np.ndarray[Any, Any]:
    """Times encoded with ``source``'s units re-encoded with ``target``'s (same calendar):
    integers of ``dtype`` when every value is whole, else float64."""
    same_units = str(source.get("units")).strip() == str(target.get("units")).strip()
    if same_units and calendar_of(source) == calendar_of(target):
        return values
    from xarray.coding.times import decode_cf_datetime, encode_cf_datetime

    dates = decode_cf_datetime(values, str(source["units"]), calendar_of(source))
    encoded, _, _ = encode_cf_datetime(
        dates, str(target["units"]).strip(), calendar_of(target), dtype=np.dtype("float64")
    )
    return _common_dtype([np.asarray(encoded)], dtype)[0]
