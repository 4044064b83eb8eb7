"""Appending to JSON and Parquet reference sets: the result equals combining every file at once;
what does not fit raises and leaves the old set untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
import xarray as xr

import refzarr
from dailykit import write_days
from refzarr.cli import main


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_days(tmp_path_factory.mktemp("days"), 8)


@pytest.fixture(scope="module")
def scanned(days: list[Path]) -> list[refzarr.RefGroup]:
    return [refzarr.scan(path) for path in days]


@pytest.mark.parametrize("suffix", [".json", ".parq", ".json.zst"])
def test_appends_in_steps_equal_one_combine(
    tmp_path: Path, scanned: list[refzarr.RefGroup], suffix: str
) -> None:
    target = tmp_path / f"refs{suffix}"
    refzarr.write(refzarr.combine(scanned[:3], concat_dims=["time"]), target)
    refzarr.write(scanned[3], target, append_dim="time")
    refzarr.write(refzarr.combine(scanned[4:], concat_dims=["time"]), target, append_dim="time")
    everything = refzarr.combine(scanned, concat_dims=["time"])
    assert refzarr.read(target) == everything
    xr.testing.assert_identical(
        refzarr.open_dataset(target).load(), refzarr.open_dataset(everything).load()
    )


def test_append_creates_a_missing_target(tmp_path: Path, scanned: list[refzarr.RefGroup]) -> None:
    target = tmp_path / "new.parq"
    refzarr.write(scanned[0], target, append_dim="time")
    assert refzarr.read(target) == scanned[0]


def test_conflicting_append_leaves_the_old_set(
    tmp_path: Path, scanned: list[refzarr.RefGroup]
) -> None:
    for suffix in (".json", ".parq"):
        target = tmp_path / f"refs{suffix}"
        refzarr.write(refzarr.combine(scanned[:3], concat_dims=["time"]), target)
        before = refzarr.read(target)
        with pytest.raises(refzarr.IncompatibleError, match=r"duplicate coordinate values"):
            refzarr.write(scanned[1], target, append_dim="time")
        with pytest.raises(refzarr.IncompatibleError, match="existing set"):
            refzarr.write(scanned[2], target, append_dim="time")
        assert refzarr.read(target) == before
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(target.name)) == [
            target.name
        ]


def test_cli_scan_append_dim(
    tmp_path: Path,
    days: list[Path],
    scanned: list[refzarr.RefGroup],
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = tmp_path / "refs.parq"
    assert main(["scan", *map(str, days[:5]), "-o", str(target), "--append-dim", "time"]) == 0
    assert main(["scan", *map(str, days[5:]), "-o", str(target), "--append-dim", "time"]) == 0
    capsys.readouterr()
    assert refzarr.read(target) == refzarr.combine(scanned, concat_dims=["time"])
    assert main(["scan", str(days[0]), "-o", str(target), "--append-dim", "time"]) == 1
    assert "duplicate coordinate values" in capsys.readouterr().err
