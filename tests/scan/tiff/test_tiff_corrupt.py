"""Damaged and unsupported TIFFs: a named ScanError or UnsupportedFeatureError, quickly, never
a reference that decodes to garbage or points outside the file."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import tifffile

import refzarr
from refzarr import ScanError, UnsupportedFeatureError
from refzarr.codecs.tiff import TiffPad

DATA = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tiff") / "good.tif"
    tifffile.imwrite(path, DATA, tile=(16, 16), compression="zlib")
    return path


def _tag_entry(path: Path, name: str) -> tuple[int, int]:
    """(offset of the tag's IFD entry, offset of its value) in the file."""
    with tifffile.TiffFile(path) as tif:
        tag = tif.pages.first.tags[name]
        return tag.offset, tag.valueoffset


def _ifd_loop(raw: bytearray, path: Path) -> None:
    with tifffile.TiffFile(path) as tif:
        page = tif.pages.first
        ifd, count = page.offset, len(page.tags)
    struct.pack_into("<I", raw, ifd + 2 + 12 * count, ifd)  # next IFD: itself


def _offset_past_end(raw: bytearray, path: Path) -> None:
    struct.pack_into("<I", raw, _tag_entry(path, "TileOffsets")[1], 10**8)


def _absurd_count(raw: bytearray, path: Path) -> None:
    struct.pack_into("<H", raw, _tag_entry(path, "TileByteCounts")[1] + 2, 60000)


def _tag_value_past_end(raw: bytearray, path: Path) -> None:
    struct.pack_into("<I", raw, _tag_entry(path, "TileOffsets")[0] + 8, 10**7)


DAMAGE: dict[str, tuple[Callable[[bytearray, Path], None], str]] = {
    "ifd_loop": (_ifd_loop, "circular reference to IFD"),
    "offset_past_end": (_offset_past_end, r"segment \(0, 0\) at bytes 100000000\.\..*beyond"),
    "absurd_byte_count": (_absurd_count, r"segment \(0, 1\) .* ends beyond the file's end"),
    "tag_value_past_end": (_tag_value_past_end, "invalid value offset"),
}


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_damaged_structure_is_a_named_scan_error(name: str, good: Path, tmp_path: Path) -> None:
    damage, message = DAMAGE[name]
    raw = bytearray(good.read_bytes())
    damage(raw, good)
    path = tmp_path / f"{name}.tif"
    path.write_bytes(bytes(raw))
    with pytest.raises(ScanError, match=message) as info:
        refzarr.scan(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("keep", [6, 12, 2000])
def test_truncated_file(keep: int, good: Path, tmp_path: Path) -> None:
    path = tmp_path / "cut.tif"
    path.write_bytes(good.read_bytes()[:keep])
    with pytest.raises(ScanError, match=str(path)):
        refzarr.scan(path, format="tiff")


def test_truncated_uncompressed_strip(tmp_path: Path) -> None:
    path = tmp_path / "short.tif"
    tifffile.imwrite(path, DATA, rowsperstrip=16)
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tag = tif.pages.first.tags["StripByteCounts"]
        counts = list(tag.value)
        counts[1] -= 2
        tag.overwrite(counts)
    with pytest.raises(ScanError, match=r"segment \(1, 0\) holds 2046 bytes, its pixels need 2048"):
        refzarr.scan(path)


@pytest.mark.parametrize(("code", "name"), [(6, "OJPEG"), (4, "CCITTFAX4"), (12345, "12345")])
def test_unsupported_compression_names_file_series_compression(
    code: int, name: str, good: Path, tmp_path: Path
) -> None:
    """Old-style JPEG (whose tiles need tables and state outside their bytes), CCITT, and
    unknown codes: named with the file and the series; skipped on request."""
    raw = bytearray(good.read_bytes())
    struct.pack_into("<H", raw, _tag_entry(good, "Compression")[0] + 8, code)
    path = tmp_path / "odd.tif"
    path.write_bytes(bytes(raw))
    with pytest.raises(UnsupportedFeatureError, match=rf"{path}: series 0: compression {name}"):
        refzarr.scan(path)
    group = refzarr.scan(path, on_unsupported="skip")
    assert not group.members
    assert [s.path for s in group.skipped] == ["/"]


def test_pad_codec_refuses_other_sizes() -> None:
    pad = TiffPad(nbytes=12, short=4)
    assert bytes(pad.decode(b"abcd")) == b"abcd" + bytes(8)
    assert bytes(pad.decode(bytes(range(12)))) == bytes(range(12))
    with pytest.raises(ValueError, match="decoded to 5 bytes"):
        pad.decode(b"abcde")


def test_not_a_tiff(tmp_path: Path) -> None:
    path = tmp_path / "x.tif"
    path.write_bytes(b"GIF89a" + bytes(100))
    with pytest.raises(ScanError, match="not a TIFF file"):
        refzarr.scan(path, format="tiff")
