"""``refzarr scan``: files and globs scanned, combined when several, written as JSON / Parquet."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr

import refzarr
from refzarr.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_one_file(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path, suffix: str
) -> None:
    out_path = tmp_path / f"one{suffix}"
    status, out, err = _run(capsys, "scan", archive[0], "-o", out_path)
    assert (status, err) == (0, "")
    assert out == f"{out_path}: 1 file\n"
    assert refzarr.read(out_path) == refzarr.scan(archive[0])


def test_options_reach_the_scanner(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    out_path = tmp_path / "refs.txt"
    argv = ["scan", archive[0], "-o", out_path, "--format", "json", "--inline-threshold", "100"]
    assert _run(capsys, *argv)[0] == 0
    assert refzarr.read(out_path) == refzarr.scan(archive[0], inline_threshold=100)
    argv = ["scan", archive[0], "-o", out_path, "--format", "json", "--inline-coordinates", "0"]
    assert _run(capsys, *argv)[0] == 0
    assert refzarr.read(out_path) == refzarr.scan(archive[0], inline_coordinates=0)
    assert refzarr.read(out_path) != refzarr.scan(archive[0])


@pytest.mark.parametrize("workers", [["--workers", "1"], ["--workers", "2"], []])
def test_glob_concat_equals_open_mfdataset(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path, workers: list[str]
) -> None:
    out_path = tmp_path / "all.parq"
    pattern = str(archive[0].parent / "air_*.nc")
    status, out, _ = _run(capsys, "scan", pattern, "--concat-dim", "time", "-o", out_path, *workers)
    assert status == 0
    assert out == f"{out_path}: 4 files along time\n"
    with (
        refzarr.open_dataset(refzarr.read(out_path)) as ours,
        xr.open_mfdataset(archive, combine="by_coords") as theirs,
    ):
        xr.testing.assert_identical(ours.load(), theirs.load())


def test_coord_regex(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    out_path = tmp_path / "all.json"
    argv = ["scan", *archive, "--concat-dim", "time", "--coord-regex", r"time=_(\d{8})\.nc"]
    assert _run(capsys, *argv, "-o", out_path)[0] == 0
    # numbers from file names are not in the files' time units: written without them
    with refzarr.open_dataset(refzarr.read(out_path)) as ds:
        assert ds["air"].shape[0] == 4
        assert ds["time"].values.tolist() == [20200101, 20200102, 20200103, 20200104]
        assert "units" not in ds["time"].attrs


def test_coord_format_gives_dates(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    """``--coord-format time=%Y%m%d`` reads the names' digits as dates: the same dataset as
    open_mfdataset (the dates written in the files' own time units)."""
    out_path = tmp_path / "all.json"
    regex = r"time=_(?P<time>\d{8})\.nc"
    argv = ["scan", *archive, "--concat-dim", "time", "--coord-regex", regex]
    assert _run(capsys, *argv, "--coord-format", "time=%Y%m%d", "-o", out_path)[0] == 0
    with (
        xr.open_dataset(out_path, engine="refzarr") as ours,
        xr.open_mfdataset(archive, combine="by_coords") as theirs,
    ):
        xr.testing.assert_identical(ours.load(), theirs.load())
        assert ours["time"].encoding["units"] == "days since 2020-01-01"


def test_skip_errors_lists_the_files(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.nc"
    bad.write_bytes(b"not HDF5" * 20)
    out_path = tmp_path / "all.json"
    argv = ["scan", *archive, bad, "--concat-dim", "time", "--skip-errors", "-o", out_path]
    status, out, err = _run(capsys, *argv)
    assert status == 0
    assert err.startswith(f"refzarr: skipped {bad}: ")
    assert err.count(str(bad)) == 1  # the path once (issue 13)
    assert out == f"{out_path}: 4 files along time, 1 skipped\n"


def test_files_differing_along_a_dimension_suggest_concat_dim(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    status, out, err = _run(capsys, "scan", *archive[:2], "-o", tmp_path / "x.json")
    assert (status, out) == (1, "")
    assert "--concat-dim" in err


def test_failure_names_the_file(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.nc"
    bad.write_bytes(b"not HDF5" * 20)
    target = tmp_path / "x.json"
    status, out, err = _run(capsys, "scan", archive[0], bad, "--concat-dim", "time", "-o", target)
    assert (status, out) == (1, "")
    assert err.startswith(f"refzarr: error: {bad}: ")
    assert err.count("\n") == 1
    assert not target.exists()


def _rhum(archive: list[Path], folder: Path) -> list[Path]:
    """Each archive file copied with ``air`` renamed ``rhum``: another variable, same grid."""
    paths = []
    for path in archive:
        copy = Path(shutil.copy(path, folder / path.name.replace("air", "rhum")))
        with netCDF4.Dataset(copy, "a") as nc:
            nc.renameVariable("air", "rhum")
        paths.append(copy)
    return paths


def test_summary_says_what_combine_did(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    rhum = _rhum(archive, tmp_path)
    out_path = tmp_path / "both.json"
    files = [*archive, *rhum]
    status, out, _ = _run(capsys, "scan", *files, "--concat-dim", "time", "-o", out_path)
    assert (status, out) == (0, f"{out_path}: 8 files along time, 2 sets of variables merged\n")
    assert set(refzarr.open_dataset(refzarr.read(out_path)).data_vars) == {"air", "rhum"}
    status, out, _ = _run(capsys, "scan", archive[0], rhum[0], "-o", out_path)
    assert (status, out) == (0, f"{out_path}: 2 files merged\n")


def test_sets_that_do_not_line_up_fail_naming_files(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    """One mislabelled file (another variable on another day): no silent merge."""
    odd = _rhum(archive[:1], tmp_path)[0]
    argv = ["scan", *archive[1:], odd, "--concat-dim", "time", "-o", tmp_path / "o.json"]
    status, out, err = _run(capsys, *argv)
    assert (status, out) == (1, "")
    assert "along 'time' the sets do not line up" in err
    assert f"1 file ({odd}) holding rhum" in err
    assert "3 files (" in err
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["{tmp}/nothing_*.nc", "-o", "{tmp}/o.json"], "nothing_*.nc: no files match"),
        (["{tmp}/absent.nc", "-o", "{tmp}/o.json"], "absent.nc: no such file"),
    ],
)
def test_missing_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    status, _, err = _run(capsys, "scan", *(a.format(tmp=tmp_path) for a in argv))
    assert status == 1
    assert message in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-o", "o.txt"], "pass --format json or --format parquet"),
        (["-o", "o.json", "--coord-regex", "time"], "expected DIM=REGEX"),
        (["-o", "o.json", "--coord-regex", "time=("], "not a regular expression"),
        (["-o", "o.json", "--coord-regex", "x=a"], "'x' is not a --concat-dim"),
        (["-o", "o.json", "--coord-format", "%Y"], "expected DIM=FORMAT"),
        (["-o", "o.json", "--coord-format", "time=%Y"], "no --coord-regex for 'time'"),
        (
            ["-o", "o.json", "--coord-regex", "time=(\\d+)", "--coord-format", "time=YYYYMMDD"],
            "'YYYYMMDD' is no strptime format",
        ),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str], archive: list[Path], argv: list[str], message: str
) -> None:
    status, _, err = _run(capsys, "scan", archive[0], "--concat-dim", "time", *argv)
    assert status == 2
    assert message in err


def test_workers_and_scheduler_exclude_each_other(
    capsys: pytest.CaptureFixture[str], archive: list[Path]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["scan", str(archive[0]), "-o", "o.json", "--workers", "2", "--scheduler", "x:1"])
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_concat_dims_split_on_commas() -> None:
    from refzarr.cli.scan import _names

    assert _names(["time", "member, level", ""]) == ["time", "member", "level"]
    assert np.array_equal(_names([]), [])


@pytest.mark.parametrize("as_file", [False, True], ids=["json", "@file"])
def test_storage_options_reach_files_and_output(
    capsys: pytest.CaptureFixture[str],
    archive: list[Path],
    tmp_path: Path,
    s3: tuple[str, dict[str, Any]],
    as_file: bool,
) -> None:
    import fsspec

    bucket, options = s3
    fs = fsspec.filesystem("s3", skip_instance_cache=True, **options)
    for path in archive:
        fs.put_file(str(path), f"{bucket}/days/{path.name}")
    text = json.dumps(options)
    if as_file:
        (tmp_path / "options.json").write_text(text)
        text = f"@{tmp_path / 'options.json'}"
    out_url = f"s3://{bucket}/all.json"
    argv = ["scan", f"s3://{bucket}/days/air_*.nc", "--concat-dim", "time", "-o", out_url]
    status, out, err = _run(capsys, *argv, "--storage-options", text, "--workers", "1")
    assert (status, err) == (0, "")
    assert out == f"{out_url}: 4 files along time\n"
    refs = refzarr.read(out_url, storage_options=options)
    with (
        refzarr.open_dataset(refs, storage_options=options) as ours,
        xr.open_mfdataset(archive, combine="by_coords") as theirs,
    ):
        xr.testing.assert_identical(ours.load(), theirs.load())


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("{nope", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        ("@/no/such.json", "cannot read"),
    ],
)
def test_bad_storage_options_are_usage_errors(
    capsys: pytest.CaptureFixture[str],
    archive: list[Path],
    tmp_path: Path,
    given: str,
    message: str,
) -> None:
    out_path = tmp_path / "never.json"
    with pytest.raises(SystemExit) as exited:
        main(["scan", str(archive[0]), "-o", str(out_path), "--storage-options", given])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert not out_path.exists()
