"""A path through a symbolic link to a directory and ``..`` (``link/../x.nc``) names the file
the system opens (next to the link's target), not the one ``os.path.abspath`` makes of the text
(next to the link): every scanner references, and the record of sources names, the file read."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest

import refzarr
from corpus import CORPUS
from refzarr.scan.paths import opened_path
from refzarr.sources.record import read_record


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """``real/sub`` and ``link -> real/sub``: ``link/..`` is ``real``, while its text says
    ``tmp_path``. Returns (``real``, ``link``)."""
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real / "sub", target_is_directory=True)
    return real, link


def _write(path: Path, file_format: str, scale: int) -> np.ndarray[Any, Any]:
    values = np.arange(12, dtype="f4").reshape(3, 4) * scale
    with netCDF4.Dataset(path, "w", format=file_format) as ds:
        ds.createDimension("y", 3)
        ds.createDimension("x", 4)
        ds.createVariable("v", "f4", ("y", "x"))[:] = values
    return values


def _referenced(group: refzarr.RefGroup) -> set[str]:
    refs = refzarr.to_kerchunk(group)  # version 0: keys -> values
    return {value[0] for value in refs.values() if isinstance(value, list)}


def test_opened_path(layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    real, link = layout
    tmp = real.parent
    assert os.path.abspath(f"{link}/../x.nc") == f"{tmp}/x.nc"  # the text's file
    assert opened_path(f"{link}/../x.nc") == f"{real}/x.nc"  # the system's
    assert opened_path(f"{link}/x.nc") == f"{link}/x.nc"  # no "..": spelling kept
    assert opened_path(f"{tmp}/./real//x.nc") == f"{real}/x.nc"
    assert opened_path(f"{link}/..") == str(real)
    assert opened_path(f"{tmp}/..hidden/x.nc") == f"{tmp}/..hidden/x.nc"
    monkeypatch.chdir(tmp)
    assert opened_path("link/../x.nc") == f"{real}/x.nc"
    assert opened_path("x.nc") == f"{tmp}/x.nc"


@pytest.mark.parametrize("file_format", ["NETCDF3_CLASSIC", "NETCDF4"])
@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_netcdf3_and_hdf5_reference_the_file_read(
    layout: tuple[Path, Path], file_format: str, relative: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file next to the link (what the text says) has other values at the same offsets:
    a reference to it would read them in silence."""
    real, link = layout
    expected = _write(real / "x.nc", file_format, 1)
    _write(real.parent / "x.nc", file_format, -7)
    monkeypatch.chdir(real.parent)
    url = "link/../x.nc" if relative else f"{link}/../x.nc"
    group = refzarr.scan(url)
    assert _referenced(group) == {str(real / "x.nc")}
    (record,) = read_record(group)
    assert record.url == str(real / "x.nc")
    assert set(record.files) == {str(real / "x.nc")}
    assert record.files[str(real / "x.nc")].size == (real / "x.nc").stat().st_size
    np.testing.assert_array_equal(refzarr.open_dataset(group)["v"].values, expected, strict=True)
    with open(url, "rb") as f:  # the file the system opens (netCDF-C, unlike h5py and the
        assert f.read() == (real / "x.nc").read_bytes()  # system, drops "link/.." as text)


CORPUS_FILES = {
    "tiff": ["float_nan.tif"],
    "fits": ["m13.fits"],
    "grib": ["fields_with_missing_values.grib"],
    "hdf4": ["sds_compressed.hdf"],
    "zarr": ["zarrs_datetime64_ns.zarr"],
    "dmrpp": ["chunked_gzipped_threeD.h5.dmrpp", "chunked_gzipped_threeD.h5"],
}
"""A corpus file of each other format (the first is scanned; the others go along)."""


@pytest.mark.parametrize("folder", CORPUS_FILES)
def test_every_scanner_references_the_file_read(layout: tuple[Path, Path], folder: str) -> None:
    real, link = layout
    names = CORPUS_FILES[folder]
    sources = [CORPUS / folder / name for name in names]
    if not all(p.exists() for p in sources):
        pytest.skip(f"the corpus has no {names}")
    for source in sources:
        copy = shutil.copytree if source.is_dir() else shutil.copyfile
        copy(source, real / source.name)
    group = refzarr.scan(f"{link}/../{names[0]}", format=folder, inline_threshold=0)
    referenced = _referenced(group)
    assert referenced
    inside = str(real / names[0]) if folder == "zarr" else None
    for url in referenced:
        if inside is not None:
            assert url.startswith(f"{inside}/"), url
        else:
            assert url == str(real / names[-1]), url
    assert set(read_record(group)[0].files) <= referenced | {str(real / names[0])}
