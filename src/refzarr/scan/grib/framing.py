"""Finding the GRIB messages of a file from their section 0 headers, without ecCodes.

Each message starts with ``GRIB``, its total length (3 bytes in edition 1, 8 in edition 2)
and its edition, and ends with ``7777``. Messages may be separated by zero padding (ECMWF
pads GRIB1 messages to multiples of 120 bytes) and the file may open with a header of its
own before the first message; anything else between messages, a length running
past the end of the file or a message not ending with ``7777`` is reported with the message's
number and byte offset. Every step moves forward by at least one byte, so a bad length can
never make the scan loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from refzarr.errors import ScanError, UnsupportedFeatureError

__all__ = ["Message", "iter_messages"]

ReadAt = Callable[[int, int], bytes]

MIN_LENGTH = {1: 8 + 28 + 11 + 4, 2: 16 + 21 + 4}
"""Shortest possible message of each edition: section 0, the smallest section 1, (GRIB1: a
data section) and the end marker."""

PAD_BLOCK = 1 << 16


@dataclass(frozen=True, slots=True)
class Message:
    """One message: its number in the file (from 0), byte offset, length, edition and bytes."""

    number: int
    offset: int
    length: int
    edition: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Garbage:
    """Bytes between messages that are neither a message nor zero padding (skipped)."""

    offset: int
    end: int
    reason: str


def iter_messages(
    read_at: ReadAt, size: int, url: str, *, skip: bool = False
) -> Iterator[Message | Garbage]:
    """Every message of a file of ``size`` bytes, in order.

    With ``skip``, bytes that are not a message (garbage, a truncated message, one whose
    length is wrong) are yielded as `Garbage` and the scan resumes at the next ``GRIB``;
    otherwise they raise `ScanError` naming the file, the message number and the offset.
    """
    position, number = _first_marker(read_at, size, url), 0
    while position < size:
        start = _skip_padding(read_at, position, size)
        if start >= size:
            return
        try:
            message = _message_at(read_at, start, size, url, number)
        except (ScanError, UnsupportedFeatureError) as exc:
            if not skip:
                raise
            resume = _next_marker(read_at, start + 1, size)
            yield Garbage(start, resume, str(exc))
            position = resume
            continue
        yield message
        position = start + message.length
        number += 1


def _first_marker(read_at: ReadAt, size: int, url: str) -> int:
    """Where the first message starts: files may open with a header of their own (ecCodes
    skips it too)."""
    found = _next_marker(read_at, 0, size)
    if found >= size:
        raise ScanError(f"{url}: no GRIB message in the file ('GRIB' occurs nowhere)")
    return found


def _skip_padding(read_at: ReadAt, position: int, size: int) -> int:
    """The first non-zero byte at or after ``position`` (``size`` when there is none)."""
    if read_at(position, 1) != b"\x00":
        return position
    while position < size:
        block = read_at(position, min(PAD_BLOCK, size - position))
        if not block:
            return size
        stripped = len(block) - len(block.lstrip(b"\x00"))
        if stripped < len(block):
            return position + stripped
        position += len(block)
    return size


def _next_marker(read_at: ReadAt, position: int, size: int) -> int:
    """Offset of the next ``GRIB`` at or after ``position`` (``size`` when none)."""
    while position < size:
        block = read_at(position, min(PAD_BLOCK + 3, size - position))
        found = block.find(b"GRIB")
        if found >= 0:
            return position + found
        if len(block) < 4:
            return size
        position += len(block) - 3
    return size


def _message_at(read_at: ReadAt, offset: int, size: int, url: str, number: int) -> Message:
    where = f"{url}: GRIB message {number} at byte offset {offset}"
    head = read_at(offset, 16)
    if head[:4] != b"GRIB":
        raise ScanError(
            f"{where}: found {head[:8]!r} where a message ('GRIB') or zero padding was "
            "expected; the file holds non-GRIB bytes between messages (a WMO bulletin "
            "header?). Pass on_unsupported='skip' to skip them"
        )
    edition = head[7] if len(head) >= 8 else -1
    length = _declared_length(head, edition, where)
    if length < MIN_LENGTH[edition]:
        raise ScanError(f"{where}: declares a length of {length} bytes, too short for a message")
    if offset + length > size:
        raise ScanError(
            f"{where}: declares {length} bytes, past the end of the file ({size} bytes): "
            "the file is truncated or the length is corrupt"
        )
    data = read_at(offset, length)
    if len(data) != length:
        raise ScanError(f"{where}: read {len(data)} of its {length} bytes")
    if data[-4:] != b"7777":
        raise ScanError(
            f"{where}: its last 4 bytes (at offset {offset + length - 4}) are {data[-4:]!r}, "
            "not the end marker '7777': the message is truncated or its length is corrupt"
        )
    return Message(number, offset, length, edition, data)


def _declared_length(head: bytes, edition: int, where: str) -> int:
    if len(head) < 16:
        raise ScanError(f"{where}: the file ends inside the message's 16-byte header")
    if edition == 2:
        return int.from_bytes(head[8:16], "big")
    if edition != 1:
        raise ScanError(f"{where}: edition {edition}; refzarr reads GRIB editions 1 and 2")
    length = int.from_bytes(head[4:7], "big")
    if length & 0x800000:
        raise UnsupportedFeatureError(
            f"{where}: a GRIB1 message of more than 8 MiB (ECMWF's large-message length "
            "encoding), which refzarr cannot frame; convert the file to GRIB2"
        )
    return length
