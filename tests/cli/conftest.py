"""Fixtures of the command tests: reference sets on disk, the installed command, an archive."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from clikit import make_group

import refzarr
from dailykit import write_days


@pytest.fixture
def refs_json(tmp_path: Path) -> Path:
    """`make_group` written as JSON (its URLs point nowhere)."""
    path = tmp_path / "refs.json"
    refzarr.write(make_group(), path)
    return path


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Four daily netCDF4 files."""
    return write_days(tmp_path_factory.mktemp("archive"), 4)


def installed_command() -> str:
    """The ``refzarr`` script installed next to this interpreter (else the one on PATH)."""
    beside = Path(sys.executable).with_name("refzarr")
    found = str(beside) if beside.exists() else shutil.which("refzarr")
    if found is None:
        pytest.fail("the refzarr command is not installed: pip install -e .")
    return found


@pytest.fixture
def refzarr_command() -> Callable[..., subprocess.CompletedProcess[bytes]]:
    """Run the installed ``refzarr`` with arguments; the completed process (stdout as bytes)."""

    def run(*args: str | Path) -> subprocess.CompletedProcess[bytes]:
        command = [installed_command(), *(str(a) for a in args)]
        return subprocess.run(command, capture_output=True, check=False, timeout=300)

    return run
