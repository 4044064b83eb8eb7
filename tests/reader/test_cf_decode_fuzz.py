"""Differential fuzz of decoded parity (issue 13): random netCDF4 and netCDF3 files carrying CF
encodings, opened by xarray's ``engine="netcdf4"`` and by refzarr's routes on the scanned set
(``refzarr.open_dataset`` and ``xr.open_dataset(refs, engine="refzarr")``), with random decoding
flags, must give the same dataset: values (exact, NaN-aware), dtypes, dimensions and their order,
variable order, attributes with their numpy types, the encoding keys xarray's CF contract relies
on, the warnings xarray gives and the errors it raises.

Files are written by netCDF4-python with masking and scaling off, so the stored values are
exactly the drawn ones (fill values, missing values, valid-range ends and extremes included).
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr
from hypothesis import event, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from xarray.coders import CFDatetimeCoder, CFTimedeltaCoder

import refzarr
from fuzzkit import fuzz_settings

NETCDF4_FORMATS = ["NETCDF4", "NETCDF4_CLASSIC"]
NETCDF3_FORMATS = ["NETCDF3_CLASSIC", "NETCDF3_64BIT_OFFSET", "NETCDF3_64BIT_DATA"]

_CLASSIC_INTS = ["i1", "i2", "i4"]
_EXTENDED_INTS = ["u1", "u2", "u4", "i8", "u8"]  # NETCDF4 and CDF-5 only
_FLOATS = ["f4", "f8"]

_CALENDARS = [
    "standard",
    "gregorian",
    "proleptic_gregorian",
    "noleap",
    "365_day",
    "360_day",
    "julian",
    "all_leap",
    "366_day",
]
_TIME_UNITS = ["days", "hours", "minutes", "seconds", "milliseconds"]
_REFERENCE_DATES = [
    "2000-01-01",
    "1970-01-01 00:00:00",
    "1850-01-01T00:00:00Z",
    "0001-01-01",
    "1999-12-31 12:30:00",
]


# -- what a file holds -------------------------------------------------------------------------


@dataclass
class VarSpec:
    """One variable: ``values`` is what is stored (raw), ``written`` how many records (of a
    variable along the record dimension) or whether anything (0: never written)."""

    name: str
    dtype: str  # numpy dtype string, "S1" for char, "str" for variable-length strings
    dims: tuple[str, ...]
    fill: Any = None  # None: no _FillValue attribute
    attrs: dict[str, Any] = field(default_factory=dict)
    values: Any = None
    written: int = 1
    endian: str = "native"  # "big": a big-endian HDF5 dataset (netCDF4 formats only)


@dataclass
class FileSpec:
    format: str
    dims: dict[str, int]
    unlimited: str | None
    variables: list[VarSpec]
    attrs: dict[str, Any]

    @property
    def netcdf4(self) -> bool:
        return self.format == "NETCDF4"

    @property
    def hdf5(self) -> bool:
        return self.format.startswith("NETCDF4")

    def ints(self) -> list[str]:
        extended = self.format in ("NETCDF4", "NETCDF3_64BIT_DATA")
        return _CLASSIC_INTS + (_EXTENDED_INTS if extended else [])


def write_file(path: Path, spec: FileSpec) -> None:
    """Write ``spec`` with netCDF4-python, storing exactly the drawn raw values."""
    with netCDF4.Dataset(path, "w", format=spec.format) as ds:
        for name, size in spec.dims.items():
            ds.createDimension(name, None if name == spec.unlimited else size)
        for key, value in spec.attrs.items():
            ds.setncattr(key, value)
        for var in spec.variables:
            _write_variable(ds, var, spec)


def _write_variable(ds: netCDF4.Dataset, var: VarSpec, spec: FileSpec) -> None:
    datatype: Any = str if var.dtype == "str" else var.dtype
    kwargs: dict[str, Any] = {}
    if var.endian == "big":
        datatype, kwargs["endian"] = np.dtype(var.dtype).newbyteorder(">"), "big"
    if var.fill is not None:
        kwargs["fill_value"] = var.fill
    v = ds.createVariable(var.name, datatype, var.dims, **kwargs)
    v.set_auto_maskandscale(False)
    if var.dtype == "S1":
        v.set_auto_chartostring(False)
    for key, value in var.attrs.items():
        v.setncattr(key, value)
    if var.values is None or var.written == 0:
        return
    if var.dims and var.dims[0] == spec.unlimited:
        v[: var.written] = var.values[: var.written]
    elif var.dims:
        v[:] = var.values
    else:
        v.assignValue(var.values)


# -- strategies --------------------------------------------------------------------------------


def _numbers(dtype: np.dtype[Any]) -> st.SearchStrategy[Any]:
    if dtype.kind == "f":
        return hnp.from_dtype(dtype, allow_nan=True, allow_infinity=True, allow_subnormal=False)
    return hnp.from_dtype(dtype)


@st.composite
def _typed_number(draw: st.DrawFn, dtype: str) -> Any:
    return np.array(draw(_numbers(np.dtype(dtype))), dtype=dtype)[()]


def _stored_values(
    draw: st.DrawFn, dtype: str, shape: tuple[int, ...], specials: list[Any]
) -> np.ndarray[Any, Any]:
    """Raw values: the special ones (fills, missing values, range ends) often, else any."""
    np_dtype = np.dtype(dtype)
    special = [np.array(s).astype(np_dtype)[()] for s in specials if _fits(s, np_dtype)]
    pool = (
        _numbers(np_dtype)
        if not special
        else st.one_of(st.sampled_from(special), _numbers(np_dtype))
    )
    return draw(hnp.arrays(np_dtype, shape, elements=pool))


def _fits(value: Any, dtype: np.dtype[Any]) -> bool:
    array = np.asarray(value)
    if array.size != 1:
        return False
    if array.dtype.kind == "f" and dtype.kind in "iu":
        item = float(array)
        if not math.isfinite(item) or item != int(item):
            return False
        info = np.iinfo(dtype)
        return bool(info.min <= item <= info.max)
    if array.dtype.kind in "iu" and dtype.kind in "iu":
        info = np.iinfo(dtype)
        return bool(info.min <= int(array) <= info.max)
    if array.dtype.kind == "f" and dtype.kind == "f":
        item = float(array)
        return not math.isfinite(item) or abs(item) <= float(np.finfo(dtype).max)
    return True


def _draw_endian(draw: st.DrawFn, spec: FileSpec, var: VarSpec) -> None:
    """Big-endian HDF5 datasets now and then -- but not signed ones with ``_Unsigned="true"``
    and a ``_FillValue``: xarray's ``_Unsigned`` decoding views the fill value's big-endian
    bytes as native, so ``engine="netcdf4"`` masks a byte-swapped value there (1 as 256)
    where netCDF4-python masks the fill value; refzarr hands xarray native data and masks
    as netCDF4-python does (XARRAY_UNSIGNED_BIG_ENDIAN, pinned below)."""
    unsigned_fill = var.attrs.get("_Unsigned") == "true" and var.fill is not None
    if spec.hdf5 and not (unsigned_fill and var.dtype.startswith("i")) and draw(st.booleans()):
        var.endian = "big"


def _shape(spec: FileSpec, dims: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(spec.dims[d] for d in dims)


@st.composite
def _dims_for(draw: st.DrawFn, spec: FileSpec, trailing: tuple[str, ...] = ()) -> tuple[str, ...]:
    choices: list[tuple[str, ...]] = [(), ("x",), ("time",), ("time", "x")]
    return draw(st.sampled_from(choices)) + trailing


def _written(draw: st.DrawFn, spec: FileSpec, dims: tuple[str, ...]) -> int:
    """How many records a record variable gets (the others: all or nothing)."""
    if dims and dims[0] == spec.unlimited:
        return draw(st.integers(0, spec.dims["time"]))
    return draw(st.sampled_from([1, 1, 1, 0]))


@st.composite
def _mask_attrs(draw: st.DrawFn, spec: FileSpec, dtype: str, var: VarSpec) -> list[Any]:
    """_FillValue, missing_value (scalar or vector), valid_* on ``var``; the special values."""
    np_dtype = np.dtype(dtype)
    specials: list[Any] = []
    fill_kind = draw(st.sampled_from(["none", "none", "value", "default", "nan"]))
    if fill_kind == "value":
        var.fill = draw(_typed_number(dtype))
    elif fill_kind == "default":
        var.fill = np.array(netCDF4.default_fillvals[np_dtype.str[1:]], dtype)[()]
    elif fill_kind == "nan" and np_dtype.kind == "f":
        var.fill = np_dtype.type(np.nan)
    if var.fill is not None:
        specials.append(var.fill)
    specials.append(netCDF4.default_fillvals[np_dtype.str[1:]])
    missing = draw(st.sampled_from(["none", "none", "scalar", "vector"]))
    if missing != "none":
        mtype = draw(st.sampled_from([dtype, dtype, "f8"] if spec.netcdf4 else [dtype, "f8"]))
        count = 1 if missing == "scalar" else draw(st.integers(2, 3))
        values = [draw(_typed_number(mtype)) for _ in range(count)]
        if var.fill is not None and draw(st.booleans()):
            values[0] = np.array(var.fill).astype(mtype)[()]  # both, and equal
        var.attrs["missing_value"] = np.array(values, dtype=mtype)
        specials.extend(values)
    if np_dtype.kind != "S" and draw(st.booleans()):
        low, high = sorted([draw(_typed_number(dtype)), draw(_typed_number(dtype))])
        which = draw(st.sampled_from(["valid_range", "valid_min", "valid_max", "both"]))
        if which == "valid_range":
            var.attrs["valid_range"] = np.array([low, high], dtype)
        if which in ("valid_min", "both"):
            var.attrs["valid_min"] = np.array(low, dtype)
        if which in ("valid_max", "both"):
            var.attrs["valid_max"] = np.array(high, dtype)
        specials.extend([low, high])
    return specials


@st.composite
def packed_variables(draw: st.DrawFn, spec: FileSpec, name: str) -> VarSpec:
    """Integers packed with ``scale_factor`` / ``add_offset`` (float32 or float64, or one of
    them, or neither), ``_Unsigned``, fills and missing values."""
    dtype = draw(st.sampled_from(spec.ints()))
    dims = draw(_dims_for(spec))
    var = VarSpec(name, dtype, dims, written=_written(draw, spec, dims))
    specials = draw(_mask_attrs(spec, dtype, var))
    unsigned = draw(st.sampled_from([None, None, "true", "false"]))
    if unsigned is not None:
        var.attrs["_Unsigned"] = unsigned
    which = draw(st.sampled_from(["both", "scale", "offset", "none"]))
    if which in ("both", "scale"):
        stype = draw(st.sampled_from(_FLOATS))
        scale = draw(st.sampled_from([0.1, 0.5, 2.0, 1e-3, 0.01, 3.0]))
        var.attrs["scale_factor"] = np.array(scale, stype)[()]
    if which in ("both", "offset"):
        otype = draw(st.sampled_from(_FLOATS))
        offset = draw(st.sampled_from([0.0, 10.5, -273.15, 1e4, 5.0]))
        var.attrs["add_offset"] = np.array(offset, otype)[()]
    var.attrs["units"] = draw(st.sampled_from(["K", "m s-1", "1"]))
    var.values = _stored_values(draw, dtype, _shape(spec, dims), specials)
    _draw_endian(draw, spec, var)
    return var


@st.composite
def float_variables(draw: st.DrawFn, spec: FileSpec, name: str) -> VarSpec:
    """Floats with NaN / numeric / default fills, missing values, NaN and inf values."""
    dtype = draw(st.sampled_from(_FLOATS))
    dims = draw(_dims_for(spec))
    var = VarSpec(name, dtype, dims, written=_written(draw, spec, dims))
    specials = draw(_mask_attrs(spec, dtype, var))
    if draw(st.booleans()):
        var.attrs["scale_factor"] = np.array(2.0, draw(st.sampled_from(_FLOATS)))[()]
    var.values = _stored_values(draw, dtype, _shape(spec, dims), specials)
    _draw_endian(draw, spec, var)
    return var


_CHARS = st.sampled_from([b"a", b"Z", b" ", b"", b"\xc3", b"\xa9", b"0", b"-"])


@st.composite
def char_variables(draw: st.DrawFn, spec: FileSpec, name: str) -> VarSpec:
    """``char`` arrays with a string-length dimension, with or without ``_Encoding``."""
    dims = draw(_dims_for(spec, ("nchar",)))
    var = VarSpec(name, "S1", dims, written=_written(draw, spec, dims))
    encoding = draw(st.sampled_from([None, None, "utf-8", "ascii"]))
    if encoding is not None:
        var.attrs["_Encoding"] = encoding
    if draw(st.booleans()):
        var.fill = np.bytes_(draw(st.sampled_from([b"x", b"\x00", b" "])))
    if draw(st.booleans()):
        var.attrs["long_name"] = draw(st.sampled_from(["station name", "", "é", "a\x00b"]))
    if draw(st.booleans()):
        var.attrs["flag"] = np.int16(draw(st.integers(-5, 5)))  # a type JSON loses
    var.values = draw(hnp.arrays(np.dtype("S1"), _shape(spec, dims), elements=_CHARS))
    return var


@st.composite
def string_variables(draw: st.DrawFn, spec: FileSpec, name: str) -> VarSpec:
    """Variable-length strings (netCDF4 only)."""
    dims = draw(_dims_for(spec))
    var = VarSpec(name, "str", dims, written=_written(draw, spec, dims))
    text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=5)
    shape = _shape(spec, dims)
    var.values = np.array(
        draw(st.lists(text, min_size=math.prod(shape), max_size=math.prod(shape))), dtype=object
    ).reshape(shape)
    return var


@st.composite
def time_variables(draw: st.DrawFn, spec: FileSpec, name: str) -> VarSpec:
    """Times: "<unit> since <date>" with any calendar (or none), fills, numbers or not."""
    types = [t for t in ["f8", "f4", "i4", "i8", "i2"] if t in spec.ints() + _FLOATS]
    dtype = draw(st.sampled_from(types))
    dims = ("time",) if name == "time" else draw(_dims_for(spec))
    var = VarSpec(name, dtype, dims, written=_written(draw, spec, dims))
    unit = draw(st.sampled_from(_TIME_UNITS))
    var.attrs["units"] = f"{unit} since {draw(st.sampled_from(_REFERENCE_DATES))}"
    calendar = draw(st.sampled_from([None, *_CALENDARS]))
    if calendar is not None:
        var.attrs["calendar"] = calendar
    specials: list[Any] = [netCDF4.default_fillvals[np.dtype(dtype).str[1:]]]
    if draw(st.booleans()):
        var.fill = np.array(draw(st.sampled_from([-1, 0, 9999])), dtype)[()]
        specials.append(var.fill)
    if draw(st.booleans()):
        var.attrs["missing_value"] = np.array(-2, dtype)[()]
        specials.append(-2)
    element = (
        st.integers(-1000, 100_000)
        if np.dtype(dtype).kind in "iu"
        else st.floats(-1000, 100_000, width=32) | st.just(math.nan)
    )
    np_dtype = np.dtype(dtype)
    elements = st.one_of(
        st.sampled_from([np.array(s).astype(np_dtype)[()] for s in specials]),
        element.filter(lambda v: _fits(v, np_dtype)).map(lambda v: np_dtype.type(v)),
    )
    var.values = draw(hnp.arrays(np_dtype, _shape(spec, dims), elements=elements))
    _draw_endian(draw, spec, var)
    return var


@st.composite
def timedelta_variables(draw: st.DrawFn, spec: FileSpec, name: str) -> VarSpec:
    """Durations: units without "since" (``decode_timedelta``)."""
    dtype = draw(st.sampled_from(["f8", "i4", "i2", "f4"]))
    dims = draw(_dims_for(spec))
    var = VarSpec(name, dtype, dims, written=_written(draw, spec, dims))
    var.attrs["units"] = draw(st.sampled_from(["days", "hours", "seconds", "minutes"]))
    if draw(st.booleans()):
        var.fill = np.array(-99, dtype)[()]
    element = st.integers(-1000, 1000).map(np.dtype(dtype).type)
    specials = [np.dtype(dtype).type(-99)]
    var.values = draw(
        hnp.arrays(
            np.dtype(dtype),
            _shape(spec, dims),
            elements=st.one_of(st.sampled_from(specials), element),
        )
    )
    return var


def _attr_values(spec: FileSpec) -> st.SearchStrategy[Any]:
    """Attribute values: text, numbers of every type the format has (one or several, NaN
    and infinities too), and arrays of strings (``NC_STRING``, netCDF4 only)."""
    numbers = st.sampled_from(spec.ints() + _FLOATS).flatmap(
        lambda t: st.lists(
            st.integers(0 if t[0] == "u" else -100, 100)
            | st.sampled_from([math.nan, -math.inf] if t[0] == "f" else [0]),
            min_size=1,
            max_size=3,
        ).map(lambda v: np.array(v, dtype=t))
    )
    values = [st.sampled_from(["", "text", "é ü", "degrees_north"]), numbers]
    if spec.netcdf4:
        values.append(st.lists(st.sampled_from(["a", "", "ü"]), min_size=2, max_size=3))
    return st.one_of(values)


@st.composite
def file_specs(draw: st.DrawFn, formats: list[str]) -> FileSpec:
    """A file: dimensions ``time`` (unlimited or not), ``x``, ``nchar``, ``nv``; data variables
    of every kind; maybe a ``time`` coordinate, an ``x`` coordinate with bounds, an auxiliary
    coordinate named by a ``coordinates`` attribute; global attributes."""
    fmt = draw(st.sampled_from(formats))
    unlimited = draw(st.booleans())
    ntime = draw(st.integers(0 if unlimited else 1, 3))
    dims = {"time": ntime, "x": draw(st.integers(1, 3)), "nchar": draw(st.integers(1, 4))}
    dims["nv"] = 2
    spec = FileSpec(fmt, dims, "time" if unlimited else None, [], {})
    spec.attrs = dict(
        draw(
            st.lists(
                st.tuples(st.sampled_from(["title", "a", "b", "count"]), _attr_values(spec)),
                max_size=3,
                unique_by=lambda kv: kv[0],
            )
        )
    )
    kinds: list[Callable[[FileSpec, str], st.SearchStrategy[VarSpec]]] = [
        packed_variables,
        float_variables,
        char_variables,
        time_variables,
        timedelta_variables,
    ]
    if spec.netcdf4:
        kinds.append(string_variables)
    if draw(st.booleans()):
        spec.variables.append(draw(time_variables(spec, "time")))
    if draw(st.booleans()):
        x = VarSpec("x", "f8", ("x",), attrs={"units": "m"})
        x.values = np.arange(dims["x"], dtype="f8") * 1.5
        spec.variables.append(x)
        if draw(st.booleans()):
            x.attrs["bounds"] = "x_bnds"
            bounds = VarSpec("x_bnds", "f8", ("x", "nv"))
            bounds.values = np.stack([x.values - 0.5, x.values + 0.5], axis=1)
            spec.variables.append(bounds)
    count = draw(st.integers(1, 4))
    names = [f"v{k}" for k in range(count)]
    for name in names:
        kind = draw(st.sampled_from(kinds))
        spec.variables.append(draw(kind(spec, name)))
    if draw(st.booleans()):
        lat = VarSpec("lat", "f4", ("x",), attrs={"units": "degrees_north"})
        lat.values = np.linspace(-10, 10, dims["x"], dtype="f4")
        spec.variables.append(lat)
        target = draw(st.sampled_from([v for v in spec.variables if v.name in names]))
        target.attrs["coordinates"] = "lat"
    order = draw(st.permutations(range(len(spec.variables))))
    spec.variables = [spec.variables[k] for k in order]
    return spec


_DECODE_TIMES = st.one_of(
    st.booleans(),
    st.builds(
        CFDatetimeCoder,
        use_cftime=st.sampled_from([None, True, False]),
        time_unit=st.sampled_from(["ns", "s", "ms", "us"]),
    ),
)
_DECODE_TIMEDELTA = st.one_of(
    st.sampled_from([None, True, False]),
    st.builds(CFTimedeltaCoder, time_unit=st.sampled_from([None, "s", "ns"])),
)


@st.composite
def open_flags(draw: st.DrawFn, spec: FileSpec) -> dict[str, Any]:
    """Decoding options of ``xr.open_dataset`` (only those drawn non-default are passed)."""
    flags: dict[str, Any] = {}
    for key, strategy in {
        "decode_cf": st.booleans(),
        "mask_and_scale": st.booleans(),
        "decode_times": _DECODE_TIMES,
        "decode_timedelta": _DECODE_TIMEDELTA,
        "use_cftime": st.sampled_from([True, False]),
        "concat_characters": st.booleans(),
        "decode_coords": st.sampled_from([True, False, "coordinates", "all"]),
        "chunks": st.sampled_from([{}, {"x": 1}]),
    }.items():
        if draw(st.booleans()):
            flags[key] = draw(strategy)
    if draw(st.booleans()):
        names = [v.name for v in spec.variables]
        dropped = st.lists(st.sampled_from(names), max_size=2, unique=True) | st.sampled_from(names)
        flags["drop_variables"] = draw(dropped)
    return flags


# -- comparing -------------------------------------------------------------------------------

ENCODING_KEYS = ("dtype", "_FillValue", "scale_factor", "add_offset", "units", "calendar")


@dataclass
class Opened:
    """What one route gave: a loaded dataset, or the error raised; the warnings given."""

    dataset: xr.Dataset | None
    error: BaseException | None
    warnings: list[tuple[type[Warning], str]]


def _open(opener: Callable[[], xr.Dataset]) -> Opened:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ds = opener()
            ds.load()
        except Exception as exc:  # compared with what the netCDF4 engine raised
            return Opened(None, exc, _warned(caught))
    return Opened(ds, None, _warned(caught))


STORED_CHUNKS_WARNING = "separate the stored chunks"
"""xarray's warning when explicit ``chunks`` split a variable's ``preferred_chunks``. refzarr's
engine gives every variable the chunks of its references as ``preferred_chunks`` (docs/
reading.md, "With dask": as ``engine="zarr"`` does), also a netCDF3 variable or a contiguous
HDF5 dataset (one chunk, or one per record), where ``engine="netcdf4"`` gives none: so only
refzarr warns there. Not compared."""


def _warned(caught: list[warnings.WarningMessage]) -> list[tuple[type[Warning], str]]:
    found = {
        (w.category, str(w.message)) for w in caught if STORED_CHUNKS_WARNING not in str(w.message)
    }
    return sorted(found, key=str)


def assert_same_values(got: Any, expected: Any, where: str) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype, f"{where}: dtype {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"{where}: shape {got.shape} != {expected.shape}"
    if expected.dtype.kind in "fc":
        np.testing.assert_array_equal(got, expected, strict=True, err_msg=where)
    elif expected.dtype.kind in "mM":
        assert np.array_equal(got, expected, equal_nan=True), f"{where}: {got} != {expected}"
    else:
        assert got.tolist() == expected.tolist(), f"{where}: {got!r} != {expected!r}"


def _same_attr(got: Any, expected: Any) -> bool:
    if isinstance(expected, str | bytes):
        return type(got) is type(expected) and got == expected
    g, e = np.asarray(got), np.asarray(expected)
    if g.dtype != e.dtype or g.shape != e.shape:
        return False
    if type(got) is not type(expected):  # np.float64 / arrays as netCDF4 gives them
        return False
    return bool(np.array_equal(g, e, equal_nan=g.dtype.kind in "fc"))


def assert_same_attrs(got: dict[str, Any], expected: dict[str, Any], where: str) -> None:
    assert list(got) == list(expected), f"{where}: attribute names {list(got)} != {list(expected)}"
    for key, value in expected.items():
        assert _same_attr(got[key], value), (
            f"{where}: attribute {key}: {got[key]!r} ({type(got[key])}) "
            f"!= {value!r} ({type(value)})"
        )


def assert_same_dataset(got: xr.Dataset, expected: xr.Dataset, route: str) -> None:
    assert list(got.variables) == list(expected.variables), f"{route}: variable order"
    assert list(got.dims) == list(expected.dims), f"{route}: dims {got.dims} != {expected.dims}"
    assert list(got.coords) == list(expected.coords), f"{route}: coords"
    assert_same_attrs(got.attrs, expected.attrs, f"{route}: global")
    for name, var in expected.variables.items():
        where = f"{route}: {name}"
        other = got.variables[name]
        assert other.dims == var.dims, f"{where}: dims {other.dims} != {var.dims}"
        assert_same_values(other.values, var.values, where)
        assert_same_attrs(other.attrs, var.attrs, where)
        for key in ENCODING_KEYS:
            assert (key in other.encoding) == (key in var.encoding), (
                f"{where}: encoding[{key!r}] in one only: {other.encoding.get(key)!r} "
                f"vs {var.encoding.get(key)!r}"
            )
            if key == "dtype" and key in var.encoding:
                assert other.encoding[key] == var.encoding[key], (
                    f"{where}: encoding['dtype'] {other.encoding[key]!r} != {var.encoding[key]!r}"
                )
            elif key in var.encoding:
                assert _same_attr(other.encoding[key], var.encoding[key]), (
                    f"{where}: encoding[{key!r}] {other.encoding[key]!r} != {var.encoding[key]!r}"
                )
    unlimited = expected.encoding.get("unlimited_dims", set())
    assert got.encoding.get("unlimited_dims", set()) == unlimited, f"{route}: unlimited_dims"


def assert_same_outcome(got: Opened, expected: Opened, route: str) -> None:
    if expected.error is not None:
        assert got.error is not None, f"{route}: opened, netCDF4 raised {expected.error!r}"
        assert type(got.error) is type(expected.error), (
            f"{route}: raised {got.error!r}, netCDF4 raised {expected.error!r}"
        )
        return
    assert got.error is None, f"{route}: raised {got.error!r}"
    assert got.dataset is not None
    assert expected.dataset is not None
    assert_same_dataset(got.dataset, expected.dataset, route)
    assert got.warnings == expected.warnings, f"{route}: warnings"


@contextlib.contextmanager
def _workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fuzzcf-") as tmp:
        yield Path(tmp)


def check_parity(spec: FileSpec, flags: dict[str, Any], given: str = "json") -> str:
    """netCDF4's view of the file and refzarr's views of its scan are the same:
    ``refzarr.open_dataset`` of the set ``given`` ("json", "parquet", or "group": the scan
    itself) and ``xr.open_dataset`` of the JSON set with ``engine="refzarr"``. Returns what
    ``engine="netcdf4"`` did: "opened", or the name of the error it raised."""
    with _workdir() as tmp:
        path = tmp / "data.nc"
        write_file(path, spec)
        refs = tmp / "refs.json"
        group = refzarr.scan(str(path))
        refzarr.write(group, refs)
        source: Any = {"json": refs, "group": group, "parquet": tmp / "refs.parq"}[given]
        if given == "parquet":
            refzarr.write(group, source)
        expected = _open(lambda: xr.open_dataset(path, engine="netcdf4", **flags))
        routes = {
            f"refzarr.open_dataset({given})": lambda: refzarr.open_dataset(source, **flags),
            'engine="refzarr"': lambda: xr.open_dataset(refs, engine="refzarr", **flags),
        }
        for route, opener in routes.items():
            assert_same_outcome(_open(opener), expected, route)
    error = expected.error
    return "opened" if error is None else type(error).__name__


# -- the fuzz tests ----------------------------------------------------------------------------

_GIVEN = st.sampled_from(["json", "json", "group", "parquet"])


@given(data=st.data())
@fuzz_settings(ci_examples=10)
def test_netcdf4_decoded_like_netcdf4_engine(data: st.DataObject) -> None:
    spec = data.draw(file_specs(NETCDF4_FORMATS), label="file")
    outcome = check_parity(spec, data.draw(open_flags(spec), "flags"), data.draw(_GIVEN, "given"))
    event(f"engine='netcdf4': {outcome}")


@given(data=st.data())
@fuzz_settings(ci_examples=15)
def test_netcdf3_decoded_like_netcdf4_engine(data: st.DataObject) -> None:
    spec = data.draw(file_specs(NETCDF3_FORMATS), label="file")
    outcome = check_parity(spec, data.draw(open_flags(spec), "flags"), data.draw(_GIVEN, "given"))
    event(f"engine='netcdf4': {outcome}")


# -- what the fuzz found, pinned ---------------------------------------------------------------


def _one_variable(fmt: str, var: VarSpec, ntime: int = 3) -> FileSpec:
    return FileSpec(fmt, {"time": ntime, "x": 3, "nchar": 2, "nv": 2}, "time", [var], {})


@pytest.mark.parametrize("fmt", NETCDF3_FORMATS)
def test_unsigned_fill_of_netcdf3_is_masked(fmt: str) -> None:
    """A netCDF3 ``short`` with ``_Unsigned="true"`` and ``_FillValue=1`` read 0.1 where
    netCDF4 masks: xarray viewed the fill value's big-endian bytes as native (256)."""
    var = VarSpec("v", "i2", ("x",), fill=np.int16(1), values=np.array([1, 2, -1], "i2"))
    var.attrs = {"_Unsigned": "true", "scale_factor": np.float32(0.1)}
    spec = _one_variable(fmt, var)
    check_parity(spec, {})
    with _workdir() as tmp:
        write_file(tmp / "u.nc", spec)
        ds = refzarr.open_dataset(refzarr.scan(str(tmp / "u.nc")))
        assert np.isnan(ds["v"].values[0])
        assert ds["v"].values[2] == np.float32(6553.5)


