"""Bad GRIB input: truncated messages, lengths past the end of the file or claiming
gigabytes, a missing end marker, a section running past it, non-GRIB bytes between messages.
Each raises a ScanError naming the file, the message number and its byte offset, at once
(nothing is read beyond the headers of a message that cannot be whole), or with
``on_unsupported="skip"`` is listed in ``skipped`` while the whole messages are kept."""

from __future__ import annotations

from pathlib import Path

import pytest
from gribkit import scan
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpus import CORPUS
from refzarr import ScanError, UnsupportedFeatureError
from refzarr.scan import ScannedGroup

SOURCE = CORPUS / "grib" / "regular_gg_ml_g2.grib"  # 3 GRIB2 messages of 103,800 bytes
ERA5 = CORPUS / "grib" / "fields_with_missing_values.grib"  # 2 GRIB1 messages


@pytest.fixture(scope="module")
def data() -> bytes:
    return SOURCE.read_bytes()


def _write(tmp_path: Path, data: bytes, name: str = "bad.grib2") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _second(data: bytes) -> int:
    return data.find(b"GRIB", 1)


def test_truncated_file(tmp_path: Path, data: bytes) -> None:
    path = _write(tmp_path, data[: len(data) - 1000])
    second = 2 * _second(data)
    with pytest.raises(ScanError, match=rf"bad\.grib2: GRIB message 2 at byte offset {second}.*"
                       r"past the end of the file"):  # fmt: skip
        scan(path)


def test_length_claiming_gigabytes(tmp_path: Path, data: bytes) -> None:
    bad = bytearray(data)
    bad[8:16] = (5 * 2**30).to_bytes(8, "big")
    with pytest.raises(ScanError, match=r"GRIB message 0 at byte offset 0: declares 5368709120"):
        scan(_write(tmp_path, bytes(bad)))


def test_zero_length_cannot_loop(tmp_path: Path, data: bytes) -> None:
    bad = bytearray(data)
    bad[8:16] = bytes(8)
    with pytest.raises(ScanError, match=r"message 0 at byte offset 0: declares a length of 0"):
        scan(_write(tmp_path, bytes(bad)))


def test_end_marker_missing(tmp_path: Path, data: bytes) -> None:
    end = int.from_bytes(data[8:16], "big")
    bad = bytearray(data)
    bad[end - 4 : end] = b"8888"
    with pytest.raises(ScanError, match=r"GRIB message 0 at byte offset 0: its last 4 bytes"):
        scan(_write(tmp_path, bytes(bad)))


def test_section_runs_past_end_marker(tmp_path: Path, data: bytes) -> None:
    bad = bytearray(data)
    bad[16 + 21 : 16 + 25] = (10**6).to_bytes(4, "big")  # the length of the section after 1
    with pytest.raises(ScanError, match=r"message 0 at byte offset 0: section \d at byte 37 .*"
                       "end marker"):  # fmt: skip
        scan(_write(tmp_path, bytes(bad)))


def test_grib1_section_runs_past_end_marker(tmp_path: Path) -> None:
    bad = bytearray(ERA5.read_bytes())
    gds = 8 + int.from_bytes(bad[8:11], "big")
    bad[gds : gds + 3] = (10**6).to_bytes(3, "big")
    with pytest.raises(ScanError, match=r"message 0 at byte offset 0: section 2 .*end marker"):
        scan(_write(tmp_path, bytes(bad), "bad.grib"))


def test_garbage_between_messages(tmp_path: Path, data: bytes) -> None:
    second = _second(data)
    path = _write(tmp_path, data[:second] + b"JUNK" * 8 + data[second:])
    with pytest.raises(ScanError, match=rf"GRIB message 1 at byte offset {second}: found b'JUNK"):
        scan(path)


def test_garbage_skipped(tmp_path: Path, data: bytes) -> None:
    second = _second(data)
    path = _write(tmp_path, data[:second] + b"JUNK" * 8 + data[second:])
    group = scan(path, on_unsupported="skip")
    assert isinstance(group, ScannedGroup)
    assert [s.path for s in group.skipped] == [f"bytes {second}..{second + 32}"]
    assert group["t/instant/hybrid/t"].shape == (1, 1, 3, 160, 320)


def test_truncated_message_skipped(tmp_path: Path, data: bytes) -> None:
    group = scan(_write(tmp_path, data[: len(data) - 1000]), on_unsupported="skip")
    assert isinstance(group, ScannedGroup)
    assert len(group.skipped) == 1
    assert "past the end of the file" in group.skipped[0].reason
    assert group["t/instant/hybrid/t"].shape == (1, 1, 2, 160, 320)


def test_zero_padding_between_messages_is_fine(tmp_path: Path, data: bytes) -> None:
    second = _second(data)
    group = scan(_write(tmp_path, data[:second] + bytes(120) + data[second:] + bytes(7)))
    assert group["t/instant/hybrid/t"].shape == (1, 1, 3, 160, 320)


def test_no_message_at_all(tmp_path: Path) -> None:
    with pytest.raises(ScanError, match=r"no GRIB message"):
        scan(_write(tmp_path, b"hello world" * 10))


def test_edition_3_is_named(tmp_path: Path, data: bytes) -> None:
    bad = bytearray(data)
    bad[7] = 3
    with pytest.raises(ScanError, match=r"edition 3; refzarr reads GRIB editions 1 and 2"):
        scan(_write(tmp_path, bytes(bad)))


def test_large_grib1_encoding_is_unsupported(tmp_path: Path) -> None:
    bad = bytearray(ERA5.read_bytes())
    bad[4] |= 0x80
    with pytest.raises(UnsupportedFeatureError, match=r"more than 8 MiB"):
        scan(_write(tmp_path, bytes(bad), "big.grib"))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.integers(min_value=1, max_value=3 * 103_800 - 1), flip=st.integers(0, 255))
def test_any_cut_or_flipped_header_byte_is_named_or_whole(
    tmp_path: Path, cut: int, flip: int
) -> None:
    """A file cut anywhere, or with a section 0 byte changed, either scans (to whole
    messages only) or raises ScanError / UnsupportedFeatureError: never another error, never
    a hang."""
    data = SOURCE.read_bytes()
    bad = bytearray(data[:cut])
    position = flip % 16
    if position < len(bad):
        bad[position] ^= 0xFF
    path = _write(tmp_path, bytes(bad), "cut.grib2")
    try:
        group = scan(path)
    except (ScanError, UnsupportedFeatureError):
        return
    for _, array in group.arrays():
        for offset, length in zip(
            array.manifest.offset.reshape(-1).tolist(),
            array.manifest.length.reshape(-1).tolist(),
            strict=True,
        ):
            assert offset + length <= len(bad)
