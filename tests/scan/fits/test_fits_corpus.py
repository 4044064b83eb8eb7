"""Every FITS file of the corpus reads back exactly as astropy reads it: through refzarr's
reader (raw and decoded) and through fsspec + zarr-python on written JSON and Parquet."""

from __future__ import annotations

from pathlib import Path

import pytest
from fitskit import assert_decoded_match, assert_raw_match, assert_zarr_match

import refzarr
from corpus import corpus_files
from refzarr.scan.fits import FitsScanner

FILES = corpus_files("fits", ".fits", ".fit", ".fz")


@pytest.fixture(scope="module", params=FILES, ids=[p.name for p in FILES])
def scanned(request: pytest.FixtureRequest) -> tuple[Path, refzarr.RefGroup]:
    path: Path = request.param
    return path, refzarr.scan(path)


def test_corpus_is_there() -> None:
    assert len(FILES) >= 10


def test_detected_and_nothing_skipped(scanned: tuple[Path, refzarr.RefGroup]) -> None:
    path, group = scanned
    assert group == FitsScanner()(str(path))
    assert not getattr(group, "skipped", ())


def test_raw_values_through_refzarr(scanned: tuple[Path, refzarr.RefGroup]) -> None:
    assert_raw_match(scanned[1], scanned[0])


def test_decoded_values_through_refzarr(scanned: tuple[Path, refzarr.RefGroup]) -> None:
    assert_decoded_match(scanned[1], scanned[0])


# fsspec reads Parquet reference sets with pandas' fastparquet engine, which pandas 3 deprecates
@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_values_through_fsspec_and_zarr(
    scanned: tuple[Path, refzarr.RefGroup], tmp_path: Path, suffix: str
) -> None:
    path, group = scanned
    out = tmp_path / f"refs{suffix}"
    refzarr.write(group, out)
    assert_zarr_match(out, group, path)
