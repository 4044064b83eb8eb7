"""Many sidecars: `scan_many` and `combine` take them like any file, and give the dataset the
data files themselves give."""

from __future__ import annotations

from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr
from dmrppkit import write_sidecar
from fsspec.implementations.local import LocalFileSystem

import refzarr
from refzarr.cli import main
from refzarr.errors import ChunkFetchError, ScanError


def _day(path: Path, day: int) -> None:
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", 1)
        nc.createDimension("x", 6)
        t = nc.createVariable("time", "f8", ("time",))
        t[:] = [day]
        t.units = "days since 2000-01-01"
        v = nc.createVariable("air", "f4", ("time", "x"), zlib=True, chunksizes=(1, 3))
        v[:] = np.arange(6, dtype="f4") + 10 * day
        v.units = "K"


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("days")
    paths = []
    for day in (2, 0, 1):
        path = folder / f"day{day}.nc"
        _day(path, day)
        write_sidecar(path)
        paths.append(path)
    return paths


@pytest.mark.parametrize("executor", ["serial", "threads"])
def test_scan_many_and_combine(days: list[Path], executor: str) -> None:
    sidecars = [f"{p}.dmrpp" for p in days]
    scanned = refzarr.scan_many(sidecars, executor=executor, progress=False)
    combined = refzarr.combine(list(scanned), concat_dims="time")
    direct = refzarr.combine([refzarr.scan(str(p)) for p in days], concat_dims="time")
    assert combined == direct
    ds = refzarr.open_dataset(combined)
    days_since = ds["time"].values - np.datetime64("2000-01-01")
    np.testing.assert_array_equal(days_since.astype("timedelta64[D]").astype(int), [0, 1, 2])
    np.testing.assert_array_equal(ds["air"].values[:, 0], [0, 10, 20])


@pytest.fixture(scope="module")
def apart(days: list[Path], tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The sidecars of ``days`` in a folder of their own, away from the data files; their
    ``dmrpp:href`` is the data file's ``file://`` URL."""
    folder = tmp_path_factory.mktemp("sidecars")
    return [write_sidecar(p, folder / f"{p.name}.dmrpp", href=p.as_uri()) for p in days]


@pytest.mark.parametrize("template", ["{folder}/{{name}}", "{{href}}"])
def test_data_url_template_for_sidecars_apart(
    days: list[Path], apart: list[Path], template: str
) -> None:
    data_url = template.format(folder=days[0].parent)
    scanned = refzarr.scan_many([str(p) for p in apart], data_url=data_url, progress=False)
    combined = refzarr.combine(list(scanned), concat_dims="time")
    direct = refzarr.combine([refzarr.scan(str(p)) for p in days], concat_dims="time")
    assert combined == direct


def test_data_url_href_must_be_a_url(days: list[Path]) -> None:
    with pytest.raises(ScanError, match=r"dmrpp:href, but it is 'data/x.h5', not an absolute"):
        refzarr.scan(f"{days[0]}.dmrpp", data_url="{href}")


def test_cli_data_url(days: list[Path], apart: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "days.parq"
    sidecars = str(apart[0].parent / "*.dmrpp")
    args = ["scan", sidecars, "--concat-dim", "time", "--data-url", f"{days[0].parent}/{{name}}"]
    assert main([*args, "-o", str(out), "--workers", "1"]) == 0
    with (
        xr.open_mfdataset(sorted(days), combine="nested", concat_dim="time") as truth,
        refzarr.open_dataset(out) as ours,
    ):
        xr.testing.assert_identical(ours.load(), truth.load())


def test_one_fixed_data_url_for_many_sidecars_is_refused(
    days: list[Path], apart: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every sidecar would read its chunks from the one file named: wrong for all but one."""
    one = str(days[0])
    with pytest.raises(ValueError, match=r"names one data file for \d+ files.*\{name\}"):
        refzarr.scan_many([str(p) for p in apart], data_url=one, progress=False)
    out = tmp_path / "days.json"
    args = ["scan", str(apart[0].parent / "*.dmrpp"), "--concat-dim", "time", "--data-url", one]
    assert main([*args, "-o", str(out)]) != 0
    assert "--data-url" in capsys.readouterr().err
    assert not out.exists()
    refzarr.scan_many([str(apart[0])], data_url=one, progress=False)  # one sidecar: its file


def test_missing_data_file_named_with_its_sidecar(days: list[Path], apart: list[Path]) -> None:
    """Scanning needs the sidecar only; combining along time reads the time coordinates from
    the data files, and a missing one is named with the sidecar and the variable."""
    scanned = refzarr.scan_many([str(p) for p in apart], inline_coordinates=0, progress=False)
    with pytest.raises(ChunkFetchError, match=rf"{apart[0].name}: time \(chunk 0\)"):
        refzarr.combine(scanned, concat_dims="time")


def test_cli_skips_sidecars_without_data_file(
    days: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--check-data-file --skip-errors``: a sidecar whose data file is missing is left out
    at scan time (without it, only reading its values finds the file missing)."""
    lonely = write_sidecar(days[0], tmp_path / "day9.nc.dmrpp")  # no day9.nc beside it
    sidecars = [f"{p}.dmrpp" for p in days]
    out = tmp_path / "days.json"
    args = ["scan", *sidecars, str(lonely), "--concat-dim", "time", "-o", str(out)]
    assert main([*args, "--check-data-file", "--skip-errors", "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert f"skipped {lonely}: ScanError: variable '/time': the data file" in err
    assert f"the data file {tmp_path / 'day9.nc'} does not exist" in err
    assert refzarr.open_dataset(out).sizes["time"] == 3


def test_check_data_file_refuses_another_kind_of_file(days: list[Path], tmp_path: Path) -> None:
    """A wrong ``data_url`` (here: the sidecar itself) reads garbage in silence; with
    ``check_data_file`` the data file must start as an HDF5, HDF4 or netCDF file."""
    sidecar = f"{days[0]}.dmrpp"
    with pytest.raises(ScanError, match=r"is no HDF5, HDF4 or netCDF file \(it starts with"):
        refzarr.scan(sidecar, data_url=sidecar, check_data_file=True)
    block = tmp_path / "user_block.nc"  # an HDF5 file after a 1024-byte user block
    block.write_bytes(b"\0" * 1024 + days[0].read_bytes())
    refzarr.scan(sidecar, data_url=str(block), check_data_file=True, inline_coordinates=0)


def test_check_data_file_asks_each_size_once(
    days: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One size request per data file, not one per variable (``time`` and ``air`` here)."""
    asked: list[str] = []
    size = LocalFileSystem.size

    def counted(self: LocalFileSystem, path: str) -> int:
        asked.append(path)
        return int(size(self, path))

    monkeypatch.setattr(LocalFileSystem, "size", counted)
    refzarr.scan(f"{days[0]}.dmrpp", check_data_file=True)
    assert asked == [str(days[0])]


def test_relative_data_url_is_recorded_absolute(
    days: list[Path], apart: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan record keeps the options for `refresh`, which may run from another folder."""
    monkeypatch.chdir(days[0].parent.parent)
    group = refzarr.scan(str(apart[0]), data_url=f"{days[0].parent.name}/{{name}}")
    assert group.sources is not None
    assert group.sources["scans"][0]["options"]["data_url"] == f"{days[0].parent}/{{name}}"
    assert group["air"].manifest.paths == (str(days[0]),)  # type: ignore[union-attr]
