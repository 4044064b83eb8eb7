"""Fixtures of the command tests: reference sets on disk, the installed command, an archive."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from clikit import installed_command, make_group

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


@pytest.fixture
def refzarr_command() -> Callable[..., subprocess.CompletedProcess[bytes]]:
    """Run the installed ``refzarr`` with arguments; the completed process (stdout as bytes)."""

    def run(*args: str | Path) -> subprocess.CompletedProcess[bytes]:
        command = [installed_command(), *(str(a) for a in args)]
        return subprocess.run(command, capture_output=True, check=False, timeout=300)

    return run
