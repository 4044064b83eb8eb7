"""The sections of a GRIB message: checked against its length, and for each field the bytes
that identify its grid and its metadata.

A field's *template* is every byte ecCodes derives its keys from except the reference date:
the edition and discipline, section 1 with its date and time octets left out, and the local
use, grid and product sections (GRIB1: the PDS with its date left out, and the GDS). Fields
of one template differ only in their reference time, which is read from the same octets
ecCodes reads it from; so a file's keys are asked of ecCodes once per template.
"""

from __future__ import annotations

import datetime as dt
from typing import NamedTuple

from refzarr.codecs.grib import grib2_fields

__all__ = ["FieldLayout", "message_fields"]

_EPOCH = dt.datetime(1970, 1, 1)


class FieldLayout(NamedTuple):
    """One field of a message: its number in the message, its grid's identifying bytes, its
    template (see the module doc) and its reference time in seconds since 1970 (None when
    the octets do not form a valid date)."""

    number: int
    grid: bytes
    template: bytes
    time: int | None


def message_fields(message: bytes, edition: int) -> list[FieldLayout]:
    """The fields of a message (one, except for GRIB2 messages repeating sections 2-7).

    Raises
    ------
    ValueError
        When a section's length runs past the end marker or the sections are out of order.
    """
    if edition == 1:
        return [_grib1_field(message)]
    section1 = message[16 : 16 + int.from_bytes(message[16:20], "big")]
    date = section1[12:19]
    time = _seconds(int.from_bytes(date[0:2], "big"), *date[2:6]) if len(date) == 7 else None
    head = message[6:8] + section1[:12] + section1[19:]
    out = []
    for k, field in enumerate(grib2_fields(message)):
        grid = message[slice(*field.grid)]
        local = message[slice(*field.local)] if field.local is not None else b""
        template = b"".join((head, _sized(local), _sized(grid), message[slice(*field.product)]))
        out.append(FieldLayout(k, grid, template, time))
    return out


def _sized(part: bytes) -> bytes:
    return len(part).to_bytes(8, "big") + part


def _seconds(year: int, month: int, day: int, hour: int, minute: int) -> int | None:
    try:
        when = dt.datetime(year, month, day, hour, minute)
    except ValueError:
        return None
    return int((when - _EPOCH).total_seconds())


def _grib1_field(message: bytes) -> FieldLayout:
    """The GDS (or, without one, the PDS's grid number) after checking every section fits."""
    end = len(message) - 4
    position = 8
    pds_length = _length(message, position, end, "1 (product definition)")
    pds = message[position : position + pds_length]
    flags = pds[7] if pds_length > 7 else 0
    grid = b"grid-number:" + bytes([pds[6]]) if pds_length > 6 else b""
    position += pds_length
    if flags & 0x80:
        gds_length = _length(message, position, end, "2 (grid description)")
        grid = message[position : position + gds_length]
        position += gds_length
    if flags & 0x40:
        position += _length(message, position, end, "3 (bitmap)")
    position += _length(message, position, end, "4 (binary data)")
    if position > end:
        raise ValueError(f"its sections end at byte {position}, past the end marker at {end}")
    time = None
    if pds_length >= 25:
        time = _seconds((pds[24] - 1) * 100 + pds[12], *pds[13:17])
    template = b"\x01" + _sized(pds[:12] + pds[17:24] + pds[25:]) + grid
    return FieldLayout(0, grid, template, time)


def _length(message: bytes, position: int, end: int, name: str) -> int:
    if position + 3 > end:
        raise ValueError(f"section {name} at byte {position} starts at or past the end marker")
    length = int.from_bytes(message[position : position + 3], "big")
    if length < 3 or position + length > end:
        raise ValueError(
            f"section {name} at byte {position} claims {length} bytes, but the end marker "
            f"'7777' is at byte {end}"
        )
    return length
