"""Why astropy could not read an HDU's header: the data size the header declares, read from
its cards without astropy (astropy fails to move past a header declaring more data than the
file holds), else what a FITS header is."""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["HEADER_TEXT", "declared_beyond", "unreadable_header"]

BLOCK = 2880
MAX_HEADER_BLOCKS = 10_000
"""Header blocks read at most looking for END (28.8 MB: far beyond any real header)."""

HEADER_TEXT = bytes(range(0x20, 0x7F))
"""The bytes a header may hold (FITS headers are printable ASCII)."""


def unreadable_header(
    read: Callable[[int, int], bytes], start: int, size: int, where: str, error: Exception
) -> str:
    """The message for the header at ``start`` that astropy could not read (``error``): the
    data it declares when that runs past ``size`` (the file's size; astropy then says
    "Invalid argument" or "corrupt"), else astropy's error and what a FITS header is.
    ``read(offset, length)`` gives fewer bytes past the end of the file."""
    beyond = declared_beyond(read, start, size, where)
    if beyond:
        return beyond
    return (
        f"{where}: its header cannot be read ({error}); a FITS header is 80-byte cards ending "
        "with an END card, in 2880-byte blocks"
    )


def declared_beyond(read: Callable[[int, int], bytes], start: int, size: int, where: str) -> str:
    """A message when the header at ``start`` declares data ending past ``size`` (the file's
    size), else "" (the header cannot be read here, or declares what the file holds)."""
    cards = _cards(read, start, size)
    if cards is None:
        return ""
    values, header_bytes = cards
    try:
        bitpix, naxis = int(values["BITPIX"]), int(values["NAXIS"])
        dims = [int(values[f"NAXIS{k}"]) for k in range(1, naxis + 1)]
        pcount, gcount = int(values.get("PCOUNT", "0")), int(values.get("GCOUNT", "1"))
    except (KeyError, ValueError):
        return ""
    items = math.prod(dims) if dims else 0
    if values.get("GROUPS", "") == "T" and dims and dims[0] == 0:
        items = math.prod(dims[1:])  # random groups: NAXIS1 = 0
    nbytes = abs(bitpix) // 8 * gcount * (pcount + items)
    offset = start + header_bytes
    if offset + nbytes <= size:
        return ""
    axes = ", ".join(f"NAXIS{k} = {n}" for k, n in enumerate(dims, 1))
    return (
        f"{where}: its header declares {nbytes:,} bytes of data (BITPIX = {bitpix}, {axes}"
        f"{f', PCOUNT = {pcount}' if pcount else ''}{f', GCOUNT = {gcount}' if gcount != 1 else ''}"
        f") starting at offset {offset:,}, but the file holds {size:,} bytes in all: the file is "
        "truncated or those keywords are wrong; get a complete copy of the file, or correct "
        "the header"
    )


def _cards(
    read: Callable[[int, int], bytes], start: int, size: int
) -> tuple[dict[str, str], int] | None:
    """The header's keyword values (text) and its length in bytes; None without an END.

    Reads the blocks the file holds from ``start``, up to `MAX_HEADER_BLOCKS`, and stops at
    the first that is not printable ASCII (data, not header: END is missing)."""
    values: dict[str, str] = {}
    for block in range(min(MAX_HEADER_BLOCKS, max(0, size - start) // BLOCK)):
        data = read(start + block * BLOCK, BLOCK)
        if len(data) < BLOCK or data.translate(None, HEADER_TEXT):
            return None
        for at in range(0, BLOCK, 80):
            card = data[at : at + 80].decode("ascii", "replace")
            key = card[:8].strip()
            if key == "END":
                return values, (block + 1) * BLOCK
            if card[8:10] == "= " and key not in values:
                values[key] = card[10:].split("/", 1)[0].strip()
    return None
