"""kerchunk's references for netCDF4 files -> refzarr.read -> refzarr.write, checked end to end.

Each rewritten set must (a) return, through fsspec's ReferenceFileSystem, the bytes of every key
of kerchunk's original set, metadata keys included, (b) give zarr-python 3 exactly h5py's
values and dtypes, and (c) open in xarray as the same dataset as the netCDF file itself.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import refzarr
from roundtrip import (
    KerchunkCase,
    assert_arrays_match_h5,
    assert_groups_identical,
    assert_raw_xarray_matches_h5,
    assert_refs_equivalent,
    assert_xarray_matches_netcdf,
    kerchunk_hdf5_refs,
)

pytestmark = pytest.mark.filterwarnings(
    # fsspec's LazyReferenceMapper reads Parquet references with pandas' fastparquet engine,
    # which pandas 3 deprecates; it is the path xarray users take, so it is the one we test
    "ignore:The 'fastparquet' engine is deprecated:pandas.errors.Pandas4Warning"
)

# (file name, write options): every format refzarr writes
OUTPUTS = [
    pytest.param(("rewritten.json", {}), id="json"),
    pytest.param(("rewritten.json.zst", {}), id="json.zst"),
    pytest.param(("rewritten.parq", {}), id="parquet"),
    pytest.param(("rewritten.parq", {"record_size": 3}), id="parquet-3-per-file"),
]


@pytest.fixture(params=["dict", "ujson-file"])
def source(request: pytest.FixtureRequest, kerchunk_case: KerchunkCase, tmp_path: Path) -> Any:
    """kerchunk's references as refzarr.read receives them: the dict, or a JSON file."""
    if request.param == "dict":
        return kerchunk_case.refs
    return kerchunk_case.write_json(tmp_path / "kerchunk.json")


@pytest.fixture(params=OUTPUTS)
def rewritten(request: pytest.FixtureRequest, source: Any, tmp_path: Path) -> Path:
    """The reference set refzarr writes after reading kerchunk's."""
    name, options = request.param
    target = tmp_path / name
    refzarr.write(refzarr.read(source), target, **options)
    return target


# -- the originals: the kit and kerchunk agree before refzarr is involved -----------------------


def test_kerchunk_original_reads_like_the_netcdf_file(kerchunk_case: KerchunkCase) -> None:
    assert_arrays_match_h5(kerchunk_case.refs, kerchunk_case.netcdf)
    assert_xarray_matches_netcdf(kerchunk_case.refs, kerchunk_case.netcdf)


def test_fixture_holds_what_the_round_trip_must_preserve(kerchunk_case: KerchunkCase) -> None:
    refs = kerchunk_case.refs["refs"]
    assert "sparse/1.0" not in refs  # a chunk the file never wrote
    assert "sparse/0.0" in refs
    inlined = [k for k, v in refs.items() if not isinstance(v, list) and ".z" not in k]
    assert bool(inlined) == bool(kerchunk_case.inline_threshold)
    assert any(isinstance(v, list) for v in refs.values())
    assert "m\\/s" in refs["wind_speed/.zattrs"]  # ujson's escaping, which refzarr must match


# -- (a) fsspec: every key byte-identical -------------------------------------------------------


def test_every_key_returns_the_same_bytes(kerchunk_case: KerchunkCase, rewritten: Path) -> None:
    assert_refs_equivalent(kerchunk_case.refs, rewritten)


def test_reading_the_rewritten_set_gives_the_same_group(
    kerchunk_case: KerchunkCase, rewritten: Path
) -> None:
    assert_groups_identical(refzarr.read(rewritten), refzarr.read(kerchunk_case.refs))


# -- (b) zarr-python 3 against h5py -------------------------------------------------------------


def test_zarr_reads_the_values_h5py_reads(kerchunk_case: KerchunkCase, rewritten: Path) -> None:
    assert_arrays_match_h5(rewritten, kerchunk_case.netcdf)


# -- (c) xarray against the netCDF file ---------------------------------------------------------


def test_xarray_opens_the_same_dataset(kerchunk_case: KerchunkCase, rewritten: Path) -> None:
    assert_xarray_matches_netcdf(rewritten, kerchunk_case.netcdf)


def test_xarray_undecoded_values_are_h5pys(kerchunk_case: KerchunkCase, rewritten: Path) -> None:
    """The comparison the kit falls back to without h5netcdf."""
    assert_raw_xarray_matches_h5(rewritten, kerchunk_case.netcdf)
    assert_raw_xarray_matches_h5(rewritten, kerchunk_case.netcdf, "forecast")


def test_xarray_opens_the_same_nested_group(kerchunk_case: KerchunkCase, rewritten: Path) -> None:
    # kerchunk names the group's dimension "forecast/step" where netCDF says "step"
    assert_xarray_matches_netcdf(rewritten, kerchunk_case.netcdf, "forecast", check_dims=False)


# -- file names -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["données été 2024.nc", "データ#1.nc"])
@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_unicode_source_file_names(
    make_netcdf: Callable[..., Path], tmp_path: Path, name: str, suffix: str
) -> None:
    netcdf = make_netcdf(name)
    refs = kerchunk_hdf5_refs(netcdf, inline_threshold=0)
    target = tmp_path / f"refs{suffix}"
    refzarr.write(refzarr.read(refs), target)
    assert_refs_equivalent(refs, target)
    assert_arrays_match_h5(target, netcdf)
