"""Random archives of netCDF4 files split along time (any lengths, per-file time units and
calendars, packing, fill values, chunking and compression, any input order): combined by
refzarr they read as ``xr.open_mfdataset`` reads the files, through refzarr and kerchunk JSON;
files that cannot be one Zarr array are refused by name, never read wrong."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st
from kit import LAT, LON, assert_same_dataset, open_kerchunk, open_mf, scan_all, write_nc

import refzarr
from fuzzkit import fuzz_settings

CALENDARS = ["standard", "proleptic_gregorian", "noleap", "360_day"]
KINDS = ["float32", "float64", "packed"]


def _times(start_day: int, days: int, calendar: str) -> Any:
    if calendar in ("standard", "proleptic_gregorian"):
        return pd.date_range("2001-01-01", periods=start_day + days, freq="D")[start_day:]
    every = xr.date_range(
        "2001-01-01", periods=start_day + days, freq="D", calendar=calendar, use_cftime=True
    )
    return every[start_day:]


def _dataset(start_day: int, days: int, kind: str, calendar: str, seed: int) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    values = rng.normal(280, 10, (days, LAT, LON))
    values[rng.random(values.shape) < 0.2] = np.nan
    dtype = "float64" if kind == "float64" else "float32"
    coords = {
        "time": _times(start_day, days, calendar),
        "lat": np.linspace(-60, 60, LAT),
        "lon": np.linspace(0, 300, LON),
    }
    ds = xr.Dataset({"air": (("time", "lat", "lon"), values.astype(dtype))}, coords=coords)
    ds["air"].attrs = {"units": "K"}
    ds.attrs = {"title": "fuzz", "first_day": start_day}
    return ds


@st.composite
def archives(draw: st.DrawFn) -> dict[str, Any]:
    """Per file: (start day, days, time units, chunk length, zlib); shared: the rest."""
    lengths = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    starts = np.cumsum([0, *lengths[:-1]]).tolist()
    same_units = draw(st.booleans())
    vary_chunks = draw(st.booleans())
    vary_zlib = draw(st.booleans())
    files = []
    for start, length in zip(starts, lengths, strict=True):
        units = (
            "days since 2001-01-01"
            if same_units
            else draw(
                st.sampled_from(
                    ["hours since 2001-01-01", f"days since 2001-01-{1 + start % 28:02d}"]
                )
            )
        )
        files.append(
            {
                "start": start,
                "days": length,
                "units": units,
                "chunk": draw(st.integers(1, length)) if vary_chunks else length,
                "zlib": draw(st.booleans()) if vary_zlib else False,
                "unlimited": draw(st.booleans()),
            }
        )
    return {
        "files": files,
        "kind": draw(st.sampled_from(KINDS)),
        "fill": draw(st.sampled_from([None, "nan", -999.0])),
        "calendar": draw(st.sampled_from(CALENDARS)),
        "order": draw(st.permutations(range(len(files)))),
        "seed": draw(st.integers(0, 2**16)),
    }


def _encoding(case: dict[str, Any], file: dict[str, Any]) -> dict[str, dict[str, Any]]:
    air: dict[str, Any] = {"zlib": file["zlib"], "chunksizes": (file["chunk"], LAT, LON)}
    fill = case["fill"]
    air["_FillValue"] = None if fill is None else (np.nan if fill == "nan" else fill)
    if case["kind"] == "packed":
        air.update(dtype="int16", scale_factor=0.01, add_offset=280.0)
        air["_FillValue"] = -32767  # packed data needs an integer fill to keep its NaNs
    return {"air": air, "time": {"calendar": case["calendar"]}}


def _regular(case: dict[str, Any]) -> bool:
    """Whether the combined time axis has one chunk length (every file's length a multiple
    of it but the last's, all stored in chunks of that length): kerchunk JSON can hold it."""
    files = case["files"]
    chunk = files[0]["chunk"]
    inner = all(f["chunk"] == chunk and f["days"] % chunk == 0 for f in files[:-1])
    return inner and files[-1]["chunk"] == chunk


@fuzz_settings(ci_examples=8)
@given(archives())
def test_random_archives_read_as_open_mfdataset(case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="refzarr-combine-fuzz-") as tmp:
        tmp_path = Path(tmp)
        paths = []
        for k, file in enumerate(case["files"]):
            ds = _dataset(
                file["start"], file["days"], case["kind"], case["calendar"], case["seed"] + k
            )
            encoding = _encoding(case, file)
            path = tmp_path / f"f{k}.nc"
            units, unlimited = file["units"], file["unlimited"]
            paths.append(
                write_nc(ds, path, time_units=units, encoding=encoding, unlimited=unlimited)
            )
        shuffled = [paths[k] for k in case["order"]]
        try:
            combined = refzarr.combine(scan_all(shuffled), concat_dims="time")
        except refzarr.IncompatibleError as exc:
            refused: Exception | None = exc
        else:
            refused = None
        if refused is not None:
            assert len({f["zlib"] for f in case["files"]}) > 1, f"refused: {refused}"
            assert "f0.nc" in str(refused) or "codecs" in str(refused), refused
            return
        expected = open_mf(paths)
        assert_same_dataset(combined, expected)
        if _regular(case):
            xr.testing.assert_identical(open_kerchunk(combined, tmp_path / "c.json"), expected)
        else:
            with pytest.raises(refzarr.UnsupportedFeatureError, match="differ in length"):
                refzarr.write(combined, tmp_path / "c.json")
