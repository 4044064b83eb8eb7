"""Zarr stores moved into Icechunk: one virtual chunk container per local store (not one per
folder of chunk files), and sharded arrays (a nested codec configuration) written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import refzarr

icechunk = pytest.importorskip("icechunk")

from refzarr.formats.icechunk.repository import (  # noqa: E402
    commit_icechunk,
    open_repository,
    source_prefixes,
)


def _store(path: Path, day: int) -> Path:
    """A Zarr v3 store as xarray writes it: ``temp`` sharded, its chunk files in a folder
    per row of chunks (``temp/c/<t>/<y>/``)."""
    time = pd.date_range(f"2021-01-{day + 1:02d}", periods=4, freq="6h")
    values = np.arange(4 * 6 * 2, dtype="f4").reshape(4, 6, 2) + 100 * day
    ds = xr.Dataset(
        {"temp": (("time", "y", "x"), values, {"units": "K"})},
        coords={"time": time, "y": np.arange(6.0), "x": np.arange(2.0)},
    )
    encoding = {"temp": {"chunks": (1, 1, 2), "shards": (2, 2, 2), "_FillValue": -999.0}}
    ds.to_zarr(path, zarr_format=3, mode="w", consolidated=False, encoding=encoding)
    return path


def _open(repo: Any) -> xr.Dataset:
    return xr.open_zarr(repo.readonly_session("main").store, consolidated=False)


def test_stores_along_time(tmp_path: Path) -> None:
    stores = [_store(tmp_path / f"day{k}.zarr", k) for k in range(2)]
    group = refzarr.combine([refzarr.scan(str(s)) for s in stores], concat_dims="time")
    assert source_prefixes(group) == [f"file://{s}/" for s in stores]
    commit_icechunk(group, tmp_path / "repo")
    repo = open_repository(str(tmp_path / "repo"), None, None, source_prefixes(group))
    assert sorted(repo.config.virtual_chunk_containers) == [f"file://{s}/" for s in stores]
    with xr.open_mfdataset(
        stores, engine="zarr", consolidated=False, combine="nested", concat_dim="time"
    ) as truth:
        xr.testing.assert_identical(_open(repo).load(), truth.load())
