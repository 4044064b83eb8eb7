"""Coordinate specs: values from the URL (regex), attributes, callables, the coordinate's data
with CF times in different epochs (decoded, re-encoded in the first file's units), and the
spec forms accepted or refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from kit import assert_same_dataset, daily, scan_all, write_nc

import refzarr
from refzarr import FromAttribute, FromCallable, FromData, FromRegex, IncompatibleError, RefArray
from refzarr.combine.specs import IMPLICIT_DATA, parse_coord_spec, parse_coord_specs


def _one_day_files(tmp_path: Path, days: list[str]) -> list[Path]:
    """Files holding one day each but no time variable: their date is in the name."""
    paths = []
    for k, day in enumerate(days):
        ds = daily("2000-01-01", 1, seed=k).drop_vars("time")
        ds.attrs["day"] = day
        ds["air"].attrs["step"] = k
        paths.append(write_nc(ds, tmp_path / f"air_{day.replace('-', '')}.nc"))
    return paths


def _expected(paths: list[Path], days: list[str]) -> xr.Dataset:
    with xr.open_mfdataset(
        paths, combine="nested", concat_dim="time", data_vars="minimal", coords="minimal"
    ) as ds:
        out = ds.load()
    return out.assign_coords(time=pd.to_datetime(days).values.astype("datetime64[ns]"))


def _date(text: str) -> np.datetime64:
    return np.datetime64(f"{text[:4]}-{text[4:6]}-{text[6:]}", "ns")


def test_regex_on_url_with_dates(tmp_path: Path) -> None:
    days = ["2001-03-01", "2001-03-02", "2001-03-05"]
    paths = _one_day_files(tmp_path, days)
    combined = refzarr.combine(
        scan_all(paths[::-1]),
        concat_dims="time",
        coords={"time": FromRegex(r"air_(\d{8})", parse=_date)},
    )
    assert_same_dataset(combined, _expected(paths, days), tmp_path)
    time = combined["time"]
    assert isinstance(time, RefArray)
    assert " since " in time.meta.attributes["units"]


def test_regex_tuple_form_gives_integers(tmp_path: Path) -> None:
    days = ["2001-03-01", "2001-03-02"]
    paths = _one_day_files(tmp_path, days)
    combined = refzarr.combine(
        scan_all(paths), concat_dims="time", coords={"time": ("regex", r"_(\d+)\.nc")}
    )
    got = refzarr.open_dataset(combined)
    np.testing.assert_array_equal(got["time"].values, [20010301, 20010302])
    assert got["time"].dtype == np.int64
    # the numbers are not in the files' CF time units: written without them
    assert "units" not in combined["time"].meta.attributes


def test_regex_named_group_and_callable(tmp_path: Path) -> None:
    days = ["2001-03-02", "2001-03-01"]
    paths = _one_day_files(tmp_path, days)
    by_name = refzarr.combine(
        scan_all(paths), concat_dims="time", coords={"time": FromRegex(r"(?P<value>\d{8})")}
    )
    by_callable = refzarr.combine(
        scan_all(paths),
        concat_dims="time",
        coords={"time": lambda url, group: int(Path(url).stem.split("_")[1])},
    )
    assert by_name == by_callable
    np.testing.assert_array_equal(
        refzarr.open_dataset(by_name)["time"].values, [20010301, 20010302]
    )


def test_regex_with_a_date_format_gives_a_cf_time(tmp_path: Path) -> None:
    """``date_format`` reads the matched digits as dates: a CF time xarray decodes to
    datetime64 (days since the first date, proleptic Gregorian); without it, integers."""
    days = ["2001-03-05", "2001-03-01", "2001-03-02"]
    paths = _one_day_files(tmp_path, days)
    combined = refzarr.combine(
        scan_all(paths),
        concat_dims="time",
        coords={"time": FromRegex(r"air_(\d{8})\.nc", date_format="%Y%m%d")},
    )
    order = np.argsort(days)
    expected = _expected([paths[k] for k in order], [days[k] for k in order])
    assert_same_dataset(combined, expected, tmp_path)
    time = combined["time"]
    assert isinstance(time, RefArray)
    assert sorted(time.meta.attributes) == ["calendar", "units"]
    assert time.meta.attributes["calendar"] == "proleptic_gregorian"
    assert time.meta.attributes["units"].startswith("days since 2001-03-01")  # the earliest
    raw = refzarr.open_dataset(combined, decode_times=False)["time"]
    np.testing.assert_array_equal(raw.values, [0, 1, 4], strict=True)
    in_order = refzarr.combine(
        scan_all([paths[k] for k in order]),
        concat_dims="time",
        coords={"time": FromRegex(r"air_(\d{8})\.nc", date_format="%Y%m%d")},
    )
    assert in_order == combined  # counted from the earliest date, not the first given


def test_regex_group_named_like_the_dimension(tmp_path: Path) -> None:
    paths = _one_day_files(tmp_path, ["2001-03-02", "2001-03-01"])
    pattern = r"(?P<prefix>[a-z]+)_(?P<time>\d{8})"
    by_dim = refzarr.combine(
        scan_all(paths), concat_dims="time", coords={"time": FromRegex(pattern)}
    )
    np.testing.assert_array_equal(refzarr.open_dataset(by_dim)["time"].values, [20010301, 20010302])


def test_dates_with_an_offset_are_utc(tmp_path: Path) -> None:
    """``%z`` dates are converted to UTC (numpy holds no time zone)."""
    paths = _one_day_files(tmp_path, ["2001-03-01", "2001-03-02"])
    named = [p.rename(p.with_name(f"{p.stem}T0100+0200.nc")) for p in paths]
    combined = refzarr.combine(
        scan_all(named),
        concat_dims="time",
        coords={"time": FromRegex(r"_(\d{8}T\d{4}[+-]\d{4})", date_format="%Y%m%dT%H%M%z")},
    )
    got = refzarr.open_dataset(combined)["time"].values
    np.testing.assert_array_equal(
        got, np.array(["2001-02-28T23:00", "2001-03-01T23:00"], dtype="datetime64[ns]")
    )


def test_a_name_not_in_the_date_format_is_named(tmp_path: Path) -> None:
    paths = _one_day_files(tmp_path, ["2001-03-01", "2001-03-02"])
    bad = paths[1].rename(paths[1].with_name("air_20011302.nc"))  # month 13
    spec = FromRegex(r"_(\d{8})\.nc", date_format="%Y%m%d")
    with pytest.raises(IncompatibleError, match=r"'20011302', taken from .*air_20011302\.nc"):
        refzarr.combine(scan_all([paths[0], bad]), concat_dims="time", coords={"time": spec})


def test_date_format_is_checked() -> None:
    with pytest.raises(ValueError, match="parse or date_format, not both"):
        FromRegex(r"(\d+)", parse=int, date_format="%Y")
    with pytest.raises(ValueError, match="expected a strptime format such as '%Y%m%d'"):
        FromRegex(r"(\d+)", date_format="YYYYMMDD")


def test_global_and_variable_attributes(tmp_path: Path) -> None:
    days = ["2001-03-01", "2001-03-04", "2001-03-02"]
    paths = _one_day_files(tmp_path, days)
    combined = refzarr.combine(
        scan_all(paths),
        concat_dims="time",
        coords={"time": FromAttribute("day", parse=lambda s: np.datetime64(s, "ns"))},
    )
    order = np.argsort(days)
    expected = _expected([paths[k] for k in order], [days[k] for k in order])
    assert_same_dataset(combined, expected.assign_attrs(day="2001-03-01"), tmp_path)
    by_variable = refzarr.combine(
        scan_all(paths), concat_dims="time", coords={"time": ("attribute", "step", "air")}
    )
    np.testing.assert_array_equal(refzarr.open_dataset(by_variable)["time"].values, [0, 1, 2])


def test_missing_attribute_names_the_file(tmp_path: Path) -> None:
    paths = _one_day_files(tmp_path, ["2001-03-01"])
    with pytest.raises(IncompatibleError, match=r"air_20010301\.nc has no attribute 'nope'"):
        refzarr.combine(scan_all(paths), concat_dims="time", coords={"time": FromAttribute("nope")})


def test_regex_that_does_not_match_names_the_url(tmp_path: Path) -> None:
    paths = _one_day_files(tmp_path, ["2001-03-01"])
    with pytest.raises(IncompatibleError, match=r"does not match .*air_20010301\.nc"):
        refzarr.combine(scan_all(paths), concat_dims="time", coords={"time": ("regex", "x(y)")})


def test_one_value_for_a_file_of_several_steps_is_refused(tmp_path: Path) -> None:
    path = write_nc(daily("2000-01-01", 3), tmp_path / "f_1.nc")
    with pytest.raises(IncompatibleError, match=r"gave 1 values .* holds 3 positions"):
        refzarr.combine(scan_all([path]), concat_dims="time", coords={"time": ("regex", r"_(\d)")})


@pytest.mark.parametrize(
    ("units", "calendar"),
    [
        (["days since 2000-01-01", "hours since 2000-01-03", "days since 1999-12-01"], None),
        (["days since 2000-01-01", "days since 2000-01-03", "minutes since 2000-01-05"], "noleap"),
    ],
)
def test_cf_times_with_different_epochs(
    tmp_path: Path, units: list[str], calendar: str | None
) -> None:
    paths = []
    for k, unit in enumerate(units):
        ds = daily(f"2000-01-{1 + 2 * k:02d}", 2, seed=k)
        encoding = {"time": {"units": unit, **({"calendar": calendar} if calendar else {})}}
        paths.append(write_nc(ds, tmp_path / f"t{k}.nc", encoding=encoding))
    combined = refzarr.combine(scan_all(paths[::-1]), concat_dims="time")
    time = combined["time"]
    assert isinstance(time, RefArray)
    assert time.meta.attributes["units"] == units[0]  # the first file on the time axis
    use_cftime = calendar is not None
    with xr.open_mfdataset(
        paths,
        combine="nested",
        concat_dim="time",
        data_vars="minimal",
        coords="minimal",
        decode_times=xr.coders.CFDatetimeCoder(use_cftime=use_cftime),
    ) as ds:
        expected = ds.load()
    got = refzarr.open_dataset(
        combined, decode_times=xr.coders.CFDatetimeCoder(use_cftime=use_cftime)
    ).load()
    xr.testing.assert_identical(got, expected)
    raw = refzarr.open_dataset(combined, decode_times=False)["time"]
    assert raw.dtype == np.int64  # whole numbers of the first file's unit stay integers


def test_cf_times_not_whole_in_first_units_become_float(tmp_path: Path) -> None:
    a = write_nc(daily("2000-01-01", 2), tmp_path / "a.nc", time_units="days since 2000-01-01")
    b_ds = daily("2000-01-03", 2, seed=1)
    b_ds["time"] = b_ds["time"] + np.timedelta64(12, "h")
    b = write_nc(b_ds, tmp_path / "b.nc", time_units="hours since 2000-01-01")
    combined = refzarr.combine(scan_all([a, b]), concat_dims="time")
    raw = refzarr.open_dataset(combined, decode_times=False)["time"].values
    np.testing.assert_array_equal(raw, [0.0, 1.0, 2.5, 3.5])
    decoded = refzarr.open_dataset(combined)["time"].values
    expected = np.concatenate([daily("2000-01-01", 2)["time"].values, b_ds["time"].values])
    np.testing.assert_array_equal(decoded, expected)


def test_different_calendars_are_refused(tmp_path: Path) -> None:
    paths = []
    for k, calendar in enumerate(["standard", "360_day"]):
        ds = daily(f"2000-01-{1 + 2 * k:02d}", 2, seed=k)
        encoding = {"time": {"units": "days since 2000-01-01", "calendar": calendar}}
        paths.append(write_nc(ds, tmp_path / f"c{k}.nc", encoding=encoding))
    with pytest.raises(IncompatibleError, match=r"different calendars") as info:
        refzarr.combine(scan_all(paths), concat_dims="time")
    assert "'360_day' in " in str(info.value)
    assert all(str(p) in str(info.value) for p in paths)


def test_spec_forms() -> None:
    assert parse_coord_spec("t", "data") == FromData()
    assert parse_coord_spec("t", ("data", "time2")) == FromData("time2")
    regex = parse_coord_spec("t", ("regex", r"(\d+)"))
    assert isinstance(regex, FromRegex)
    assert parse_coord_spec("t", ("attribute", "a", "v")) == FromAttribute("a", "v")
    assert isinstance(parse_coord_spec("t", len), FromCallable)
    assert parse_coord_spec("t", None) is None
    assert parse_coord_specs(("t",), None)["t"] is IMPLICIT_DATA
    with pytest.raises(ValueError, match=r"coords\['t'\] = 'regex' is not a coordinate spec"):
        parse_coord_spec("t", "regex")
    with pytest.raises(ValueError, match="not among concat_dims"):
        parse_coord_specs(("t",), {"x": "data"})


def test_explicit_data_spec_needs_the_variable(tmp_path: Path) -> None:
    paths = _one_day_files(tmp_path, ["2001-03-01"])
    with pytest.raises(IncompatibleError, match="there is no variable 'time'"):
        refzarr.combine(scan_all(paths), concat_dims="time", coords={"time": "data"})


def test_time_bounds_follow_the_coordinate_into_one_epoch(tmp_path: Path) -> None:
    paths = []
    for k, unit in enumerate(["days since 2000-01-01", "hours since 2000-01-02"]):
        ds = daily(f"2000-01-{1 + 2 * k:02d}", 2, seed=k)
        start = ds["time"].values
        bounds = np.stack([start, start + np.timedelta64(1, "D")], axis=1)
        ds["time_bnds"] = (("time", "nv"), bounds)
        ds["time"].attrs["bounds"] = "time_bnds"
        encoding = {"time": {"units": unit, "dtype": "int64"}}
        paths.append(write_nc(ds, tmp_path / f"b{k}.nc", encoding=encoding))
    combined = refzarr.combine(scan_all(paths[::-1]), concat_dims="time")
    with xr.open_mfdataset(
        paths, combine="nested", concat_dim="time", data_vars="minimal", coords="minimal"
    ) as ds:
        expected = ds.load()
    got = refzarr.open_dataset(combined).load()
    xr.testing.assert_identical(got, expected)
    raw = refzarr.open_dataset(combined, decode_times=False)
    np.testing.assert_array_equal(raw["time_bnds"].values, [[0, 1], [1, 2], [2, 3], [3, 4]])


def test_time_bounds_appended_to_a_combined_set_stay_writable(tmp_path: Path) -> None:
    """A set combined from files in two epochs holds its bounds as one inlined chunk; a file in
    the set's own units appended to it holds its bounds as its own chunk: the joined bounds
    are inlined (regular, writable) instead of an irregular grid."""
    paths = []
    units = ["days since 2000-01-01", "hours since 2000-01-02", "days since 2000-01-01"]
    for k, unit in enumerate(units):
        ds = daily(f"2000-01-{1 + 2 * k:02d}", 2, seed=k)
        start = ds["time"].values
        ds["time_bnds"] = (("time", "nv"), np.stack([start, start + np.timedelta64(1, "D")], 1))
        ds["time"].attrs["bounds"] = "time_bnds"
        encoding = {"time": {"units": unit, "dtype": "int64"}}
        paths.append(write_nc(ds, tmp_path / f"b{k}.nc", encoding=encoding))
    first = refzarr.combine(scan_all(paths[:2]), concat_dims="time")
    combined = refzarr.combine([first, *scan_all(paths[2:])], concat_dims="time")
    bounds = combined["time_bnds"]
    assert isinstance(bounds, RefArray)
    assert bounds.meta.is_regular
    target = tmp_path / "refs.json"
    refzarr.write(combined, target)
    with xr.open_mfdataset(
        paths, combine="nested", concat_dim="time", data_vars="minimal", coords="minimal"
    ) as ds:
        expected = ds.load()
    xr.testing.assert_identical(refzarr.open_dataset(refzarr.read(target)).load(), expected)
