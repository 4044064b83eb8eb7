"""FITS headers declaring far more data than the file holds, where astropy fails moving past
it ("[Errno 22] Invalid argument", "Empty or corrupt FITS file"): a `ScanError` naming the HDU,
the declared size against the file's and what to do, in bounded time."""

from __future__ import annotations

from pathlib import Path

import pytest

import refzarr
from fitscards import fits_header
from timebound import raised_within

HARD_TIMEOUT = 60.0


PRIMARY = [("SIMPLE", "T"), ("BITPIX", 8)]
EMPTY_PRIMARY = fits_header([*PRIMARY, ("NAXIS", 0), ("EXTEND", "T")])
FILES = {
    "primary-2p62": (
        fits_header([*PRIMARY, ("NAXIS", 2), ("NAXIS1", 2**31), ("NAXIS2", 2**31)]) + bytes(2880),
        "HDU 0: its header declares 4,611,686,018,427,387,904 bytes of data (BITPIX = 8, "
        "NAXIS1 = 2147483648, NAXIS2 = 2147483648) starting at offset 2,880, but the file "
        "holds 5,760 bytes in all",
    ),
    "primary-10p40": (
        fits_header([*PRIMARY, ("NAXIS", 1), ("NAXIS1", 10**40)]) + bytes(2880),
        f"HDU 0: its header declares {10**40:,} bytes of data (BITPIX = 8, NAXIS1 = {10**40})",
    ),
    "primary-groups-2p62": (
        fits_header(
            [
                ("SIMPLE", "T"),
                ("BITPIX", -32),
                ("NAXIS", 2),
                ("NAXIS1", 0),
                ("NAXIS2", 4),
                ("GROUPS", "T"),
                ("PCOUNT", 2),
                ("GCOUNT", 2**60),
            ]
        )
        + bytes(2880),
        "bytes of data (BITPIX = -32, NAXIS1 = 0, NAXIS2 = 4, PCOUNT = 2, GCOUNT = "
        f"{2**60}) starting at offset 2,880",
    ),
}


@pytest.mark.parametrize("name", FILES)
def test_a_header_declaring_more_than_the_file(tmp_path: Path, name: str) -> None:
    data, says = FILES[name]
    path = tmp_path / f"{name}.fits"
    path.write_bytes(data)
    error = raised_within(HARD_TIMEOUT, lambda: refzarr.scan(str(path)))
    assert isinstance(error, refzarr.ScanError), error
    message = str(error)
    assert message.startswith(f"{path}: HDU 0: its header declares "), message
    assert says in message, message
    assert "the file is truncated or those keywords are wrong" in message
    assert "get a complete copy of the file, or correct the header" in message
    assert "Errno" not in message
    assert "corrupt FITS file" not in message


def test_an_extension_declaring_more_than_the_file(tmp_path: Path) -> None:
    """The second HDU's header: astropy fails iterating to it; its start is named."""
    cards: list[tuple[str, object]] = [("XTENSION", "'IMAGE   '"), ("BITPIX", 16)]
    cards += [("NAXIS", 2), ("NAXIS1", 2**31), ("NAXIS2", 2**31), ("PCOUNT", 0), ("GCOUNT", 1)]
    image = fits_header(cards)
    path = tmp_path / "extension.fits"
    path.write_bytes(EMPTY_PRIMARY + image + bytes(2880))
    error = raised_within(HARD_TIMEOUT, lambda: refzarr.scan(str(path)))
    assert isinstance(error, refzarr.ScanError), error
    message = str(error)
    assert "HDU 1" in message, message
    assert "its header declares 9,223,372,036,854,775,808 bytes of data (BITPIX = 16" in message
    assert "starting at offset 5,760, but the file holds 8,640 bytes in all" in message


def test_a_damaged_header_still_says_so(tmp_path: Path) -> None:
    """No END card: the size cannot be read, astropy's reason stays."""
    path = tmp_path / "no-end.fits"
    path.write_bytes(fits_header([*PRIMARY, ("NAXIS", 0)]).replace(b"END ", b"DNE "))
    error = raised_within(HARD_TIMEOUT, lambda: refzarr.scan(str(path)))
    assert isinstance(error, refzarr.ScanError), error
    assert "declares" not in str(error)
