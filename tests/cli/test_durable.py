"""``--durable`` on the commands that write a reference set: every file and directory of the
new set is flushed (``fsync``) before it replaces the old one, and its folder after; without
it a Parquet set is not flushed."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

import refzarr
from refzarr.cli import main
from sourceskit import touch_later, write_day


@pytest.fixture
def flushed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``os.fsync`` is called on from now on (under their final names: a new set
    is flushed at its temporary name, before the exchange)."""
    seen: list[str] = []
    fsync: Callable[[int], None] = os.fsync

    def spy(handle: int) -> None:
        seen.append(re.sub(r"\.tmp-[0-9a-f]{12}", "", os.readlink(f"/proc/self/fd/{handle}")))
        fsync(handle)

    monkeypatch.setattr(os, "fsync", spy)
    return seen


def every_part(target: Path) -> list[str]:
    """The set's files and directories, and its folder (the exchange): what durable flushes."""
    return sorted([str(target), *map(str, target.rglob("*")), str(target.parent)])


@pytest.mark.parametrize("durable", [False, True])
def test_scan_and_an_append(
    tmp_path: Path, durable: bool, flushed: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    days = [write_day(tmp_path / f"d{k}.nc", k) for k in range(3)]
    target = tmp_path / "refs.parq"
    option = ["--durable"] if durable else []
    common = ["--concat-dim", "time", *option]
    assert main(["scan", *map(str, days[:2]), "-o", str(target), *common]) == 0
    # a whole write flushes the exchange either way
    assert sorted(set(flushed)) == (every_part(target) if durable else [str(tmp_path)])
    flushed.clear()
    assert main(["scan", str(days[2]), "-o", str(target), "--append-dim", "time", *option]) == 0
    assert sorted(set(flushed)) == (every_part(target) if durable else [])
    capsys.readouterr()
    everything = refzarr.combine([refzarr.scan(p) for p in days], concat_dims=["time"])
    assert refzarr.read(target) == everything


def test_convert(tmp_path: Path, flushed: list[str]) -> None:
    source = tmp_path / "refs.json"
    refzarr.write(refzarr.scan(write_day(tmp_path / "d.nc", 0)), source)
    flushed.clear()
    assert main(["convert", str(source), str(tmp_path / "refs.parq"), "--durable"]) == 0
    assert sorted(set(flushed)) == every_part(tmp_path / "refs.parq")
    assert refzarr.read(tmp_path / "refs.parq") == refzarr.read(source)


def test_refresh(tmp_path: Path, flushed: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    path = write_day(tmp_path / "d.nc", 0)
    target = tmp_path / "refs.parq"
    refzarr.write(refzarr.scan(path), target)
    write_day(path, 0, scale=2.0)
    touch_later(path)
    flushed.clear()
    assert main(["refresh", str(target), "--durable"]) == 0
    assert sorted(set(flushed)) == every_part(target)
    assert "rewritten (1 changed source scanned again)" in capsys.readouterr().out


def test_not_for_icechunk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_day(tmp_path / "d.nc", 0)
    argv = ["scan", str(path), "-o", str(tmp_path / "repo"), "--format", "icechunk"]
    assert main([*argv, "--durable"]) == 2
    assert "--durable applies to JSON and Parquet output" in capsys.readouterr().err
