"""The data size an HDU's header declares, read from its cards without astropy: for a clear
message when astropy fails to move past a header declaring more data than the file holds."""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["declared_beyond"]

BLOCK = 2880
MAX_HEADER_BLOCKS = 10_000
"""Header blocks read at most looking for END (28.8 MB: far beyond any real header)."""


def declared_beyond(read: Callable[[int, int], bytes], start: int, size: int, where: str) -> str:
    """A message when the header at ``start`` declares data ending past ``size`` (the file's
    size), else "" (the header cannot be read here, or declares what the file holds)."""
    cards = _cards(read, start)
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


def _cards(read: Callable[[int, int], bytes], start: int) -> tuple[dict[str, str], int] | None:
    """The header's keyword values (text) and its length in bytes; None without an END."""
    values: dict[str, str] = {}
    for block in range(MAX_HEADER_BLOCKS):
        data = read(start + block * BLOCK, BLOCK)
        if len(data) < BLOCK:
            return None
        for at in range(0, BLOCK, 80):
            card = data[at : at + 80].decode("ascii", "replace")
            key = card[:8].strip()
            if key == "END":
                return values, (block + 1) * BLOCK
            if card[8:10] == "= " and key not in values:
                values[key] = card[10:].split("/", 1)[0].strip()
    return None
