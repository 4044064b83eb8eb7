"""``refzarr cat``: one key's bytes: metadata JSON, referenced and inlined chunks; errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import refzarr
from refzarr.cli import main


@pytest.fixture
def scanned(archive: list[Path], tmp_path: Path) -> Path:
    refs = tmp_path / "refs.json"
    refzarr.write(refzarr.scan(archive[0], inline_threshold=100), refs)
    return refs


def _cat(capsysbinary: pytest.CaptureFixture[bytes], *argv: str) -> tuple[int, bytes, str]:
    status = main(["cat", *argv])
    out, err = capsysbinary.readouterr()
    return status, out, err.decode()


def test_metadata_keys(capsysbinary: pytest.CaptureFixture[bytes], scanned: Path) -> None:
    status, out, _ = _cat(capsysbinary, str(scanned), "air/.zarray")
    assert status == 0
    assert json.loads(out)["chunks"] == [1, 8, 16]
    assert json.loads(_cat(capsysbinary, str(scanned), ".zattrs")[1])["title"]
    assert json.loads(_cat(capsysbinary, str(scanned), "air/.zattrs")[1])["units"] == "K"
    consolidated = json.loads(_cat(capsysbinary, str(scanned), ".zmetadata")[1])
    assert "air/.zarray" in consolidated["metadata"]


def test_referenced_chunk_is_the_file_range(
    capsysbinary: pytest.CaptureFixture[bytes], scanned: Path, archive: list[Path]
) -> None:
    ref = refzarr.read(scanned)["air"].manifest[0, 0, 0]  # type: ignore[union-attr]
    assert isinstance(ref, refzarr.ChunkRef)
    assert ref.length is not None
    status, out, _ = _cat(capsysbinary, str(scanned), "air/0.0.0")
    assert status == 0
    assert out == archive[0].read_bytes()[ref.offset : ref.offset + ref.length]


def test_inlined_chunk(capsysbinary: pytest.CaptureFixture[bytes], scanned: Path) -> None:
    inlined = refzarr.read(scanned)["lat"].manifest[0]  # type: ignore[union-attr]
    assert isinstance(inlined, bytes)
    assert _cat(capsysbinary, str(scanned), "lat/0")[1] == inlined


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("temp/1.1", "temp/1.1 is a missing chunk (never written"),
        ("temp/7.0", "chunk (7, 0) is outside the chunk grid (2, 2)"),
        ("nothing/.zarray", "no key 'nothing/.zarray'"),
        ("temp/0", "no key 'temp/0'"),
    ],
)
def test_errors(
    capsysbinary: pytest.CaptureFixture[bytes], refs_json: Path, key: str, message: str
) -> None:
    status, out, err = _cat(capsysbinary, str(refs_json), key)
    assert (status, out) == (1, b"")
    assert message in err
    assert err.count("\n") == 1


ZARRAY = {
    "shape": [2],
    "chunks": [2],
    "dtype": "<i4",
    "fill_value": 0,
    "order": "C",
    "filters": None,
    "compressor": None,
    "zarr_format": 2,
}


def test_unreachable_chunk(capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    refs.write_text(
        json.dumps(
            {
                ".zgroup": '{"zarr_format":2}',
                "x/.zarray": json.dumps(ZARRAY),
                "x/0": [str(tmp_path / "gone.bin"), 0, 8],
            }
        )
    )
    status, _, err = _cat(capsysbinary, str(refs), "x/0")
    assert status == 1
    assert "gone.bin" in err
