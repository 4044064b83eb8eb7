"""The installed ``refzarr`` command in a subprocess: exit codes, stdout bytes, stderr lines."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from childkit import run_python

Run = Callable[..., subprocess.CompletedProcess[bytes]]


def test_help_lists_every_command(refzarr_command: Run) -> None:
    done = refzarr_command("--help")
    assert done.returncode == 0
    for name in ("scan", "info", "validate", "cat", "convert", "expand"):
        assert name in done.stdout.decode()


def test_scan_info_validate_cat(refzarr_command: Run, archive: list[Path], tmp_path: Path) -> None:
    refs = tmp_path / "refs.json"
    done = refzarr_command("scan", archive[0], "-o", refs)
    assert (done.returncode, done.stderr) == (0, b"")  # no progress bar: stderr is no terminal
    info = refzarr_command("info", refs)
    assert info.returncode == 0
    assert b"air" in info.stdout
    assert refzarr_command("validate", refs, "--decode").returncode == 0
    zarray = refzarr_command("cat", refs, "air/.zarray")
    assert json.loads(zarray.stdout)["dtype"] == "<f4"


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        (["info", "{tmp}/missing.json"], 1, b"missing.json: no such reference set"),
        (["info", "{tmp}/corrupt.json"], 1, b"not valid JSON"),
        (["cat", "{refs}", "nope/.zarray"], 1, b"no key 'nope/.zarray'"),
        (["validate", "{tmp}/corrupt.json"], 1, b"not valid JSON"),
        (["scan", "{tmp}/missing.nc", "-o", "{tmp}/o.json"], 1, b"missing.nc: no such file"),
        (["scan", "{tmp}/missing.nc"], 2, b"the following arguments are required: -o"),
        (["frobnicate"], 2, b"invalid choice: 'frobnicate'"),
    ],
)
def test_error_paths(
    refzarr_command: Run,
    refs_json: Path,
    tmp_path: Path,
    argv: list[str],
    status: int,
    message: bytes,
) -> None:
    (tmp_path / "corrupt.json").write_text('{"version": 1, "refs": {')
    done = refzarr_command(*(a.format(tmp=tmp_path, refs=refs_json) for a in argv))
    assert done.returncode == status
    assert message in done.stderr
    assert b"Traceback" not in done.stderr
    if status == 1:
        assert done.stderr.startswith(b"refzarr: error: ")
        assert done.stderr.count(b"\n") == 1


def test_debug_shows_the_traceback(refzarr_command: Run, tmp_path: Path) -> None:
    done = refzarr_command("--debug", "info", tmp_path / "missing.json")
    assert done.returncode == 1
    assert b"Traceback (most recent call last)" in done.stderr


@pytest.mark.parametrize("module", ["refzarr", "refzarr.cli"])
def test_python_dash_m(module: str) -> None:
    """``python -m refzarr`` (or ``refzarr.cli``) runs the command where its script is not
    on PATH."""
    done = run_python("-m", module, "scan", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: refzarr scan")
