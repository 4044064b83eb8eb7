"""Every conflict combine detects raises IncompatibleError naming the files and what differs:
duplicate or overlapping coordinate values, values out of order in a file, dtype, codecs, fill
value, CF packing attributes, shapes along other dimensions, dimension names, variables held,
values of variables expected identical, holes in a grid of files."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from kit import daily, scan_all, write_nc

import refzarr
from refzarr import ArrayMeta, ChunkManifest, IncompatibleError, RefArray, RefGroup
from refzarr.model import MISSING


def _pair(
    tmp_path: Path,
    change: Any = None,
    encoding_b: dict[str, dict[str, Any]] | None = None,
    start_b: str = "2000-01-03",
) -> list[Path]:
    a = write_nc(daily("2000-01-01", 2), tmp_path / "a.nc")
    ds = daily(start_b, 2, seed=1)
    if change is not None:
        ds = change(ds)
    b = write_nc(ds, tmp_path / "b.nc", encoding=encoding_b)
    return [a, b]


def _raises(paths: list[Path], pattern: str, inline_coordinates: int = 2**16, **kwargs: Any) -> str:
    groups = scan_all(paths, inline_coordinates=inline_coordinates)
    with pytest.raises(IncompatibleError, match=pattern) as raised:
        refzarr.combine(groups, concat_dims=kwargs.pop("dims", "time"), **kwargs)
    message = str(raised.value)
    return message


def _names_both(message: str, paths: list[Path]) -> None:
    for path in paths:
        assert str(path) in message, (path, message)


def test_duplicate_coordinate_values(tmp_path: Path) -> None:
    paths = _pair(tmp_path, start_b="2000-01-01")
    message = _raises(paths, r"duplicate coordinate values: .* both hold time=0..1 \(2 values\)")
    _names_both(message, paths)
    assert "leave the duplicate file out" in message


def test_overlapping_ranges(tmp_path: Path) -> None:
    a = write_nc(daily("2000-01-01", 3), tmp_path / "a.nc")
    b = write_nc(daily("2000-01-03", 3, seed=1), tmp_path / "b.nc")
    message = _raises([b, a], r"duplicate coordinate values along 'time'.*the same values")
    _names_both(message, [a, b])
    c = write_nc(daily("2000-01-02", 1, seed=2), tmp_path / "c.nc")
    message = _raises([a, c], "duplicate coordinate values")
    _names_both(message, [a, c])


def test_one_value_per_file_duplicates(tmp_path: Path) -> None:
    paths = [write_nc(daily("2000-01-01", 1, seed=k), tmp_path / f"d{k}.nc") for k in range(3)]
    message = _raises(paths, r"both hold time=")
    assert sum(str(p) in message for p in paths) == 2


def test_values_out_of_order_inside_a_file(tmp_path: Path) -> None:
    def shuffle(ds: xr.Dataset) -> xr.Dataset:
        return ds.isel(time=[2, 0, 1])

    a = write_nc(daily("2000-01-01", 3), tmp_path / "a.nc")
    b = write_nc(shuffle(daily("2000-01-04", 3, seed=1)), tmp_path / "b.nc")
    message = _raises([a, b], r"not strictly increasing")
    assert str(b) in message


def test_dtype_differs(tmp_path: Path) -> None:
    paths = _pair(tmp_path, lambda ds: ds.astype({"air": "float64"}))
    message = _raises(paths, r"variable 'air': dtype differs: float32 in .* float64 in")
    _names_both(message, paths)


def test_codecs_differ(tmp_path: Path) -> None:
    paths = _pair(tmp_path, encoding_b={"air": {"zlib": True, "complevel": 4}})
    message = _raises(paths, r"variable 'air': codecs differs")
    _names_both(message, paths)


def test_fill_value_attribute_differs(tmp_path: Path) -> None:
    paths = _pair(tmp_path, encoding_b={"air": {"_FillValue": -999.0}})
    message = _raises(paths, r"variable 'air': attribute '_FillValue' differs")
    _names_both(message, paths)


@pytest.mark.parametrize("name", ["scale_factor", "add_offset"])
def test_packing_differs(tmp_path: Path, name: str) -> None:
    packed = {"dtype": "int16", "scale_factor": 0.01, "add_offset": 280.0, "_FillValue": -32767}
    a = write_nc(daily("2000-01-01", 2), tmp_path / "a.nc", encoding={"air": packed})
    other = {**packed, name: packed[name] * 2}  # type: ignore[operator]
    b = write_nc(daily("2000-01-03", 2, seed=1), tmp_path / "b.nc", encoding={"air": other})
    message = _raises([a, b], rf"variable 'air': attribute '{name}' differs")
    _names_both(message, [a, b])
    assert "repack the files alike" in message


def test_units_differ_for_a_data_variable(tmp_path: Path) -> None:
    def kelvin_to_celsius(ds: xr.Dataset) -> xr.Dataset:
        ds["air"].attrs["units"] = "degC"
        return ds

    paths = _pair(tmp_path, kelvin_to_celsius)
    message = _raises(paths, r"attribute 'units' differs: \"K\" in .* \"degC\" in")
    _names_both(message, paths)


def test_shape_along_other_dimension_differs(tmp_path: Path) -> None:
    paths = _pair(tmp_path, lambda ds: ds.isel(lat=slice(0, 3)))
    message = _raises(paths, r"shape along \(lat, lon\) differs: \[4, 5\] in")
    _names_both(message, paths)


def test_dimension_names_differ(tmp_path: Path) -> None:
    paths = _pair(tmp_path, lambda ds: ds.rename_dims({"lon": "x"}))
    message = _raises(paths, r"dimension names differs")
    _names_both(message, paths)


@pytest.mark.parametrize("loaded", [True, False], ids=["loaded", "referenced"])
def test_identical_variable_differs(tmp_path: Path, loaded: bool) -> None:
    paths = _pair(tmp_path, lambda ds: ds.assign_coords(lat=ds.lat + 0.5))
    options = {} if loaded else {"inline_coordinates": 0}
    pattern = r"variable 'lat' must be identical in every file, but its values"
    message = _raises(paths, pattern, **options)
    _names_both(message, paths)
    assert "first at index (0,): " in message
    assert "np.float" not in message  # values as Python shows them
    assert "on different grids (is one of another tile" in message  # lat: a dimension coordinate
    # compat="override" takes the first file's without reading
    combined = refzarr.combine(scan_all(paths), concat_dims="time", compat="override")
    assert combined["lat"] == scan_all(paths[:1])[0]["lat"]


@pytest.mark.parametrize("limit", [2**16, 0], ids=["loaded", "referenced"])
def test_identical_values_stored_differently_are_identical(tmp_path: Path, limit: int) -> None:
    paths = _pair(tmp_path, encoding_b={"lat": {"zlib": True}, "lon": {"chunksizes": (2,)}})
    combined = refzarr.combine(scan_all(paths, inline_coordinates=limit), concat_dims="time")
    np.testing.assert_array_equal(refzarr.open_dataset(combined)["lat"], daily("2000", 1).lat)


def test_missing_variable_in_one_file(tmp_path: Path) -> None:
    a = write_nc(daily("2000-01-01", 2, variables=("air", "rhum")), tmp_path / "a.nc")
    b = write_nc(daily("2000-01-03", 2, seed=1), tmp_path / "b.nc")
    message = _raises([a, b], r"do not all hold the same variables")
    _names_both(message, [a, b])
    assert "'rhum'" in message
    assert "both hold ['air'] along time" in message  # what both hold along it, not in all


def test_hole_in_grid(tmp_path: Path) -> None:
    paths = [
        write_nc(daily(f"2000-01-{1 + 2 * t:02d}", 2, seed=t), tmp_path / f"m{m}_t{t}.nc")
        for m in range(2)
        for t in range(2)
    ][:-1]
    message = _raises(
        paths,
        r"do not fill a complete grid .* no file holds member=1, time=2..3 \(2 values\)",
        dims=["member", "time"],
        coords={"member": ("regex", r"m(\d)")},
    )
    assert "3 files for 4 places" in message


def test_grid_needs_coordinates_for_every_dimension(tmp_path: Path) -> None:
    paths = _pair(tmp_path)
    _raises(paths, r"need coordinate values along every dimension", dims=["member", "time"])


def test_identical_dims_with_the_concat_dim_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'air' is in identical_dims but has"):
        refzarr.combine(scan_all(_pair(tmp_path)), concat_dims="time", identical_dims=["air"])
    with pytest.raises(ValueError, match=r"identical_dims names \['nope'\]"):
        refzarr.combine(scan_all(_pair(tmp_path)), concat_dims="time", identical_dims=["nope"])


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least one group"):
        refzarr.combine([], concat_dims="time")
    with pytest.raises(TypeError, match=r"groups\[0\] must be a RefGroup"):
        refzarr.combine([{}], concat_dims="time")  # type: ignore[list-item]
    with pytest.raises(ValueError, match="distinct non-empty names"):
        refzarr.combine([RefGroup()], concat_dims=["t", "t"])
    with pytest.raises(ValueError, match="compat must be"):
        refzarr.combine([RefGroup()], concat_dims="t", compat="no")  # type: ignore[arg-type]


# -- fill values (the HDF5 scanner's rule, NOTES.md): model-level groups ---------------------


def _piece(k: int, fill: Any, missing: bool) -> RefGroup:
    meta = ArrayMeta((2, 3), (1, 3), np.dtype("f4"), fill, (), {}, ("time", "x"))
    ids = np.array([[0], [MISSING if missing else 0]], np.int32)
    offsets = np.array([[0], [0 if missing else 12]], np.uint64)
    lengths = np.array([[12], [0 if missing else 12]], np.uint64)
    air = RefArray(meta, ChunkManifest.from_arrays([f"f{k}.nc"], ids, offsets, lengths))
    return RefGroup({}, {"air": air})


def test_null_fill_of_a_complete_file_takes_the_other_fill() -> None:
    combined = refzarr.combine(
        [_piece(0, None, missing=False), _piece(1, -9.0, missing=True)],
        concat_dims="time",
    )
    air = combined["air"]
    assert isinstance(air, RefArray)
    assert air.meta.fill_value == np.float32(-9.0)
    assert air.shape == (4, 3)


def test_null_fill_with_missing_chunks_conflicts_with_a_fill() -> None:
    with pytest.raises(IncompatibleError, match=r"f0\.nc has chunks never written and no fill"):
        refzarr.combine(
            [_piece(0, None, missing=True), _piece(1, -9.0, missing=False)], concat_dims="time"
        )


def test_different_fill_values_conflict() -> None:
    with pytest.raises(
        IncompatibleError, match=re.escape("fill value differs: np.float32(-9.0) in f0.nc")
    ):
        refzarr.combine(
            [_piece(0, -9.0, missing=True), _piece(1, 1.0, missing=True)], concat_dims="time"
        )


def _float_file(k: int, add_offset: Any) -> RefGroup:
    """One time step of ``x`` (float32, 4 values) whose attributes hold a NaN, passed
    through pickle as scan_many delivers it (its own NaN object)."""
    import pickle

    attrs = {"missing_value": float("nan"), "add_offset": add_offset}
    meta = ArrayMeta((1, 4), (1, 4), np.dtype("<f4"), float("nan"), (), attrs, ("time", "x"))
    manifest = ChunkManifest.from_arrays(
        [f"f{k}.nc"], np.zeros((1, 1), np.int32), np.full((1, 1), 8, np.uint64),
        np.full((1, 1), 16, np.uint64),
    )  # fmt: skip
    return pickle.loads(pickle.dumps(RefGroup({}, {"x": RefArray(meta, manifest)})))


@pytest.mark.parametrize(("second", "refused"), [(1.0, False), (1, True), (True, True)])
def test_packing_beside_a_nan_is_compared_as_json(second: Any, refused: bool) -> None:
    """NaN attributes take the exact comparison: a NaN equals a NaN, and ``add_offset``
    1.0 differs from 1 and True (as their JSON texts do)."""
    groups = [_float_file(0, 1.0), _float_file(1, second)]
    if not refused:
        assert refzarr.combine(groups, concat_dims="time")["x"].meta.shape == (2, 4)
        return
    with pytest.raises(IncompatibleError, match=r"attribute 'add_offset' differs: 1\.0 in"):
        refzarr.combine(groups, concat_dims="time")


def test_first_difference_names_dtypes() -> None:
    from refzarr.combine.identical import _first_difference

    assert _first_difference(np.zeros(2, "f4"), np.zeros(2, "f8")) == "dtypes float32 and float64"
