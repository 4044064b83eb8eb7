"""What a newcomer to the ``refzarr`` command trips on: source files given where a reference
set is expected, pipes closed early, unsupported arrays, formats named in the help."""

from __future__ import annotations

import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest
from clikit import installed_command

import refzarr
from refzarr.cli import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("command", ["info", "validate", "cat", "convert"])
def test_a_source_file_instead_of_references_says_to_scan_it(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path, command: str
) -> None:
    extra = {"cat": [".zgroup"], "convert": [str(tmp_path / "x.json")]}.get(command, [])
    status, out, err = _run(capsys, command, str(archive[0]), *extra)
    assert status == 1
    assert out == ""
    assert f"{archive[0]} is not a reference set but a HDF5 / netCDF4 file" in err
    assert f"refzarr scan {archive[0]} -o refs.json" in err
    assert "JSON" not in err


def test_info_into_a_closed_pipe_exits_quietly(refs_json: Path) -> None:
    with subprocess.Popen(
        [installed_command(), "info", str(refs_json)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()  # as `| head -0` would
        err = process.stderr.read()
        status = process.wait(timeout=120)
    assert err == b""
    assert status == 0


def _with_reference_attribute(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f["fine"] = np.arange(4, dtype="i4")
        f.create_dataset("ragged", shape=(2,), dtype=h5py.vlen_dtype(np.dtype("i4")))
    return path


def test_scan_on_unsupported_skip_lists_what_was_left_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = _with_reference_attribute(tmp_path / "u.h5")
    out_path = tmp_path / "u.json"
    status, _, err = _run(capsys, "scan", str(source), "-o", str(out_path))
    assert status == 1
    assert "'/ragged'" in err
    assert "--on-unsupported skip" in err
    assert not out_path.exists()
    status, _, err = _run(
        capsys, "scan", str(source), "-o", str(out_path), "--on-unsupported", "skip"
    )
    assert status == 0
    assert "left out /ragged:" in err
    assert sorted(refzarr.read(out_path).members) == ["fine"]


def test_scan_input_format_and_help_name_the_formats(
    capsys: pytest.CaptureFixture[str], archive: list[Path], tmp_path: Path
) -> None:
    out_path = tmp_path / "one.json"
    status, _, _ = _run(
        capsys, "scan", str(archive[0]), "-o", str(out_path), "--input-format", "hdf5"
    )
    assert status == 0
    assert refzarr.read(out_path) == refzarr.scan(archive[0])
    with pytest.raises(SystemExit):
        main(["scan", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for scan_format in refzarr.scan_formats():
        assert scan_format.title in help_text
        assert scan_format.name in help_text


def test_scan_of_a_text_file_names_its_first_bytes_and_the_formats(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = tmp_path / "notes.nc"
    text.write_text("just some notes")
    status, _, err = _run(capsys, "scan", str(text), "-o", str(tmp_path / "n.json"))
    assert status == 1
    assert "first bytes 6a 75 73 74" in err
    assert "HDF5 / netCDF4" in err


def _daily_netcdf3(path: Path, first_day: int) -> Path:
    import netCDF4

    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as f:
        f.createDimension("time", None)
        f.createDimension("x", 3)
        time = f.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time[:] = [first_day, first_day + 1]
        f.createVariable("v", "f4", ("time", "x"))[:] = np.ones((2, 3), "f4")
    return path


def test_files_along_time_without_concat_dim_are_told_their_unlimited_dimension(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sources = [_daily_netcdf3(tmp_path / f"d{k}.nc", 2 * k) for k in range(2)]
    out_path = tmp_path / "days.json"
    status, _, err = _run(capsys, "scan", *map(str, sources), "-o", str(out_path))
    assert status == 1
    assert "of the files. The files may be pieces along a dimension" in err
    assert "add --concat-dim time (the files' unlimited dimension)" in err
    assert not out_path.exists()


@pytest.mark.parametrize("command", ["info", "validate"])
def test_a_zarr_store_instead_of_references_says_to_scan_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str
) -> None:
    import zarr

    store = tmp_path / "store.zarr"
    zarr.open_group(store, mode="w", zarr_format=2).create_array("x", shape=(4,), dtype="i4")
    status, out, err = _run(capsys, command, str(store))
    assert status == 1
    assert out == ""
    assert f"{store} is not a reference set but a Zarr v2 / v3 store" in err
    assert f"refzarr scan {store} -o refs.json" in err
