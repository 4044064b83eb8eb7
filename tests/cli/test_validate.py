"""``refzarr validate``: every referenced range inside its file; --decode decodes every chunk."""

from __future__ import annotations

from pathlib import Path

import pytest

import refzarr
from refzarr.cli import main


def _refs(source: Path, tmp_path: Path, **options: int) -> Path:
    refs = tmp_path / "refs.json"
    refzarr.write(refzarr.scan(source, **options), refs)
    return refs


def _air_chunk(source: Path) -> tuple[int, int]:
    ref = refzarr.scan(source)["air"].manifest[0, 0, 0]  # type: ignore[union-attr]
    assert isinstance(ref, refzarr.ChunkRef)
    assert ref.length is not None
    return ref.offset, ref.length


def _copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / source.name
    target.write_bytes(source.read_bytes())
    return target


@pytest.mark.parametrize("decode", [[], ["--decode"]])
def test_valid_set(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path, decode: list[str]
) -> None:
    refs = _refs(archive[0], tmp_path, inline_threshold=100)
    assert main(["validate", str(refs), *decode]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{refs}: OK (4 arrays, 1 file")
    if decode:
        assert "chunks decoded" in out


def test_truncated_file_lists_keys_and_urls(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    source = _copy(archive[0], tmp_path)
    refs = _refs(source, tmp_path)
    offset, _ = _air_chunk(source)
    source.write_bytes(source.read_bytes()[: offset + 10])  # the air chunk is cut short
    assert main(["validate", str(refs)]) == 1
    out, err = capsys.readouterr()
    assert f"FAILED air/0.0.0 ({source}): offset {offset}, length" in out
    assert "past the end of the file" in out
    assert err.startswith(f"refzarr: error: {refs}: ")
    assert err.count("\n") == 1


def test_missing_file(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    source = _copy(archive[0], tmp_path)
    refs = _refs(source, tmp_path, inline_coordinates=0)  # four arrays fail, not one
    source.unlink()
    assert main(["validate", str(refs), "--max-failures", "1"]) == 1
    out, err = capsys.readouterr()
    assert out.count("FAILED") == 1
    assert f"({source}): no such file" in out
    assert "more not shown; --max-failures N" in err


def test_decode_finds_corrupt_chunk_bytes(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    source = _copy(archive[0], tmp_path)
    refs = _refs(source, tmp_path)
    offset, length = _air_chunk(source)
    data = bytearray(source.read_bytes())
    data[offset : offset + length] = bytes(length)  # zeros: not a zlib stream
    source.write_bytes(bytes(data))
    assert main(["validate", str(refs)]) == 1  # the ranges still exist, the file changed
    out, _ = capsys.readouterr()
    assert out.startswith(f"CHANGED {source}: changed: modified ")
    assert "FAILED" not in out
    assert main(["validate", str(refs), "--decode"]) == 1
    out, _ = capsys.readouterr()
    assert f"FAILED air/0.0.0 ({source}): air/0.0.0: decoding failed" in out


def test_missing_reference_set(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["validate", str(tmp_path / "none.json")]) == 1
    assert "none.json: no such reference set" in capsys.readouterr().err
