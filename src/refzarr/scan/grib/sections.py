"""The sections of a GRIB message: checked against its length, and each field's grid section
(the bytes that say which grid it is on, compared to group fields by grid)."""

from __future__ import annotations

from typing import NamedTuple

from refzarr.codecs.grib import grib2_fields

__all__ = ["FieldLayout", "message_fields"]


class FieldLayout(NamedTuple):
    """One field of a message: its number in the message and its grid's identifying bytes."""

    number: int
    grid: bytes


def message_fields(message: bytes, edition: int) -> list[FieldLayout]:
    """The fields of a message (one, except for GRIB2 messages repeating sections 2-7).

    Raises
    ------
    ValueError
        When a section's length runs past the end marker or the sections are out of order.
    """
    if edition == 1:
        return [FieldLayout(0, _grib1_grid(message))]
    fields = grib2_fields(message)
    return [FieldLayout(k, message[slice(*f.grid)]) for k, f in enumerate(fields)]


def _grib1_grid(message: bytes) -> bytes:
    """The GDS (or, without one, the PDS's grid number) after checking every section fits."""
    end = len(message) - 4
    position = 8
    pds_length = _length(message, position, end, "1 (product definition)")
    flags = message[position + 7] if pds_length > 7 else 0
    grid = b"grid-number:" + bytes([message[position + 6]])
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
    return grid


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
