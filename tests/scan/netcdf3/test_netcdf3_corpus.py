"""Every netCDF3 file of the corpus reads back exactly as netCDF4-python reads it (raw), through
refzarr's store and through fsspec + zarr on JSON and Parquet, with the layout of FORMATS.md;
xarray's decoded view through refzarr equals ``xr.open_dataset(file)``."""

from __future__ import annotations

from pathlib import Path

import pytest
from nc3kit import assert_decoded_matches, assert_group_matches, assert_values_match, read_truth

import refzarr
from corpus import corpus_files
from refzarr.scan import ScannedGroup

FILES = corpus_files("netcdf3")

pytestmark = pytest.mark.skipif(not FILES, reason="no netCDF3 corpus")
# fsspec reads Parquet reference sets with fastparquet by default
FASTPARQUET = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")


def test_corpus_has_every_file() -> None:
    assert len(FILES) == 7


@FASTPARQUET
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_file_matches_netcdf4(path: Path, tmp_path: Path) -> None:
    group = refzarr.scan(path)
    assert isinstance(group, ScannedGroup)
    assert group.skipped == ()
    truth = read_truth(path)
    assert_group_matches(group, truth, path.name)
    assert_values_match(group, truth, tmp_path, path.name)
    json_path = tmp_path / "decoded.json"
    refzarr.write(group, json_path)
    assert_decoded_matches(group, path, json_path)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_file_referenced_without_coordinates(path: Path, tmp_path: Path) -> None:
    """With nothing loaded, every chunk is a byte range of the file itself."""
    group = refzarr.scan(path, inline_coordinates=0)
    for _, arr in group.arrays():
        assert set(arr.manifest.paths) <= {str(path)}
        assert (arr.manifest.path_id >= 0).all()
    assert_values_match(group, read_truth(path), tmp_path, path.name, written=False)
