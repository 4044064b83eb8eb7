"""Writers of a local set wait a bounded time for another writer's lock, then raise
`ConcurrentWriteError` naming the set and the process holding it (``lock_timeout``, the
CLI's ``--lock-timeout``); a refresh of a set on a filesystem that locks nothing refuses to
overwrite a set another writer replaced while it read it (as appends do)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

import refzarr
from refzarr.cli import main
from refzarr.formats import atomic
from sourceskit import touch_later, write_day


@pytest.fixture
def days(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "data"
    folder.mkdir()
    return [write_day(folder / f"day{k}.nc", k) for k in range(2)]


@contextlib.contextmanager
def held(path: Path) -> Iterator[None]:
    """Another writer's lock on ``path`` (another descriptor: even this process waits)."""
    handle = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def _message(target: Path) -> str:
    return f"{target}: another writer .* holds its lock \\(held by process {os.getpid()}"


@pytest.mark.parametrize("name", ["refs.json", "refs.parq"])
@pytest.mark.parametrize("seconds", [0, 0.05])
def test_an_append_waits_a_bounded_time(
    tmp_path: Path, days: list[Path], name: str, seconds: float
) -> None:
    target = tmp_path / name
    refzarr.write(refzarr.scan(str(days[0])), target)
    before = refzarr.read(target)
    with held(target), pytest.raises(refzarr.ConcurrentWriteError, match=_message(target)):
        refzarr.write(refzarr.scan(str(days[1])), target, append_dim="time", lock_timeout=seconds)
    assert refzarr.read(target) == before
    refzarr.write(refzarr.scan(str(days[1])), target, append_dim="time", lock_timeout=seconds)
    assert refzarr.read(target).members["v"].meta.shape == (8, 8)


def test_a_whole_write_and_a_refresh_wait_a_bounded_time(tmp_path: Path, days: list[Path]) -> None:
    target = tmp_path / "refs.json"
    refzarr.write(refzarr.scan(str(days[0])), target)
    write_day(days[0], 0, scale=2.0)
    touch_later(days[0])
    with held(target):
        with pytest.raises(refzarr.ConcurrentWriteError, match=_message(target)):
            refzarr.write(refzarr.scan(str(days[1])), target, lock_timeout=0)
        with pytest.raises(refzarr.ConcurrentWriteError, match=_message(target)):
            refzarr.refresh(target, lock_timeout=0.01)
    assert len(refzarr.refresh(target, lock_timeout=0)) == 1


def test_the_cli_option(
    tmp_path: Path, days: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "refs.parq"
    assert main(["scan", str(days[0]), "-o", str(target)]) == 0
    command = ["scan", str(days[1]), "-o", str(target), "--append-dim", "time"]
    with held(target):
        assert main([*command, "--lock-timeout", "0"]) == 1
        assert "holds its lock" in capsys.readouterr().err
        assert main(["refresh", str(target), "--lock-timeout", "0.01"]) == 1
        assert "holds its lock (held by process" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*command, "--lock-timeout", "-1"])
    assert "seconds >= 0 or 'none' expected" in capsys.readouterr().err
    assert main([*command, "--lock-timeout", "none"]) == 0


def test_lock_timeout_is_checked(tmp_path: Path, days: list[Path]) -> None:
    with pytest.raises(ValueError, match="lock_timeout must be None or seconds >= 0"):
        refzarr.write(refzarr.scan(str(days[0])), tmp_path / "refs.json", lock_timeout=-1)


@pytest.mark.parametrize("name", ["refs.json", "refs.parq"])
def test_a_remote_refresh_over_a_set_replaced_meanwhile_is_refused(
    days: list[Path], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nothing is locked off the local disk: the set's version seen before reading it is
    # compared before the move, as appends do; the other writer's set stands
    target = f"memory://refresh-race/{name}"
    refzarr.write(refzarr.scan(str(days[0])), target)
    other = refzarr.scan(str(days[1]))
    write_day(days[0], 0, scale=2.0)
    touch_later(days[0])

    def other_writer(step: str) -> None:
        if step == "written":
            monkeypatch.setattr(atomic, "fault_hook", None)
            refzarr.write(other, target)  # a whole write by another process, say

    monkeypatch.setattr(atomic, "fault_hook", other_writer)
    try:
        with pytest.raises(refzarr.ConcurrentWriteError, match="another writer replaced"):
            refzarr.refresh(target)
        assert refzarr.read(target) == other
        assert fsspec.filesystem("memory").ls("/refresh-race", detail=False) == [
            f"/refresh-race/{name}"
        ]
    finally:
        fsspec.filesystem("memory").rm("/refresh-race", recursive=True)
