"""Opening a Parquet reference set on S3 costs one GET per file of it (``.zmetadata``, each
record file read), no HEAD: s3fs asks a whole file's size first unless the read is ranged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import pytest

import refzarr
from dailykit import write_day


def test_opening_a_parquet_set_costs_one_get_per_file(
    tmp_path: Path, s3: tuple[str, dict[str, Any]], s3_proxy: tuple[str, dict[str, Any], Any]
) -> None:
    bucket, options, proxy = s3_proxy
    days = [write_day(tmp_path / f"day{k}.nc", k) for k in range(2)]
    group = refzarr.combine(refzarr.scan_many(days, executor="serial"), concat_dims=["time"])
    url = f"s3://{bucket}/set.parq"
    refzarr.write(group, url, storage_options=s3[1])
    proxy.reset()
    read = refzarr.read(url, storage_options=options)
    for _, array in read.arrays():
        array.manifest.nchunks  # noqa: B018  (loads the array's records)
    assert read == group
    prefix = f"/{bucket}/set.parq/"
    assert proxy.count("HEAD", prefix) == 0, proxy.matching(None, prefix)
    files = {r.path for r in proxy.matching("GET", prefix)}
    assert len(files) == proxy.count("GET", prefix)  # each once
    assert f"{prefix}.zmetadata" in files


def test_an_empty_zmetadata_on_s3_is_named(
    s3: tuple[str, dict[str, Any]],
) -> None:
    bucket, options = s3
    fs = fsspec.filesystem("s3", **options)
    fs.pipe(f"{bucket}/empty.parq/.zmetadata", b"")  # S3 refuses a range of an empty object
    with pytest.raises(refzarr.RefFormatError, match=r"\.zmetadata"):
        refzarr.read(f"s3://{bucket}/empty.parq", storage_options=options)
