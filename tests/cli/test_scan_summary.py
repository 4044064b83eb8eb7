"""The summary line of ``refzarr scan`` says what happened: appended (along what, the length
before and after) or a new set, the dimension even for one file, files skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import xarray as xr

import refzarr
from refzarr.cli import main
from refzarr.cli.scan_summary import Appended, appended_lengths, summary
from refzarr.parallel import ScanFailure, ScanResults


def _scan(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    assert main(["scan", *map(str, argv)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def _opened(output: Path, suffix: str) -> xr.Dataset:
    if suffix == "icechunk":
        import icechunk

        from refzarr.formats.icechunk.repository import container_credentials

        prefix = output.parent.joinpath("archive").as_uri() + "/"
        repo = icechunk.Repository.open(
            icechunk.local_filesystem_storage(str(output)),
            authorize_virtual_chunk_access=container_credentials([prefix]),
        )
        return xr.open_zarr(repo.readonly_session("main").store, consolidated=False)
    return refzarr.open_dataset(refzarr.read(output))


@pytest.mark.parametrize("suffix", ["json", "parq", "icechunk"])
def test_an_append_says_so_with_the_new_length(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str
) -> None:
    from dailykit import write_days

    days = write_days(tmp_path / "archive", 5)
    output = tmp_path / f"set.{suffix}" if suffix != "icechunk" else tmp_path / "repo"
    to = ["-o", output, *(["--format", "icechunk"] if suffix == "icechunk" else [])]
    said = _scan(capsys, *days[:2], "--concat-dim", "time", *to)
    assert said == f"{output}: 2 files along time\n"
    said = _scan(capsys, *days[2:4], "--append-dim", "time", *to)
    assert said == f"{output}: 2 files appended along time (length 2 -> 4)\n"
    said = _scan(capsys, days[4], "--append-dim", "time", *to)
    assert said == f"{output}: 1 file appended along time (length 4 -> 5)\n"
    with _opened(output, suffix) as ds:
        assert ds.sizes["time"] == 5


@pytest.mark.parametrize("suffix", ["json", "parq", "icechunk"])
def test_an_append_to_nothing_says_it_made_a_new_set(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str
) -> None:
    """``--append-dim`` where nothing is yet writes a new set (an Icechunk repository too:
    the append to an empty repository failed, "array 'time' is not in the Icechunk store")."""
    from dailykit import write_days

    days = write_days(tmp_path / "archive", 2)
    output = tmp_path / f"set.{suffix}" if suffix != "icechunk" else tmp_path / "repo"
    to = ["-o", output, *(["--format", "icechunk"] if suffix == "icechunk" else [])]
    said = _scan(capsys, *days, "--append-dim", "time", *to)
    assert said == f"{output}: 2 files along time (new set)\n"
    with _opened(output, suffix) as ds:
        assert ds.sizes["time"] == 2


def test_one_file_names_the_dimension(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.nc"
    bad.write_bytes(b"not HDF5" * 20)
    output = tmp_path / "one.json"
    argv = ["scan", archive[0], bad, "--concat-dim", "time", "--skip-errors", "-o", output]
    assert main(list(map(str, argv))) == 0
    assert capsys.readouterr().out == f"{output}: 1 file along time, 1 skipped\n"
    regex = ["--coord-regex", r"time=_(\d{8})\.nc"]
    said = _scan(capsys, archive[0], "--concat-dim", "time", *regex, "-o", output)
    assert said == f"{output}: 1 file along time\n"
    assert _scan(capsys, archive[0], "-o", output) == f"{output}: 1 file\n"


def _results(files: int, *, indexed: int = 0, skipped: int = 0) -> ScanResults:
    group = refzarr.RefGroup()
    urls = tuple(f"f{k}.grib2" for k in range(files))
    errors = tuple(ScanFailure(f"bad{k}", "ScanError: x") for k in range(skipped))
    return ScanResults((group,) * files, urls, errors, urls[files - indexed :])


@pytest.mark.parametrize(
    ("results", "dims", "how", "said"),
    [
        (_results(3), ["time"], {}, "3 files along time"),
        (_results(2), [], {}, "2 files merged"),
        (_results(1, skipped=1), ["time"], {}, "1 file along time, 1 skipped"),
        (
            _results(1_200, indexed=1_199, skipped=2),
            ["time"],
            {"from_sidecars": True},
            "1,200 files along time, 1,199 from .idx sidecars, 1 scanned whole, 2 skipped",
        ),
        (
            _results(3),
            ["time"],
            {"from_sidecars": True},
            "3 files along time, 0 from .idx sidecars, 3 scanned whole",
        ),
        (
            _results(4),
            ["member", "time"],
            {"appended": Appended("time", 2, 4)},
            "4 files along member, appended along time (length 2 -> 4)",
        ),
        (_results(2), ["time"], {"appended": Appended("time")}, "2 files appended along time"),
        (
            _results(2),
            ["time"],
            {"appended": Appended("time", 0, 2)},
            "2 files along time (new set)",
        ),
    ],
)
def test_summary_lines(
    results: ScanResults, dims: list[str], how: dict[str, object], said: str
) -> None:
    assert summary("out.parq", results, dims, **how) == f"out.parq: {said}"  # type: ignore[arg-type]


def test_lengths_from_what_the_write_says(archive: list[Path]) -> None:
    """The write's result gives the length after; the appended data's own length the one
    before (1 for a file without the dimension: stacked along it); nothing is read back."""
    from refzarr.formats.written import WriteResult

    said = WriteResult("s.json", "json", {"time": 7}, append_dim="time", appended=True)
    assert appended_lengths(refzarr.RefGroup(), said) == Appended("time", 6, 7)
    scans = [refzarr.scan(path) for path in archive]
    two = refzarr.combine(scans[:2], concat_dims="time")
    assert appended_lengths(two, said) == Appended("time", 5, 7)
    new = WriteResult("s.json", "json", {"time": 2}, append_dim="time")
    assert appended_lengths(two, new) == Appended("time", 0, 2)
    unknown = WriteResult("s.json", "json", {"x": 2}, append_dim="time", appended=True)
    assert appended_lengths(two, unknown) == Appended("time")


def test_an_append_on_s3_says_the_length(
    capsys: pytest.CaptureFixture[str], archive: list[Path], s3: tuple[str, dict[str, Any]]
) -> None:
    import json

    import fsspec

    bucket, options = s3
    fs = fsspec.filesystem("s3", **options)
    for path in archive:
        fs.put_file(str(path), f"{bucket}/days/{path.name}")
    days = [f"s3://{bucket}/days/{path.name}" for path in archive]
    output = f"s3://{bucket}/all.json"
    common = ["-o", output, "--storage-options", json.dumps(options), "--workers", "1"]
    said = _scan(capsys, *days[:3], "--concat-dim", "time", *common)
    assert said == f"{output}: 3 files along time\n"
    said = _scan(capsys, days[3], "--append-dim", "time", *common)
    assert said == f"{output}: 1 file appended along time (length 3 -> 4)\n"
