"""Sources whose paths or object keys hold characters a URL reserves (space, ``#``, ``?``,
``%``, non-ASCII): Icechunk parses chunk locations as URLs, so refzarr percent-encodes them
and finds container prefixes that need no encoding (Icechunk 1.x and 2.x alike)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import xarray as xr

import refzarr
from refzarr.cli import main
from sourceskit import write_day

icechunk = pytest.importorskip("icechunk")

from refzarr.formats.icechunk.repository import (  # noqa: E402
    commit_icechunk,
    open_repository,
    source_prefixes,
)
from refzarr.formats.icechunk.write import location  # noqa: E402

NAMES = ["a b", "a#b?c", "a%41b", "é"]


def _open(repo: Any) -> xr.Dataset:
    return xr.open_zarr(repo.readonly_session("main").store, consolidated=False)


def test_locations_are_percent_encoded() -> None:
    assert location("/d/a b#c?d%41é.nc", "v") == "file:///d/a%20b%23c%3Fd%2541%C3%A9.nc"
    assert location("s3://bucket/k ey#1.nc", "v") == "s3://bucket/k%20ey%231.nc"
    assert location("https://host/a%20b.nc?x=1", "v") == "https://host/a%20b.nc?x=1"


def test_container_prefixes_stop_above_what_needs_encoding() -> None:
    group = refzarr.from_kerchunk(
        {
            "version": 1,
            "refs": {
                ".zgroup": '{"zarr_format": 2}',
                "v/.zarray": json.dumps(
                    {
                        "shape": [2],
                        "chunks": [1],
                        "dtype": "<i4",
                        "compressor": None,
                        "filters": None,
                        "fill_value": None,
                        "order": "C",
                        "zarr_format": 2,
                    }
                ),
                "v/0": ["/data/plain/x.bin", 0, 4],
                "v/1": ["/data/with space/sub/y.bin", 0, 4],
            },
        }
    )
    assert source_prefixes(group) == ["file:///data/", "file:///data/plain/"]


@pytest.mark.parametrize("name", NAMES)
def test_local_sources_with_reserved_characters(tmp_path: Path, name: str) -> None:
    folder = tmp_path / f"data {name}" / name
    folder.mkdir(parents=True)
    days = [write_day(folder / f"d{k} {name}.nc", k) for k in range(2)]
    group = refzarr.combine([refzarr.scan(str(p)) for p in days], concat_dims="time")
    commit_icechunk(group, tmp_path / "repo")
    repo = open_repository(str(tmp_path / "repo"), None, None, source_prefixes(group))
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as expected:
        xr.testing.assert_equal(_open(repo).load(), expected.load())
    # every chunk's location is one the record names: nothing reported as another writer's
    assert main(["validate", str(tmp_path / "repo"), "--sources"]) == 0


def test_s3_keys_with_reserved_characters(s3: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    import s3fs

    bucket, options = s3
    fs = s3fs.S3FileSystem(**options)
    days = [write_day(tmp_path / f"d{k}.nc", k) for k in range(2)]
    urls = [f"s3://{bucket}/in put/d {k}#%41é.nc" for k in range(2)]
    for path, url in zip(days, urls, strict=True):
        fs.put(str(path), url)
    group = refzarr.combine(
        [refzarr.scan(u, storage_options=options) for u in urls], concat_dims="time"
    )
    repository = f"s3://{bucket}/repo"
    commit_icechunk(group, repository, storage_options=options)
    repo = open_repository(repository, options, options, source_prefixes(group))
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as expected:
        xr.testing.assert_equal(_open(repo).load(), expected.load())
