"""The ``refzarr`` command in-process: info, convert, expand, and one-line errors."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from clikit import make_group as _group

import refzarr
from refzarr.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"refzarr {refzarr.__version__}"


def test_info_counts_chunks_bytes_and_urls(
    capsys: pytest.CaptureFixture[str], refs_json: Path
) -> None:
    status, out, _ = _run(capsys, "info", str(refs_json))
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"{refs_json}: 2 group(s), 2 array(s), 2 unique URL(s)"
    assert lines[1] == (
        "referenced: 2 chunks, 110 B in 2 files; inlined: 1 chunk, 3 B; missing: 2 chunks"
    )
    assert lines[2] == "groups: sub"
    header, *rows = [re.split(r"\s{2,}", line.strip()) for line in lines[3:]]
    assert header == [
        "array", "dims", "shape", "chunks", "dtype", "codecs", "referenced", "bytes", "inlined",
        "missing",
    ]  # fmt: skip
    assert {row[0]: row[1:] for row in rows} == {
        "temp": ["y, x", "(4, 6)", "(2, 3)", "float32", "shuffle, zlib", "2", "110 B", "1", "1"],
        "sub/flag": ["-", "(3,)", "(3,)", "uint8", "-", "0", "0 B", "0", "1"],
    }


def test_convert_json_to_json_v1(
    capsys: pytest.CaptureFixture[str], refs_json: Path, tmp_path: Path
) -> None:
    target = tmp_path / "out.json"
    status, out, err = _run(capsys, "convert", str(refs_json), str(target), "--version", "1")
    assert (status, out, err) == (0, "", "")
    assert json.loads(target.read_text())["version"] == 1
    assert refzarr.read(target) == _group()


def test_convert_to_parquet(
    capsys: pytest.CaptureFixture[str], refs_json: Path, tmp_path: Path
) -> None:
    target = tmp_path / "out.parq"
    status, _, err = _run(capsys, "convert", str(refs_json), str(target), "--record-size", "2")
    assert (status, err) == (0, "")
    assert refzarr.read(target) == _group()


def test_convert_with_explicit_format(
    capsys: pytest.CaptureFixture[str], refs_json: Path, tmp_path: Path
) -> None:
    target = tmp_path / "refs.txt"
    status, _, _ = _run(capsys, "convert", str(refs_json), str(target), "--format", "json")
    assert status == 0
    assert json.loads(target.read_text())["temp/0.0"] == ["s3://bucket/a.nc", 100, 50]
    assert refzarr.read(target) == _group()


def test_expand_prints_v0_with_base64_bytes(
    capsys: pytest.CaptureFixture[str], refs_json: Path
) -> None:
    status, out, _ = _run(capsys, "expand", str(refs_json))
    assert status == 0
    refs = json.loads(out)
    assert refs["temp/0.1"] == ["s3://bucket/b.nc", 200, 60]
    assert refs["temp/1.0"] == "base64:" + base64.b64encode(b"\x00\xff\x10").decode()
    assert "temp/1.1" not in refs
    assert json.loads(refs["temp/.zarray"])["shape"] == [4, 6]


def test_expand_reference_set_that_is_not_zarr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "plain.json"
    source.write_text(json.dumps({"version": 1, "refs": {"a": "text", "b": ["file:///x", 1, 2]}}))
    status, out, _ = _run(capsys, "expand", str(source))
    assert status == 0
    assert json.loads(out) == {"a": "text", "b": ["file:///x", 1, 2]}


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [
        (["info", "{tmp}/missing.json"], "missing.json: no such reference set", 1),
        (["info", "{tmp}/broken.json"], "not valid JSON", 1),
        (["expand", "{tmp}/broken.json"], "not valid JSON", 1),
        (["convert", "{refs}", "{tmp}/out.txt"], "pass --format json or --format parquet", 2),
        (["convert", "{refs}", "{tmp}/out.parq", "--version", "1"], "--version applies to JSON", 2),
        (["convert", "{refs}", "{tmp}/o.json", "--record-size", "5"], "--record-size applies", 2),
    ],
)
def test_errors_print_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    refs_json: Path,
    argv: list[str],
    message: str,
    status: int,
) -> None:
    """Failures exit 1, options that do not fit together 2; one line, no traceback."""
    (tmp_path / "broken.json").write_text("{not json")
    filled = [arg.format(tmp=tmp_path, refs=refs_json) for arg in argv]
    found, out, err = _run(capsys, *filled)
    assert found == status
    assert out == ""
    assert err.startswith("refzarr: error: ")
    assert message in err
    assert err.count("\n") == 1


def test_debug_prints_the_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for argv in (["--debug", "info", "nothere.json"], ["info", "nothere.json", "--debug"]):
        status, _, err = _run(capsys, *argv)
        assert status == 1
        assert "Traceback (most recent call last)" in err
        assert err.splitlines()[-1] == "refzarr: error: nothere.json: no such reference set"


def test_unexpected_errors_name_their_type(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, refs_json: Path
) -> None:
    import refzarr.cli.info

    def broken(*args: object) -> None:
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(refzarr.cli.info, "read_refs", broken)
    status, _, err = _run(capsys, "info", str(refs_json))
    assert status == 1
    assert err == "refzarr: error: ZeroDivisionError: oops (run with --debug for the traceback)\n"


def test_bad_record_size_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], refs_json: Path, tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["convert", str(refs_json), str(tmp_path / "o.parq"), "--record-size", "0"])
    assert exited.value.code == 2
    assert "expected a positive integer, got 0" in capsys.readouterr().err
