"""The GRIB codec (``refzarr.grib``): one GRIB message's bytes -> its field's values, float32.

A chunk of a GRIB array is the byte range of a whole message; the codec hands the message
to ecCodes, which decodes every packing it knows (simple, complex, spatial differencing,
JPEG 2000, CCSDS, PNG, IEEE, spectral). Points ecCodes reports as missing (bitmaps, the
missing values of complex packing) become NaN, the values come out as float32 (as cfgrib
gives them) in the grid's shape, with alternate-row scanning undone as cfgrib does and
column-by-column storage (``jPointsAreConsecutive``) turned into rows. A GRIB2
message holding several fields (sections 2-7 repeated) carries the field's index in the
codec config; this module also splits such messages (`grib2_fields`, `extract_field`).

ecCodes is imported only when a chunk is decoded: this module imports without it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numcodecs.abc import Codec
from numcodecs.registry import register_codec

__all__ = ["GribCodec", "GribField", "extract_field", "grib2_fields", "row_order"]

END = b"7777"


class GribField(NamedTuple):
    """Where the sections of one field of a GRIB2 message lie: ``(start, end)`` byte spans
    within the message (section 2 may be absent: None)."""

    local: tuple[int, int] | None
    grid: tuple[int, int]
    product: tuple[int, int]
    representation: tuple[int, int]
    bitmap: tuple[int, int]
    data: tuple[int, int]


def _sections(message: bytes) -> list[tuple[int, int, int]]:
    """``(number, start, end)`` of every section of a GRIB2 message after section 0.

    Raises ValueError when a section's length runs past the end marker or is too short.
    """
    out = []
    position, stop = 16, len(message) - 4
    while position < stop:
        if position + 5 > stop:
            raise ValueError(f"a section header at byte {position} runs into the end marker")
        length = int.from_bytes(message[position : position + 4], "big")
        number = message[position + 4]
        if length < 5 or position + length > stop:
            raise ValueError(
                f"section {number} at byte {position} claims {length} bytes, but the "
                f"message's end marker '7777' is at byte {stop}"
            )
        out.append((number, position, position + length))
        position += length
    return out


def grib2_fields(message: bytes) -> list[GribField]:
    """The fields of a GRIB2 message, in order (one for most messages).

    A field takes the latest section 2 and 3 before its section 4; a bitmap section saying
    "the bitmap defined before" (indicator 254) is resolved to that earlier section 6.

    Raises
    ------
    ValueError
        When the sections do not form GRIB2's ``1 (2? 3? 4 5 6 7)+`` sequence, a length runs
        past the end marker, or a bitmap refers to none defined before.
    """
    sections = _sections(message)
    if not sections or sections[0][0] != 1:
        raise ValueError("section 1 does not follow section 0")
    fields: list[GribField] = []
    latest: dict[int, tuple[int, int] | None] = {2: None, 3: None, 6: None}
    pending: dict[int, tuple[int, int]] = {}
    expected = (4, 5, 6, 7)
    for number, start, end in sections[1:]:
        if number in (2, 3) and not pending:
            latest[number] = (start, end)
            if number == 2:
                latest[3] = None
            continue
        if number != expected[len(pending)]:
            raise ValueError(f"section {number} at byte {start} is out of order")
        pending[number] = (start, end)
        if number == 6:
            pending[6] = _resolve_bitmap(message, start, end, latest)
        if number == 7:
            fields.append(_field(latest, pending, start))
            pending = {}
    if pending or not fields:
        raise ValueError("the message ends inside a field (sections 4 to 7 incomplete)")
    return fields


def _resolve_bitmap(
    message: bytes, start: int, end: int, latest: dict[int, tuple[int, int] | None]
) -> tuple[int, int]:
    if end - start < 6:
        raise ValueError(f"section 6 at byte {start} is shorter than 6 bytes")
    indicator = message[start + 5]
    if indicator == 254:
        previous = latest[6]
        if previous is None:
            raise ValueError(f"section 6 at byte {start} reuses a bitmap never defined")
        return previous
    if indicator == 0:
        latest[6] = (start, end)
    return (start, end)


def _field(
    latest: dict[int, tuple[int, int] | None], pending: dict[int, tuple[int, int]], start: int
) -> GribField:
    grid = latest[3]
    if grid is None:
        raise ValueError(f"the field ending at byte {start} has no grid (section 3)")
    return GribField(latest[2], grid, pending[4], pending[5], pending[6], pending[7])


def extract_field(message: bytes, index: int) -> bytes:
    """Field ``index`` of a GRIB2 message as a GRIB2 message of its own (the message
    itself when it holds one field and ``index`` is 0).

    Raises
    ------
    ValueError
        When the message has no such field or its sections are malformed.
    """
    fields = grib2_fields(message)
    if not 0 <= index < len(fields):
        raise ValueError(f"the message holds {len(fields)} field(s), not a field {index}")
    if len(fields) == 1:
        return message
    field = fields[index]
    spans = [s for s in field if s is not None]
    section1 = (16, 16 + int.from_bytes(message[16:20], "big"))
    body = b"".join(message[a:b] for a, b in [section1, *spans])
    total = 16 + len(body) + 4
    return message[:8] + total.to_bytes(8, "big") + body + END


class GribCodec(Codec):  # type: ignore[misc]
    """Decode a GRIB message into its field's values (float32, NaN where missing).

    Parameters
    ----------
    field
        Index of the field within a GRIB2 message holding several (0 for the first and for
        single-field messages).
    rows
        When the grid scans alternate rows in opposite directions: its ``(Ny, Nx)``, so that
        every other row is reversed as cfgrib does; None otherwise.
    columns
        When the grid's points are stored column by column (``jPointsAreConsecutive``): its
        ``(Ny, Nx)``, so that the values come out row by row like every other grid's (with
        ``rows`` too, every other column is reversed first); None otherwise.
    """

    codec_id = "refzarr.grib"

    def __init__(
        self,
        field: int = 0,
        rows: tuple[int, int] | list[int] | None = None,
        columns: tuple[int, int] | list[int] | None = None,
    ) -> None:
        self.field = int(field)
        self.rows = None if rows is None else (int(rows[0]), int(rows[1]))
        self.columns = None if columns is None else (int(columns[0]), int(columns[1]))

    def get_config(self) -> dict[str, Any]:
        """The JSON configuration (only what differs from the defaults)."""
        config: dict[str, Any] = {"id": self.codec_id}
        if self.field:
            config["field"] = self.field
        if self.rows is not None:
            config["rows"] = list(self.rows)
        if self.columns is not None:
            config["columns"] = list(self.columns)
        return config

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The field's values as float32 (missing points NaN), flat in the grid's order."""
        message = bytes(buf) if not isinstance(buf, bytes) else buf
        values = decode_message(message, self.field, self.rows, self.columns)
        if out is not None:
            target = (
                np.frombuffer(out, dtype=np.float32) if not isinstance(out, np.ndarray) else out
            )
            np.copyto(target.reshape(-1).view(np.float32), values)
            return out
        return values

    def encode(self, buf: Any) -> bytes:
        """Not supported: refzarr references GRIB messages, it does not write them."""
        raise NotImplementedError("refzarr.grib decodes GRIB messages; it cannot encode")


def decode_message(
    message: bytes,
    field: int = 0,
    rows: tuple[int, int] | None = None,
    columns: tuple[int, int] | None = None,
) -> Any:
    """Values of field ``field`` of a GRIB message (float32, NaN where missing)."""
    from refzarr.codecs.grib_eccodes import decoded_values

    if field and message[7:8] == b"\x02":
        message = extract_field(message, field)
    elif field:
        raise ValueError(f"a GRIB1 message holds one field, not a field {field}")
    return row_order(decoded_values(message), rows, columns)


def row_order(
    values: Any, rows: tuple[int, int] | None = None, columns: tuple[int, int] | None = None
) -> Any:
    """A field's values in stored order -> row by row, each row in one direction (the
    codec's ``rows`` and ``columns``; see `GribCodec`)."""
    if columns is not None:
        ny, nx = columns
        lines = values.reshape(nx, ny)
        if rows is not None:
            lines[1::2, :] = lines[1::2, ::-1].copy()
        return np.ascontiguousarray(lines.T).reshape(-1)
    if rows is not None:
        grid = values.reshape(rows)
        grid[1::2, :] = grid[1::2, ::-1].copy()
        values = grid.reshape(-1)
    return values


register_codec(GribCodec)
