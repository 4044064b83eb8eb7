"""The fsspec recipe of docs/formats.md ("Opening with fsspec"), run as written on a reference
set (JSON and Parquet) whose sources are on S3 (moto): values equal netCDF4's through xarray."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
import s3fs
import xarray as xr
from zarr.core.sync import sync as zarr_sync

import refzarr
from dailykit import write_day

PAGE = Path(__file__).resolve().parents[2] / "docs" / "formats.md"
DOCUMENTED_OPTIONS = '{"anon": True, "asynchronous": True}'


def recipe() -> str:
    """The page's Python block after "Opening with fsspec:"."""
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(r"Opening with fsspec:\s*```python\n(.*?)```", text, re.S)
    assert found, f"{PAGE}: no 'Opening with fsspec' example"
    return found.group(1)


# fsspec's LazyReferenceMapper reads Parquet references with pandas' fastparquet engine
@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_documented_fsspec_recipe_reads_s3_sources(
    tmp_path: Path, s3: tuple[str, dict[str, Any]], suffix: str
) -> None:
    bucket, options = s3
    days = [write_day(tmp_path / f"day{k}.nc", k) for k in range(2)]
    fs = fsspec.filesystem("s3", **options)
    for day in days:
        fs.put_file(str(day), f"{bucket}/{day.name}")
    urls = [f"s3://{bucket}/{day.name}" for day in days]
    groups = refzarr.scan_many(urls, storage_options=options, executor="serial")
    refs = tmp_path / f"refs{suffix}"
    refzarr.write(refzarr.combine(groups, concat_dims=["time"]), refs)
    code = recipe()
    assert '"refs.json"' in code, code
    assert DOCUMENTED_OPTIONS in code, code
    code = code.replace('"refs.json"', repr(str(refs)))
    code = code.replace(DOCUMENTED_OPTIONS, '{**OPTIONS, "asynchronous": True}')
    names: dict[str, Any] = {"OPTIONS": options}
    try:
        exec(compile(code, str(PAGE), "exec"), names)
        with names["ds"] as ours, xr.open_mfdataset(days, combine="by_coords") as theirs:
            for name in ("air", "time", "lat", "lon"):
                assert ours[name].dtype == theirs[name].dtype, name
                np.testing.assert_array_equal(ours[name].values, theirs[name].values, strict=True)
    finally:
        close_async_sessions()


def close_async_sessions() -> None:
    """Close the sessions of the asynchronous s3fs instances the recipe made (in zarr's loop):
    left to the garbage collector, aiohttp warns of them in whichever test runs then."""
    for fs in list(s3fs.S3FileSystem._cache.values()):
        if fs.asynchronous and getattr(fs, "_s3", None) is not None:

            async def close(fs: Any = fs) -> None:
                client = await fs.set_session()
                await client.close()

            zarr_sync(close())
