"""Scanning a remote file asks the server for its state once: the HEAD whose size / ETag /
time the record of sources keeps is handed to the scanner's open (s3fs asked again before,
and the TIFF scanner a third time), for every format that opens files through fsspec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import netCDF4
import numpy as np
import pytest
import tifffile

import refzarr
from dailykit import write_day


def _netcdf3(path: Path) -> Path:
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as nc:
        nc.createDimension("x", 6)
        nc.createVariable("v", "f4", ("x",))[:] = np.arange(6, dtype="f4")
    return path


def _tiff(path: Path) -> Path:
    tifffile.imwrite(path, np.arange(64, dtype="u2").reshape(8, 8), tile=(16, 16))
    return path


FILES = {"hdf5": lambda p: write_day(p, 0), "netcdf3": _netcdf3, "tiff": _tiff}


@pytest.mark.parametrize("fmt", sorted(FILES))
@pytest.mark.parametrize("given", [True, False], ids=["format given", "detected"])
def test_one_head_per_remote_scan(
    tmp_path: Path,
    s3: tuple[str, dict[str, Any]],
    s3_proxy: tuple[str, dict[str, Any], Any],
    fmt: str,
    given: bool,
) -> None:
    bucket, options, proxy = s3_proxy
    local = FILES[fmt](tmp_path / f"file.{fmt}")
    url = f"s3://{bucket}/{local.name}"
    fsspec.filesystem("s3", **s3[1]).put_file(str(local), url)
    proxy.reset()
    group = refzarr.scan(url, storage_options=options, format=fmt if given else None)
    key = f"/{bucket}/{local.name}"
    assert proxy.count("HEAD", key) == 1, proxy.matching(None, key)
    assert proxy.count("GET", key) == (1 if given else 2), proxy.matching(None, key)
    recorded = group.sources["scans"][0]["files"][url]
    assert recorded["size"] == local.stat().st_size
    assert recorded["etag"]
