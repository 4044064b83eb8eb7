"""Damaged FITS files: named errors (file, HDU, what is wrong), never a reference outside
the file and never a header read on through data in silence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import refzarr
from corpus import CORPUS
from refzarr import ScanError

FITS = CORPUS / "fits"


def _damaged(tmp_path: Path, source: str, edit: object) -> Path:
    data = bytearray((FITS / source).read_bytes())
    assert callable(edit)
    edit(data)
    path = tmp_path / f"damaged-{source}"
    path.write_bytes(bytes(data))
    return path


def _replace_card(keyword: bytes, card: bytes, start: int = 0) -> object:
    def edit(data: bytearray) -> None:
        at = data.index(keyword.ljust(8), start)
        data[at : at + 80] = card.ljust(80)

    return edit


def test_primary_header_without_end(tmp_path: Path) -> None:
    path = _damaged(tmp_path, "m13.fits", _replace_card(b"END", b"XND"))
    with pytest.raises(ScanError, match=r"damaged-m13\.fits: HDU 0: .*END card"):
        refzarr.scan(path, format="fits")


def test_extension_header_without_end(tmp_path: Path) -> None:
    path = _damaged(tmp_path, "o4sp040b0_raw.fits", _replace_card(b"END", b"XND", 17280))
    with pytest.raises(ScanError, match=r"HDU 1: its header .* END card is missing"):
        refzarr.scan(path)


def test_data_past_end_of_file(tmp_path: Path) -> None:
    path = tmp_path / "truncated.fits"
    path.write_bytes((FITS / "m13.fits").read_bytes()[:100_000])
    with pytest.raises(ScanError, match=r"truncated\.fits: HDU 0 \('PRIMARY'\): .*past the end"):
        refzarr.scan(path)


def test_undefined_bitpix(tmp_path: Path) -> None:
    card = b"BITPIX  =                   17"
    path = _damaged(tmp_path, "m13.fits", _replace_card(b"BITPIX", card))
    with pytest.raises(ScanError, match=r"HDU 0 \('PRIMARY'\): BITPIX = 17 is not one FITS"):
        refzarr.scan(path)


def test_tile_outside_heap(tmp_path: Path) -> None:
    def edit(data: bytearray) -> None:
        at = 8640 + 5 * 8 + 4  # the heap offset of tile 5 in the tile table
        data[at : at + 4] = np.array([10**6], ">i4").tobytes()

    path = _damaged(tmp_path, "m13_rice.fits", edit)
    with pytest.raises(ScanError, match=r"HDU 1 \('COMPRESSED_IMAGE'\): tile 5 .*outside the heap"):
        refzarr.scan(path)


@pytest.mark.parametrize("cut", [100, 2880, 20_000, 30_000, 46_100, 60_000, 74_000])
def test_truncated_anywhere(tmp_path: Path, cut: int) -> None:
    """Cut anywhere: a ScanError, or arrays whose every byte range lies in the file."""
    path = tmp_path / "cut.fits"
    path.write_bytes((FITS / "o4sp040b0_raw.fits").read_bytes()[:cut])
    try:
        group = refzarr.scan(path, format="fits")
    except ScanError as exc:
        message = str(exc)
    else:
        message = ""
    if message:
        assert "cut.fits" in message
        return
    for _, array in group.arrays():
        ends = array.manifest.offset + array.manifest.length
        assert (ends[array.manifest.path_id >= 0] <= cut).all()


def test_not_fits(tmp_path: Path) -> None:
    path = tmp_path / "x.fits"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(5000))
    with pytest.raises(ScanError, match=r"x\.fits: not a FITS file"):
        refzarr.scan(path, format="fits")
