"""Scanning TIFFs through fsspec: memory:// and S3 (moto), options passed through; detection
from the first bytes; scanners pickle."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
import tifffile
from tiffkit import write_geotiff

import refzarr
from refzarr.scan.detect import detect_format
from refzarr.scan.tiff import TiffScanner

DATA = np.random.default_rng(3).integers(0, 60_000, (45, 70), dtype=np.uint16)


@pytest.fixture
def cog(tmp_path: Path) -> Path:
    return write_geotiff(tmp_path / "cog.tif", DATA, overviews=2)


def _expected(path: Path) -> np.ndarray:
    with tifffile.TiffFile(path) as tif:
        return tif.series[0].asarray()


def test_memory_filesystem(cog: Path) -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe("/tiff/cog.tif", cog.read_bytes())
    try:
        group = refzarr.scan("memory://tiff/cog.tif")
        assert group["band_data"].manifest.paths == ("memory://tiff/cog.tif",)
        ds = refzarr.open_dataset(group, mask_and_scale=False)
        np.testing.assert_array_equal(ds["band_data"].values, _expected(cog), strict=True)
    finally:
        fs.rm("/tiff", recursive=True)


def test_s3_with_storage_options(cog: Path, s3: tuple[str, dict[str, Any]]) -> None:
    bucket, options = s3
    url = f"s3://{bucket}/cog.tif"
    fsspec.filesystem("s3", **options).pipe(url, cog.read_bytes())
    group = refzarr.scan(url, storage_options=options)
    assert group["overview_2/band_data"].meta.shape == (12, 18)
    ds = refzarr.open_dataset(group, storage_options=options, mask_and_scale=False)
    np.testing.assert_array_equal(ds["band_data"].values, _expected(cog), strict=True)
    assert ds["x"].size == 70


def test_detected_from_first_bytes_not_name(cog: Path, tmp_path: Path) -> None:
    renamed = tmp_path / "data.nc"
    renamed.write_bytes(cog.read_bytes())
    assert detect_format(str(renamed)).name == "tiff"
    assert "band_data" in refzarr.scan(renamed)
    bigtiff = tmp_path / "big.bin"
    tifffile.imwrite(bigtiff, DATA, bigtiff=True, byteorder=">")
    assert detect_format(str(bigtiff)).name == "tiff"


def test_scanner_pickles_and_is_stateless(cog: Path) -> None:
    scanner = pickle.loads(pickle.dumps(TiffScanner(inline_threshold=100)))
    assert scanner(str(cog)) == scanner(str(cog))
    with pytest.raises(ValueError, match="on_unsupported"):
        TiffScanner(on_unsupported="ignore")  # type: ignore[arg-type]
