"""Appending to JSON and Parquet reference sets: the result equals combining every file at once;
what does not fit raises and leaves the old set untouched."""

from __future__ import annotations

import logging
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


PARQUET_APPEND = "refzarr.formats.parquet.append"
"""The logger that says whether a Parquet append wrote only new record files."""


def fast_appends(caplog: pytest.LogCaptureFixture) -> int:
    """Parquet appends logged as writing only the changed record files."""
    return sum(
        "record files written" in r.getMessage() for r in caplog.records if r.name == PARQUET_APPEND
    )


@pytest.mark.parametrize("suffix", [".json", ".parq", ".json.zst"])
def test_appends_in_steps_equal_one_combine(
    tmp_path: Path,
    scanned: list[refzarr.RefGroup],
    suffix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=PARQUET_APPEND)
    target = tmp_path / f"refs{suffix}"
    refzarr.write(refzarr.combine(scanned[:3], concat_dims=["time"]), target)
    refzarr.write(scanned[3], target, append_dim="time")
    refzarr.write(refzarr.combine(scanned[4:], concat_dims=["time"]), target, append_dim="time")
    assert fast_appends(caplog) == (2 if suffix == ".parq" else 0)
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


@pytest.fixture(scope="module")
def thousand_and_ten(tmp_path_factory: pytest.TempPathFactory) -> list[refzarr.RefGroup]:
    """1,010 daily files scanned (issue 18: appending 10 files to a set of 1,000)."""
    days = write_days(tmp_path_factory.mktemp("archive"), 1010)
    return list(refzarr.scan_many(days, progress=False))


@pytest.mark.slow
@pytest.mark.parametrize("target", ["refs.json", "refs.parq", "icechunk"])
def test_ten_files_appended_to_a_thousand_equal_combining_all(
    tmp_path: Path,
    thousand_and_ten: list[refzarr.RefGroup],
    target: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=PARQUET_APPEND)
    old, new = thousand_and_ten[:1000], thousand_and_ten[1000:]
    everything = refzarr.combine(thousand_and_ten, concat_dims=["time"])
    expected = refzarr.open_dataset(everything).load()
    first = refzarr.combine(old, concat_dims=["time"])
    added = refzarr.combine(new, concat_dims=["time"])
    if target == "icechunk":
        got = _icechunk_appended(tmp_path, first, added)
    else:
        refzarr.write(first, tmp_path / target)
        refzarr.write(added, tmp_path / target, append_dim="time")
        assert fast_appends(caplog) == (target == "refs.parq")  # Parquet: new records only
        assert refzarr.read(tmp_path / target) == everything
        got = refzarr.open_dataset(tmp_path / target).load()
    xr.testing.assert_identical(got, expected)


def _icechunk_appended(
    tmp_path: Path, first: refzarr.RefGroup, added: refzarr.RefGroup
) -> xr.Dataset:
    """The two parts written in two commits of a local repository, read back with xarray."""
    icechunk = pytest.importorskip("icechunk")
    from refzarr.formats.icechunk.repository import container_credentials

    url = next(a.manifest.paths[0] for _, a in first.arrays() if a.manifest.paths)
    folder = Path(url.removeprefix("file://")).resolve().parent
    prefix = folder.as_uri() + "/"
    config = icechunk.RepositoryConfig.default()
    store = icechunk.local_filesystem_store(str(folder))
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    repo = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config,
        authorize_virtual_chunk_access=container_credentials([prefix]),
    )
    for part, append_dim in ((first, None), (added, "time")):
        session = repo.writable_session("main")
        refzarr.to_icechunk(part, session.store, append_dim=append_dim)
        session.commit("days")
    return xr.open_zarr(repo.readonly_session("main").store, consolidated=False).load()
