"""FITS files scanned over fsspec (memory://, S3 on moto) read back exactly as astropy reads
the local file; detection from the first bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
from fitskit import astropy_raw

import refzarr
from corpus import CORPUS
from refzarr.scan.detect import detect_format

FITS = CORPUS / "fits"


def _values(group: refzarr.RefGroup, storage_options: dict[str, Any]) -> dict[str, Any]:
    with refzarr.open_dataset(group, mask_and_scale=False, storage_options=storage_options) as ds:
        return {name: np.asarray(ds[name].values) for name in ds.data_vars}


def test_memory_filesystem() -> None:
    url = "memory://fits-remote/m13_rice.fits"
    fsspec.filesystem("memory").pipe(url, (FITS / "m13_rice.fits").read_bytes())
    try:
        group = refzarr.scan(url)
        manifest = group["COMPRESSED_IMAGE"].manifest
        assert manifest.paths == (url,)
        values = _values(group, {})
        expected = astropy_raw(FITS / "m13_rice.fits")
        np.testing.assert_array_equal(values["COMPRESSED_IMAGE"], expected["COMPRESSED_IMAGE"])
    finally:
        fsspec.filesystem("memory").rm(url)


def test_s3(s3: tuple[str, dict[str, Any]]) -> None:
    bucket, options = s3
    fs = fsspec.filesystem("s3", **options)
    for name in ("o4sp040b0_raw.fits", "m13_gzip.fits"):
        url = f"s3://{bucket}/data/{name}"
        fs.put_file(str(FITS / name), url)
        group = refzarr.scan(url, storage_options=options)
        got = _values(group, options)
        for array, want in astropy_raw(FITS / name, scaled=True).items():
            np.testing.assert_array_equal(got[array], want, err_msg=array)


@pytest.mark.parametrize("path", sorted(FITS.glob("*.fits")), ids=lambda p: p.name)
def test_detected_from_first_bytes(path: Path, tmp_path: Path) -> None:
    renamed = tmp_path / "no-suffix.bin"
    renamed.write_bytes(path.read_bytes())
    assert detect_format(str(renamed)).name == "fits"
