"""`scan_many`: every executor gives what scanning file by file gives, in input order; errors
name their files; skipped files are listed."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import refzarr
from refzarr import RefGroup, ScanError, SourceNotFoundError
from refzarr.parallel import ScanFailure, ScanResults, scan_many


def _serial(paths: list[Path]) -> list[RefGroup]:
    return [refzarr.scan(path) for path in paths]


@pytest.mark.parametrize("executor", ["serial", "threads", "processes", None])
def test_named_executors_equal_serial(daily: list[Path], executor: str | None) -> None:
    results = scan_many(daily, executor=executor, batch_size=3, progress=False)
    assert list(results) == _serial(daily)
    assert results.urls == tuple(str(path) for path in daily)
    assert results.errors == ()


@pytest.mark.parametrize(
    "make", [lambda: ThreadPoolExecutor(2), lambda: ProcessPoolExecutor(2)], ids=["thread", "proc"]
)
def test_caller_executor_is_used_and_left_open(
    daily: list[Path], make: Callable[[], Executor]
) -> None:
    with make() as executor:
        results = scan_many(daily, executor=executor, progress=False)
        assert list(results) == _serial(daily)
        assert executor.submit(len, "open").result() == 4  # not shut down by scan_many


def test_default_batches_go_to_the_pool(daily: list[Path]) -> None:
    many = daily * 5  # above the in-process threshold: a process pool
    results = scan_many(many, progress=False)
    assert list(results) == _serial(daily) * 5


def test_dask_cluster_equals_serial(daily: list[Path], dask_client: Any) -> None:
    results = scan_many(daily, executor=dask_client, batch_size=3, progress=False)
    assert list(results) == _serial(daily)


def test_dask_cluster_raise_names_the_file(
    daily: list[Path], dask_client: Any, tmp_path: Path
) -> None:
    missing = tmp_path / "gone.nc"
    with pytest.raises(SourceNotFoundError, match=r"gone\.nc: no such file"):
        scan_many([*daily, missing], executor=dask_client, batch_size=2, progress=False)


def _broken(tmp_path: Path) -> tuple[Path, Path]:
    missing = tmp_path / "missing.nc"
    corrupt = tmp_path / "corrupt.nc"
    corrupt.write_bytes(b"this is not an HDF5 file" * 10)
    return missing, corrupt


@pytest.mark.parametrize("executor", ["serial", "processes"])
def test_skip_lists_errors_with_file_names(
    daily: list[Path], tmp_path: Path, executor: str
) -> None:
    missing, corrupt = _broken(tmp_path)
    urls = [daily[0], missing, daily[1], corrupt, daily[2]]
    results = scan_many(urls, executor=executor, on_error="skip", batch_size=2, progress=False)
    assert list(results) == _serial(daily[:3])
    assert results.urls == (str(daily[0]), str(daily[1]), str(daily[2]))
    assert [failure.url for failure in results.errors] == [str(missing), str(corrupt)]
    assert results.errors[0].message.startswith("SourceNotFoundError: ")
    assert "not a format refzarr recognises" in results.errors[1].message


@pytest.mark.parametrize("executor", ["serial", "threads", "processes"])
def test_raise_names_the_file(daily: list[Path], tmp_path: Path, executor: str) -> None:
    _, corrupt = _broken(tmp_path)
    with pytest.raises(ScanError, match=r"corrupt\.nc"):
        scan_many([*daily, corrupt], executor=executor, batch_size=2, progress=False)


def test_error_without_the_file_name_is_wrapped(tmp_path: Path) -> None:
    from refzarr.parallel.batches import Failed

    cause = KeyError("x")
    error = Failed("a.nc", "KeyError: 'x'", cause).exception()
    assert isinstance(error, ScanError)
    assert str(error) == "a.nc: KeyError: 'x'"
    assert error.__cause__ is cause


def test_results_pickle(daily: list[Path], tmp_path: Path) -> None:
    missing, _ = _broken(tmp_path)
    results = scan_many([daily[0], missing], on_error="skip", progress=False)
    copy = pickle.loads(pickle.dumps(results))
    assert isinstance(copy, ScanResults)
    assert copy == results
    assert copy.errors == (ScanFailure(str(missing), results.errors[0].message),)
    assert copy[0] == results[0]
    assert len(copy) == 1


def test_scan_options_reach_every_file(daily: list[Path]) -> None:
    results = scan_many(daily[:2], executor="processes", inline_threshold=10_000, progress=False)
    assert list(results) == [refzarr.scan(p, inline_threshold=10_000) for p in daily[:2]]


def test_unknown_option_fails_before_scanning(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"unknown scan options \['colour'\]"):
        scan_many([tmp_path / "never-read.nc"], colour="red")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"executor": "rockets"}, "executor must be None, 'serial'"),
        ({"on_error": "warn"}, "on_error must be 'raise' or 'skip'"),
        ({"batch_size": 0}, "batch_size must be a positive int"),
    ],
)
def test_bad_arguments(daily: list[Path], kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        scan_many(daily[:1], progress=False, **kwargs)


def test_progress_bar_on_request(daily: list[Path], capsys: pytest.CaptureFixture[str]) -> None:
    scan_many(daily[:3], executor="serial", progress=True)
    err = capsys.readouterr().err
    assert "scanning" in err
    assert "3/3" in err


def test_no_progress_bar_off_a_terminal(
    daily: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    scan_many(daily[:2], executor="serial")
    assert capsys.readouterr().err == ""


def test_empty_list() -> None:
    results = scan_many([], progress=False)
    assert (list(results), results.errors) == ([], ())


def test_one_file_shows_its_arrays_as_they_are_scanned(
    daily: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A long scan of one file shows a count of arrays and groups, not a bar of one file."""
    results = scan_many(daily[:1], progress=True)
    shown = capsys.readouterr().err
    count = len(list(results[0].arrays()))
    assert f"scanning {daily[0].name}" in shown
    assert " arrays" in shown and f"{count}" in shown
    scan_many(daily[:2], progress=True, executor="serial")
    assert "2/2" in capsys.readouterr().err  # many files: the bar of files
