"""Forecast runs every 6 hours appended to Parquet and Icechunk sets: what a dashboard reads,
and the errors for a run that does not fit (a missing step, another grid, a repository read
as a reference set)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from gribkit import grib_variant

import refzarr
import refzarr.scan.grib.scanner
from refzarr.cli import main
from refzarr.codecs.grib_eccodes import load_eccodes
from refzarr.errors import RefFormatError, ScanError

PARAMS = {"t": (0, 0, 0), "u": (0, 2, 2)}  # discipline, parameterCategory, parameterNumber


def _message(date: int, hour: int, step: int, param: tuple[int, int, int], half: bool) -> bytes:
    discipline, category, number = param
    data = grib_variant(
        date, step, dataTime=hour * 100, discipline=discipline, parameterCategory=category,
        parameterNumber=number, typeOfFirstFixedSurface=1, scaleFactorOfFirstFixedSurface=0,
        scaledValueOfFirstFixedSurface=0, typeOfSecondFixedSurface=255,
    )  # fmt: skip
    if not half:
        return data
    eccodes = load_eccodes()  # another grid: the western half
    handle = eccodes.codes_new_from_message(data)
    try:
        values = eccodes.codes_get_values(handle).reshape(361, 720)[:, :360].copy()
        eccodes.codes_set(handle, "Ni", 360)
        eccodes.codes_set(handle, "longitudeOfLastGridPointInDegrees", 179.5)
        eccodes.codes_set_values(handle, values.ravel())
        return bytes(eccodes.codes_get_message(handle))
    finally:
        eccodes.codes_release(handle)


def _run(
    where: Path, hour: int, steps: tuple[int, ...] = (0, 3, 6), half: bool = False, tag: str = ""
) -> str:
    parts = [_message(20250101, hour, s, p, half) for s in steps for p in PARAMS.values()]
    path = where / f"run_20250101{hour:02d}{tag}.grib2"
    path.write_bytes(b"".join(parts))
    return str(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    where = tmp_path_factory.mktemp("runs")
    return {
        "00": _run(where, 0),
        "06": _run(where, 6),
        "12": _run(where, 12),
        "missing_step": _run(where, 18, steps=(0, 6), tag="a"),
        "other_grid": _run(where, 18, half=True, tag="b"),
    }


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def sets(runs: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Runs 00 and 06 scanned, then run 12 appended, as Parquet and as Icechunk."""
    where = tmp_path_factory.mktemp("sets")
    out = {"parquet": str(where / "fc.parq"), "icechunk": str(where / "fc.icechunk")}
    for fmt, path in out.items():
        assert main(["scan", runs["00"], runs["06"], "--concat-dim", "time", "-o", path,
                     "--format", fmt]) == 0  # fmt: skip
        assert main(["scan", runs["12"], "--append-dim", "time", "-o", path, "--format", fmt]) == 0
    return out


def test_latest_run_equals_cfgrib(runs: dict[str, str], sets: dict[str, str]) -> None:
    theirs = xr.open_dataset(runs["12"], engine="cfgrib", backend_kwargs={"indexpath": ""})
    for name in PARAMS:
        ours = refzarr.open_dataset(sets["parquet"], group=f"{name}/instant/surface")
        expected = np.array(["2025-01-01T00", "2025-01-01T06", "2025-01-01T12"], "M8[ns]")
        np.testing.assert_array_equal(ours.time.values, expected)
        latest = ours.isel(time=-1)
        assert latest.time.values == theirs.time.values
        np.testing.assert_array_equal(latest.step.values, theirs.step.values)
        np.testing.assert_array_equal(latest.valid_time.values, theirs.valid_time.values)
        assert latest[name].dtype == theirs[name].dtype
        np.testing.assert_array_equal(latest[name].values, theirs[name].values)


@pytest.mark.parametrize("run", ["missing_step", "other_grid"])
def test_parquet_append_names_the_dimensions(
    runs: dict[str, str], sets: dict[str, str], run: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _cli(capsys, "scan", runs[run], "--append-dim", "time", "-o", sets["parquet"])
    assert code != 0
    assert "shape along (step, latitude, longitude) differs" in err, err


def test_icechunk_append_of_a_run_missing_a_step_names_step(
    runs: dict[str, str], sets: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _cli(capsys, "scan", runs["missing_step"], "--append-dim", "time",
                     "-o", sets["icechunk"], "--format", "icechunk")  # fmt: skip
    assert code != 0
    assert "it differs along 'step'" in err, err


def test_reading_an_icechunk_repository_as_a_set_says_what_it_is(sets: dict[str, str]) -> None:
    with pytest.raises(RefFormatError, match="is an Icechunk repository, not a reference set"):
        refzarr.open_dataset(sets["icechunk"], group="t/instant/surface")


def test_a_grid_whose_shape_does_not_hold_its_points_is_a_scan_error(tmp_path: Path) -> None:
    path = tmp_path / "bad_grid.grib2"  # Ni changed alone: 361 x 360 points, 259920 values
    path.write_bytes(grib_variant(20250101, 0, Ni=360))
    with pytest.raises(ScanError, match=r"message 0 .*Ny x Nx = 361 x 360 = 129960 points"):
        refzarr.scan(str(path), format="grib")
