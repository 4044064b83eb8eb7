"""The search for a damaged header's END card (for the message when astropy cannot read the
header) reads only what is there: the file's blocks, and no further than the first block that
is not header text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import refzarr
from fitscards import card, fits_header
from refzarr.errors import ScanError
from refzarr.scan.fits.declared import BLOCK, unreadable_header

CARDS = [("SIMPLE", "T"), ("BITPIX", 8), ("NAXIS", 1), ("NAXIS1", 100 * BLOCK)]


def _no_end(data_blocks: int) -> bytes:
    """A primary header without END (its block padded with spaces), then binary data."""
    header = b"".join(card(k, v) for k, v in CARDS)
    return header.ljust(BLOCK) + bytes(data_blocks * BLOCK)


def _counted(data: bytes) -> tuple[list[int], Callable[[int, int], bytes]]:
    reads: list[int] = []

    def read(offset: int, length: int) -> bytes:
        reads.append(offset)
        return data[offset : offset + length]

    return reads, read


def test_the_search_stops_at_the_first_block_that_is_not_header_text() -> None:
    data = _no_end(100)
    reads, read = _counted(data)
    message = unreadable_header(read, 0, len(data), "x.fits: HDU 0", OSError("no END"))
    assert "x.fits: HDU 0: its header cannot be read (no END); a FITS header is 80-byte" in message
    assert reads == [0, BLOCK]


def test_the_search_stays_within_the_file() -> None:
    data = b"".join(card(k, v) for k, v in CARDS).ljust(3 * BLOCK)  # spaces to the end
    reads, read = _counted(data)
    unreadable_header(read, 0, len(data), "x.fits: HDU 0", OSError("no END"))
    assert reads == [0, BLOCK, 2 * BLOCK]


def test_a_header_declaring_more_than_the_file_is_named() -> None:
    data = fits_header(CARDS) + bytes(BLOCK)
    read = _counted(data)[1]
    message = unreadable_header(read, 0, len(data), "x.fits: HDU 0", OSError("corrupt"))
    assert "its header declares 288,000 bytes of data (BITPIX = 8, NAXIS1 = 288000)" in message


def test_a_scan_of_such_a_file_says_what_a_header_is(tmp_path: Path) -> None:
    path = tmp_path / "no-end.fits"
    path.write_bytes(_no_end(100))
    with pytest.raises(ScanError, match=r"no-end\.fits: HDU 0: .*80-byte cards ending with an END"):
        refzarr.scan(str(path))
