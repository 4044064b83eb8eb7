"""The sections of a GRIB message: checked against its length, and for each field the bytes
that identify its grid and its metadata.

A field's *template* is every byte ecCodes derives its keys from except the reference date
and, for the common product definitions (GRIB2 templates 4.0 and 4.1, GRIB1 time range
indicators 0 and 10), the forecast time: the edition and discipline, section 1 without its
date and time octets, and the local use, grid and product sections (GRIB1: the PDS without
its date and P1 octets, and the GDS). Fields of one template differ only in their reference
time and step, which are read from the octets ecCodes reads them from; so a file's keys are
asked of ecCodes once per template (and the scanner checks, on the first field of each
template, that its octets give the time and step ecCodes gives).
"""

from __future__ import annotations

import datetime as dt
from typing import NamedTuple

from refzarr.codecs.grib import grib2_fields

__all__ = ["FieldLayout", "HeadLayout", "head_layout", "message_fields"]

_EPOCH = dt.datetime(1970, 1, 1)


class FieldLayout(NamedTuple):
    """One field of a message: its number in the message, its grid's identifying bytes, its
    template (see the module doc), its reference time in seconds since 1970 (None when the
    octets do not form a valid date) and its step in seconds (None: left in the template)."""

    number: int
    grid: bytes
    template: bytes
    time: int | None
    step: int | None = None


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
        product, step = _grib2_step(message[slice(*field.product)])
        template = b"".join((head, _sized(local), _sized(grid), product))
        out.append(FieldLayout(k, grid, template, time, step))
    return out


GRIB2_UNITS = {0: 60, 1: 3600, 2: 86400, 10: 10800, 11: 21600, 12: 43200, 13: 1}
"""Seconds per GRIB2 time-range unit (code table 4.4) of fixed duration."""
GRIB1_UNITS = {0: 60, 1: 3600, 2: 86400, 10: 10800, 11: 21600, 12: 43200, 13: 900, 14: 1800,
               254: 1}  # fmt: skip
"""Seconds per GRIB1 time-range unit (code table 4) of fixed duration."""


def _grib2_step(product: bytes) -> tuple[bytes, int | None]:
    """Section 4 without its forecast time, and that time in seconds, for product
    definition templates 4.0 and 4.1 (the section unchanged and None otherwise)."""
    if len(product) < 22 or int.from_bytes(product[7:9], "big") not in (0, 1):
        return product, None
    seconds = GRIB2_UNITS.get(product[17])
    value = int.from_bytes(product[18:22], "big")
    if seconds is None or value & 0x80000000:  # a negative forecast time: left to ecCodes
        return product, None
    return product[:18] + product[22:], value * seconds


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
    return FieldLayout(0, grid, *_grib1_template(pds, grid))


def _grib1_template(pds: bytes, grid: bytes) -> tuple[bytes, int | None, int | None]:
    """``(template, time, step)`` of a GRIB1 field from its PDS and grid bytes."""
    time = step = None
    kept = pds[:12] + pds[17:24] + pds[25:]
    if len(pds) >= 25:
        time = _seconds((pds[24] - 1) * 100 + pds[12], *pds[13:17])
        step = _grib1_step(pds)
        if step is not None:  # without P1 (and P2 for indicator 10): octets 19, 20
            kept = pds[:12] + pds[17:18] + pds[20:24] + pds[25:]
    return b"\x01" + _sized(kept) + grid, time, step


def _grib1_step(pds: bytes) -> int | None:
    """The step in seconds for time range indicators 0 (P1, P2 zero) and 10 (P1 on two
    octets); None for the others (left in the template)."""
    seconds = GRIB1_UNITS.get(pds[17])
    indicator = pds[20]
    if seconds is None:
        return None
    if indicator == 0 and pds[19] == 0:
        return pds[18] * seconds
    if indicator == 10:
        return int.from_bytes(pds[18:20], "big") * seconds
    return None


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


class HeadLayout(NamedTuple):
    """What the first bytes of a message say of its (first) field: edition, the message's
    declared length, the field's template, reference time and step (as `FieldLayout`)."""

    edition: int
    length: int
    template: bytes
    time: int | None
    step: int | None


def head_layout(head: bytes) -> HeadLayout | None:
    """The layout of a message's first field from the message's first bytes (GRIB2: sections
    0 to 4; GRIB1: section 0, the PDS and the GDS), without its data; None when ``head`` does
    not start a message or ends before those sections do."""
    if len(head) < 16 or head[:4] != b"GRIB":
        return None
    if head[7] == 2:
        return _grib2_head(head)
    if head[7] == 1:
        return _grib1_head(head)
    return None


def _grib2_head(head: bytes) -> HeadLayout | None:
    spans: dict[int, bytes] = {}
    position = 16
    while 4 not in spans:
        if position + 5 > len(head):
            return None
        size, number = int.from_bytes(head[position : position + 4], "big"), head[position + 4]
        if size < 5 or position + size > len(head) or number not in (1, 2, 3, 4) or number in spans:
            return None
        spans[number] = head[position : position + size]
        position += size
    if 1 not in spans or 3 not in spans:
        return None
    section1 = spans[1]
    date = section1[12:19]
    time = _seconds(int.from_bytes(date[0:2], "big"), *date[2:6]) if len(date) == 7 else None
    product, step = _grib2_step(spans[4])
    parts = (head[6:8] + section1[:12] + section1[19:], _sized(spans.get(2, b"")),
             _sized(spans[3]), product)  # fmt: skip
    return HeadLayout(2, int.from_bytes(head[8:16], "big"), b"".join(parts), time, step)


def _grib1_head(head: bytes) -> HeadLayout | None:
    length = int.from_bytes(head[4:7], "big")
    pds_length = int.from_bytes(head[8:11], "big")
    if length & 0x800000 or pds_length < 28 or 8 + pds_length > len(head):
        return None
    pds = head[8 : 8 + pds_length]
    grid = b"grid-number:" + bytes([pds[6]])
    if pds[7] & 0x80:
        start = 8 + pds_length
        gds_length = int.from_bytes(head[start : start + 3], "big")
        if gds_length < 3 or start + gds_length > len(head):
            return None
        grid = head[start : start + gds_length]
    return HeadLayout(1, length, *_grib1_template(pds, grid))