def test_big_endian_unsigned_fill_masked_like_netcdf4_python() -> None:
    """XARRAY_UNSIGNED_BIG_ENDIAN: on a big-endian netCDF4 variable engine="netcdf4" masks a
    byte-swapped fill value (xarray's ``_Unsigned`` decoding); refzarr masks the fill value,
    as netCDF4-python does."""
    var = VarSpec("v", "i2", ("x",), fill=np.int16(1), values=np.array([1, 2, -1], "i2"))
    var.attrs = {"_Unsigned": "true", "scale_factor": np.float32(0.1)}
    var.endian = "big"
    with _workdir() as tmp:
        path = tmp / "be.nc"
        write_file(path, _one_variable("NETCDF4", var))
        with netCDF4.Dataset(path) as nc:
            truth = nc["v"][:]
        ds = refzarr.open_dataset(refzarr.scan(str(path)))
        assert np.isnan(ds["v"].values[0])
        assert truth.mask[0]
        assert ds["v"].values[1:].tolist() == truth[1:].astype("f4").tolist()
        assert ds["v"].encoding["dtype"] == np.dtype(">i2")  # the stored type, as netCDF4's
        with xr.open_dataset(path, engine="netcdf4") as nc4:
            assert not np.isnan(nc4["v"].values[0])  # xarray's own: fixed there, not here


