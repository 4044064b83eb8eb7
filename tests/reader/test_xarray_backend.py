"""refzarr.open_dataset and engine="refzarr": equal to xarray over the netCDF file and to the
zarr engine over fsspec; groups, DataTree, dask chunks aligned with the references."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dask.array as da
import pytest
import xarray as xr

import refzarr
from roundtrip import kerchunk_hdf5_refs, reference_options


@pytest.fixture
def refs(netcdf_file: Path) -> dict[str, Any]:
    return kerchunk_hdf5_refs(netcdf_file, inline_threshold=0)


def test_open_dataset_equals_the_netcdf_file(netcdf_file: Path, refs: dict[str, Any]) -> None:
    with xr.open_dataset(netcdf_file) as expected:
        xr.testing.assert_identical(refzarr.open_dataset(refs).load(), expected.load())


@pytest.mark.parametrize("suffix", [".json", ".json.zst", ".parq"])
def test_engine_opens_written_reference_sets(
    netcdf_file: Path, refs: dict[str, Any], tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"refs{suffix}"
    refzarr.write(refzarr.read(refs), path)
    with xr.open_dataset(netcdf_file) as expected:
        got = xr.open_dataset(path, engine="refzarr")
        xr.testing.assert_identical(got.load(), expected.load())


def test_engine_takes_a_group_object(netcdf_file: Path, refs: dict[str, Any]) -> None:
    # (engine guessing by suffix is not tested: kerchunk's own xarray backend also claims .json)
    group = refzarr.read(refs)
    with xr.open_dataset(netcdf_file) as expected:
        got = xr.open_dataset(group, engine="refzarr")  # type: ignore[arg-type]
        xr.testing.assert_identical(got.load(), expected.load())


def test_same_as_the_zarr_engine_through_fsspec(refs: dict[str, Any]) -> None:
    through_fsspec = xr.open_dataset(
        "reference://",
        engine="zarr",
        backend_kwargs={"storage_options": reference_options(refs), "consolidated": False},
    )
    xr.testing.assert_identical(refzarr.open_dataset(refs).load(), through_fsspec.load())


def test_group_and_datatree(netcdf_file: Path, refs: dict[str, Any]) -> None:
    group = refzarr.read(refs)
    got = refzarr.open_dataset(group, group="forecast")
    with xr.open_dataset(netcdf_file, group="forecast") as expected:
        # kerchunk names the group's dimension "forecast/step", so only values compare
        assert got["pressure"].values.tolist() == expected["pressure"].values.tolist()
    tree = refzarr.open_datatree(group)
    assert set(tree.children) == {"forecast"}
    xr.testing.assert_identical(tree["forecast"].to_dataset(inherit=False).load(), got.load())
    with pytest.raises(OSError, match="group not found"):  # as engine="netcdf4" (issue 13)
        refzarr.open_dataset(group, group="nope")


def test_dask_chunks_follow_the_references(netcdf_file: Path, refs: dict[str, Any]) -> None:
    got = refzarr.open_dataset(refs, chunks={})
    temperature = got["temperature"].data
    assert isinstance(temperature, da.Array)
    array = refzarr.read(refs)["temperature"]
    assert isinstance(array, refzarr.RefArray)
    assert all(
        set(sizes[:-1]) <= {chunk}
        for sizes, chunk in zip(temperature.chunks, array.meta.chunks, strict=True)
    )
    with xr.open_dataset(netcdf_file) as expected:
        xr.testing.assert_identical(got.compute(), expected.load())


def test_decoding_options_pass_through(netcdf_file: Path, refs: dict[str, Any]) -> None:
    got = refzarr.open_dataset(refs, decode_times=False, mask_and_scale=False)
    with xr.open_dataset(netcdf_file, decode_times=False, mask_and_scale=False) as expected:
        xr.testing.assert_identical(got.load(), expected.load())
