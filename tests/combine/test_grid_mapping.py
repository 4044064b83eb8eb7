"""Grid-mapping variables (CF ``grid_mapping``) in combine: kept once along a new dimension
without being listed, and refused, naming the files and the attribute, when the files'
CRS differ (along a new or an existing dimension; plain and extended ``grid_mapping``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from kit import daily, scan_all, write_nc

import refzarr
from refzarr import IncompatibleError

UTM33 = {"grid_mapping_name": "transverse_mercator", "longitude_of_central_meridian": 15.0}
UTM34 = {"grid_mapping_name": "transverse_mercator", "longitude_of_central_meridian": 21.0}


def _with_crs(ds: xr.Dataset, crs: dict[str, object], mapping: str = "crs") -> xr.Dataset:
    ds = ds.assign(crs=xr.DataArray(np.int32(0), attrs=crs))
    ds["air"].attrs["grid_mapping"] = mapping
    return ds


def _files(
    tmp_path: Path, crs: list[dict[str, object]], mapping: str = "crs", dim: str = "time"
) -> list[Path]:
    """Files following each other in time (``dim="time"``), else members of the same days."""
    step = 2 if dim == "time" else 0
    return [
        write_nc(
            _with_crs(daily(f"2000-01-{1 + step * k:02d}", 2, seed=k), c, mapping),
            tmp_path / f"m{k}.nc",
        )
        for k, c in enumerate(crs)
    ]


def test_kept_once_along_a_new_dimension(tmp_path: Path) -> None:
    paths = _files(tmp_path, [UTM33, UTM33], dim="member")
    members = refzarr.FromRegex(r"m(\d+)\.nc$")
    combined = refzarr.combine(scan_all(paths), concat_dims="member", coords={"member": members})
    assert combined["crs"].meta.shape == ()
    assert combined["air"].meta.shape[0] == 2
    assert refzarr.open_dataset(combined)["crs"].attrs["longitude_of_central_meridian"] == 15.0


@pytest.mark.parametrize("mapping", ["crs", "crs: lat lon"])
@pytest.mark.parametrize("dim", ["time", "member"])
def test_another_crs_is_refused(tmp_path: Path, mapping: str, dim: str) -> None:
    paths = _files(tmp_path, [UTM33, UTM34], mapping, dim)
    coords = {"member": refzarr.FromRegex(r"m(\d+)\.nc$")} if dim == "member" else None
    with pytest.raises(IncompatibleError, match="grid mapping 'crs' differs") as info:
        refzarr.combine(scan_all(paths), concat_dims=dim, coords=coords)
    message = str(info.value)
    assert "m0.nc" in message
    assert "m1.nc" in message
    assert "'longitude_of_central_meridian' is 15.0 in the first and 21.0" in message


def test_override_takes_the_first_unchecked(tmp_path: Path) -> None:
    paths = _files(tmp_path, [UTM33, UTM34])
    combined = refzarr.combine(scan_all(paths), concat_dims="time", compat="override")
    assert combined["crs"].meta.attributes["longitude_of_central_meridian"] == 15.0