def test_strings_along_partly_written_unlimited_dimension() -> None:
    """A variable-length string variable whose records stop before its unlimited dimension's
    end was scanned at its HDF5 length: xarray refused the dataset (conflicting sizes)."""
    text = VarSpec("s", "str", ("time",), values=np.array(["a", "b", "c"], object), written=1)
    other = VarSpec("f", "f4", ("time",), values=np.arange(3, dtype="f4"), written=3)
    spec = FileSpec("NETCDF4", {"time": 3}, "time", [text, other], {})
    check_parity(spec, {})
    with _workdir() as tmp:
        write_file(tmp / "s.nc", spec)
        group = refzarr.scan(str(tmp / "s.nc"))
        ds = refzarr.open_dataset(group)
        assert ds["s"].values.tolist() == ["a", "", ""]
        assert ds.encoding["unlimited_dims"] == {"time"}


@pytest.mark.parametrize("chunks", [{"x": 1}, {}, None])
def test_strings_keep_their_width_in_dask_chunks(chunks: Any) -> None:
    """Read chunk by chunk, variable-length strings were made fixed-width per dask chunk, and
    dask kept the first chunk's width: ``["", "00"]`` loaded as ``["", "0"]``. They are read
    as objects and made ``str`` whole by xarray's decoding (the backend's ``encoding["dtype"]``
    is ``str``, as netCDF4's); all-empty strings are ``<U1`` as netCDF4 gives them, not
    ``<U2``."""
    text = VarSpec("s", "str", ("x",), values=np.array(["", "00", "abc"], object))
    empty = VarSpec("e", "str", ("x",), values=np.array(["", "", ""], object))
    spec = FileSpec("NETCDF4", {"x": 3}, None, [text, empty], {})
    flags = {} if chunks is None else {"chunks": chunks}
    check_parity(spec, flags)
    with _workdir() as tmp:
        write_file(tmp / "s.nc", spec)
        ds = refzarr.open_dataset(refzarr.scan(str(tmp / "s.nc")), **flags)
        assert ds["s"].values.tolist() == ["", "00", "abc"]
        assert ds["e"].values.dtype == np.dtype("<U1")
        assert ds["s"].encoding["dtype"] == np.dtype("<U3")  # as engine="netcdf4" reports


@pytest.mark.parametrize("fmt", ["NETCDF4", "NETCDF3_CLASSIC"])
@pytest.mark.parametrize("flags", [{}, {"mask_and_scale": False}, {"decode_cf": False}])
def test_char_fill_value_nul_like_netcdf4(fmt: str, flags: dict[str, Any]) -> None:
    """A ``char`` variable's ``_FillValue`` of NUL is ``b"\\x00"`` (engine="netcdf4"), not
    ``b""`` (the scanned text attribute), in ``attrs`` and in ``encoding``."""
    var = VarSpec("c", "S1", ("x", "nchar"), fill=np.bytes_(b""))
    var.values = np.array([[b"a", b""], [b"", b""], [b"b", b"c"]], "S1")
    var.attrs = {"flag": np.int16(1)}  # a recorded type: masking by attributes only
    spec = FileSpec(fmt, {"x": 3, "nchar": 2}, None, [var], {})
    check_parity(spec, flags)
    with _workdir() as tmp:
        write_file(tmp / "c.nc", spec)
        ds = refzarr.open_dataset(refzarr.scan(str(tmp / "c.nc")), **flags)
        where = ds["c"].encoding if not flags else ds["c"].attrs
        assert bytes(where["_FillValue"]) == b"\x00"
