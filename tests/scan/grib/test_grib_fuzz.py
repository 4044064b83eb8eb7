"""Differential fuzz of the GRIB scanner and the ``refzarr.grib`` codec: random GRIB 1 and 2
files written with ecCodes (its own samples, random grids, packings, bitmaps, values, levels,
steps, times and parameters), scanned by refzarr and read back through refzarr's reader and
through fsspec + zarr on the kerchunk JSON (Parquet on a subset), compared with ecCodes'
decoding of the same messages: values (NaN where missing), every point's latitude and
longitude, and the time, step, level, member and name of every field.

A file is drawn as a plain `FileSpec` (so that a failing example prints as data) and written
by `write_file`; combinations ecCodes itself refuses to write or to read back are rejected,
not counted as findings.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gribkit import (
    assert_matches_eccodes,
    eccodes_fields,
    eccodes_handles,
    in_rows,
    leaf_groups,
    scan,
)
from hypothesis import event, given, reject
from hypothesis import strategies as st

import refzarr
from fuzzkit import fuzz_settings
from refzarr import RefArray, RefGroup
from refzarr.codecs.grib import GribCodec, grib2_fields, row_order
from refzarr.codecs.grib_eccodes import load_eccodes
from roundtrip import open_zarr_group

# fsspec reads Parquet reference sets with fastparquet, which pandas deprecates
FASTPARQUET = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")

Keys = tuple[tuple[str, Any], ...]
"""ecCodes keys set in this order."""

MISSING_IN = 1e20
"""The missing value the writer marks missing points with (never a drawn value)."""


@dataclass(frozen=True)
class GridSpec:
    edition: int
    sample: str
    keys: Keys
    points: int


@dataclass(frozen=True)
class PackSpec:
    packing: str
    bits: int | None
    decimal: int | None
    extra: Keys = ()


@dataclass(frozen=True)
class ValuesSpec:
    seed: int
    kind: str
    scale: float
    offset: float
    missing: float


@dataclass(frozen=True)
class FieldSpec:
    keys: Keys
    values: ValuesSpec


@dataclass(frozen=True)
class FileSpec:
    grid: GridSpec
    packing: PackSpec
    bitmap: bool
    fields: tuple[FieldSpec, ...]
    parquet: bool = False
    per_message: int = 1
    """GRIB2: fields per message (sections 4 to 7 repeated; a bitmap equal to the one before
    written as "the bitmap defined before", indicator 254)."""


# -- strategies --------------------------------------------------------------------------------

INCREMENTS = (0.25, 0.5, 1.0, 1.5, 2.5)


@st.composite
def scanning(draw: st.DrawFn, edition: int) -> dict[str, int]:
    flags = {
        "iScansNegatively": draw(st.integers(0, 1)),
        "jScansPositively": draw(st.integers(0, 1)),
        "jPointsAreConsecutive": draw(st.sampled_from([0, 0, 0, 1])),
    }
    if edition == 2:
        flags["alternativeRowScanning"] = draw(st.sampled_from([0, 0, 1]))
    return flags


def _corners(lats: tuple[float, float], lons: tuple[float, float]) -> dict[str, float]:
    """The first and last grid points' keys."""
    return {
        "latitudeOfFirstGridPointInDegrees": lats[0],
        "latitudeOfLastGridPointInDegrees": lats[1],
        "longitudeOfFirstGridPointInDegrees": lons[0],
        "longitudeOfLastGridPointInDegrees": lons[1],
    }


@st.composite
def latlon_grid(draw: st.DrawFn, edition: int, rotated: bool) -> GridSpec:
    ni, nj = draw(st.integers(1, 9)), draw(st.integers(1, 7))
    di, dj = draw(st.sampled_from(INCREMENTS)), draw(st.sampled_from(INCREMENTS))
    south = draw(st.integers(-80, 60))
    west = draw(st.integers(-180, 340))
    flags = draw(scanning(edition))
    lats = (south, south + (nj - 1) * dj)
    lons = (west, west + (ni - 1) * di)
    if not flags["jScansPositively"]:
        lats = lats[::-1]
    if flags["iScansNegatively"]:
        lons = lons[::-1]
    keys: dict[str, Any] = dict(flags)
    keys.update(Ni=ni, Nj=nj, iDirectionIncrementInDegrees=di, jDirectionIncrementInDegrees=dj)
    keys.update(_corners(lats, lons))
    if rotated:
        keys["latitudeOfSouthernPoleInDegrees"] = draw(st.integers(-90, 0))
        keys["longitudeOfSouthernPoleInDegrees"] = draw(st.integers(-180, 180))
    if edition == 2:
        keys["numberOfDataPoints"] = ni * nj
    kind = "rotated_ll" if rotated else "regular_ll"
    sample = f"{kind}_sfc_grib{edition}"
    return GridSpec(edition, sample, tuple(keys.items()), ni * nj)


@st.composite
def projected_grid(draw: st.DrawFn, edition: int, kind: str) -> GridSpec:
    nx, ny = draw(st.integers(1, 8)), draw(st.integers(1, 7))
    flags = draw(scanning(edition))
    keys: dict[str, Any] = {}
    if kind == "lambert":
        if edition == 2:
            keys["gridType"] = "lambert"
        else:
            keys["dataRepresentationType"] = 3
        latin = draw(st.integers(20, 60))
        keys.update(Latin1InDegrees=latin, Latin2InDegrees=latin)
        keys["LoVInDegrees"] = draw(st.integers(0, 40))
        if edition == 2:
            keys["LaDInDegrees"] = latin
    keys.update(flags)
    keys.update(Nx=nx, Ny=ny, DxInMetres=draw(st.sampled_from([2500, 10000, 40000])))
    keys["DyInMetres"] = keys["DxInMetres"]
    keys["latitudeOfFirstGridPointInDegrees"] = draw(st.integers(30, 60))
    keys["longitudeOfFirstGridPointInDegrees"] = draw(st.integers(-20, 30))
    if edition == 2:
        keys["numberOfDataPoints"] = nx * ny
    sample = f"polar_stereographic_pl_grib{edition}" if kind != "lambert" else None
    sample = sample or ("GRIB2" if edition == 2 else "regular_ll_sfc_grib1")
    return GridSpec(edition, sample, tuple(keys.items()), nx * ny)


def gaussian_grid(edition: int, kind: str) -> GridSpec:
    sample = f"{kind}_sfc_grib{edition}" if kind == "regular_gg" else f"{kind}_pl_32_grib{edition}"
    return GridSpec(edition, sample, (), 8192 if kind == "regular_gg" else 6114)


@st.composite
def spectral_grid(draw: st.DrawFn) -> GridSpec:
    j = draw(st.integers(2, 12))
    subset = draw(st.integers(1, j))
    keys = (("J", j), ("K", j), ("M", j), ("JS", subset), ("KS", subset), ("MS", subset))
    return GridSpec(2, "sh_sfc_grib2", keys, (j + 1) * (j + 2))


@st.composite
def grids(draw: st.DrawFn) -> GridSpec:
    edition = draw(st.sampled_from([1, 2]))
    kinds = ["regular_ll", "rotated_ll", "regular_gg", "reduced_gg", "polar_stereographic",
             "lambert"] + (["sh"] if edition == 2 else [])  # fmt: skip
    kind = draw(st.sampled_from(kinds))
    if kind in ("regular_ll", "rotated_ll"):
        return draw(latlon_grid(edition, kind == "rotated_ll"))
    if kind in ("regular_gg", "reduced_gg"):
        return gaussian_grid(edition, kind)
    if kind == "sh":
        return draw(spectral_grid())
    return draw(projected_grid(edition, kind))


# not grid_simple_log_preprocessing (experimental): ecCodes 2.38 aborts the process on
# a field with negative values
GRID_PACKINGS = {
    2: ("grid_simple", "grid_ccsds", "grid_jpeg", "grid_png", "grid_complex",
        "grid_complex_spatial_differencing", "grid_ieee", "grid_second_order",
        "grid_simple_matrix"),
    1: ("grid_simple", "grid_ieee", "grid_second_order", "grid_simple_matrix",
        "grid_second_order_row_by_row", "grid_second_order_constant_width",
        "grid_second_order_general_grib1", "grid_second_order_no_boustrophedonic"),
}  # fmt: skip


@st.composite
def packings(draw: st.DrawFn, grid: GridSpec) -> PackSpec:
    if grid.sample.startswith("sh_"):
        packing = draw(st.sampled_from(["spectral_complex", "spectral_simple"]))
    else:
        packing = draw(st.sampled_from(GRID_PACKINGS[grid.edition]))
    extra: Keys = ()
    if packing == "grid_ieee":
        return PackSpec(packing, None, None, (("precision", draw(st.sampled_from([1, 2]))),))
    if packing == "grid_complex_spatial_differencing":
        extra = (("orderOfSpatialDifferencing", draw(st.sampled_from([1, 2]))),)
    bits = draw(st.one_of(st.none(), st.integers(0, 32)))
    if packing == "grid_png" and bits is not None:
        bits = draw(st.sampled_from([1, 2, 4, 8, 16, 24, 32]))
    if packing == "spectral_complex" and bits is not None:
        bits = max(bits, 8)  # 1 bit: ecCodes 2.38 corrupts its heap on a constant T2 field
    if packing.startswith("grid_complex"):
        # ecCodes 2.38's complex packing encoders abort the process (or crash) beyond 24
        # bits, beyond 20 with second-order spatial differencing
        bits = draw(st.integers(0, 20 if ("orderOfSpatialDifferencing", 2) in extra else 24))
    decimal = draw(st.one_of(st.none(), st.integers(-2, 6)))
    return PackSpec(packing, bits, decimal, extra)


@st.composite
def values_specs(draw: st.DrawFn, bitmap: bool) -> ValuesSpec:
    kind = draw(st.sampled_from(["constant", "normal", "uniform", "integers"]))
    scale = 10.0 ** draw(st.integers(-6, 12))
    offset = draw(st.sampled_from([0.0, -1.0, 273.15, -1e5, 1e7]))
    missing = 0.0
    if bitmap:
        missing = draw(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]))
    return ValuesSpec(draw(st.integers(0, 2**16)), kind, scale, offset, missing)


PARAMETERS = (130, 131, 132, 157, 129, 0)
"""paramIds; 0: a parameter ecCodes does not know (named by its table entry)."""
UNKNOWN = {2: (("discipline", 0), ("parameterCategory", 250), ("parameterNumber", 7)),
           1: (("table2Version", 200), ("indicatorOfParameter", 250))}  # fmt: skip
LEVELS = {
    "surface": (0,),
    "isobaricInhPa": (1000, 850, 500, 250, 10),
    "heightAboveGround": (2, 10, 100),
    "hybrid": (1, 2, 60, 137),
    "depthBelowLandLayer": (0, 7, 28),
}


@st.composite
def field_sets(draw: st.DrawFn, edition: int, bitmap: bool) -> tuple[FieldSpec, ...]:
    """Fields of up to two parameters at a few levels, steps, times (and members), some cells
    left out, in random order."""
    level_type = draw(st.sampled_from(sorted(LEVELS)))
    params = draw(st.lists(st.sampled_from(PARAMETERS), min_size=1, max_size=2, unique=True))
    levels = draw(
        st.lists(st.sampled_from(LEVELS[level_type]), min_size=1, max_size=3, unique=True)
    )
    unit = draw(st.sampled_from(["h", "m"]))
    steps = draw(st.lists(st.integers(0, 240), min_size=1, max_size=3, unique=True))
    step_type = draw(st.sampled_from(["instant", "instant", "accum", "max"]))
    days = draw(st.lists(st.integers(0, 20000), min_size=1, max_size=2, unique=True))
    hours = draw(st.sampled_from([0, 6, 12, 18]))
    members = [None]
    if edition == 2 and draw(st.booleans()):
        members = draw(st.lists(st.integers(0, 50), min_size=1, max_size=2, unique=True))
    cells = list(itertools.product(params, levels, steps, days, members))
    if len(cells) > 1:
        keep = draw(st.lists(st.booleans(), min_size=len(cells), max_size=len(cells)))
        cells = [c for c, k in zip(cells, keep, strict=True) if k] or cells[:1]
    cells = draw(st.permutations(cells))[:12]
    fields = []
    for param, level, step, day, member in cells:
        date = dt.date(1970, 1, 1) + dt.timedelta(days=day)
        keys: list[tuple[str, Any]] = []
        if member is not None:
            template = 1 if step_type == "instant" else 11
            keys += [("productDefinitionTemplateNumber", template),
                     ("typeOfEnsembleForecast", 3), ("numberOfForecastsInEnsemble", 51),
                     ("perturbationNumber", member)]  # fmt: skip
        keys += UNKNOWN[edition] if param == 0 else [("paramId", param)]
        keys += [("typeOfLevel", level_type), ("level", level)]
        if level_type == "depthBelowLandLayer":  # a layer: level is its top
            keys += [("topLevel", level), ("bottomLevel", level + 7)]
        keys += [("dataDate", int(date.strftime("%Y%m%d"))), ("dataTime", hours * 100),
                 ("stepUnits", unit), ("stepType", step_type)]  # fmt: skip
        if step_type == "instant":
            keys.append(("step", step))
        else:
            keys += [("startStep", 0), ("endStep", step)]
        fields.append(FieldSpec(tuple(keys), draw(values_specs(bitmap))))
    return tuple(fields)


@st.composite
def file_specs(draw: st.DrawFn) -> FileSpec:
    grid = draw(grids())
    packing = draw(packings(grid))
    bitmap = draw(st.booleans()) and not grid.sample.startswith("sh_")
    fields = draw(field_sets(grid.edition, bitmap))
    per_message = draw(st.sampled_from([1, 1, 2, 3])) if grid.edition == 2 else 1
    parquet = draw(st.integers(0, 3)) == 0
    return FileSpec(grid, packing, bitmap, fields, parquet, per_message)


# -- writing files with ecCodes ----------------------------------------------------------------


def make_values(spec: ValuesSpec, points: int) -> np.ndarray:
    rng = np.random.default_rng(spec.seed)
    if spec.kind == "constant":
        values = np.full(points, spec.offset + spec.scale)
    elif spec.kind == "normal":
        values = rng.normal(spec.offset, spec.scale, points)
    elif spec.kind == "uniform":
        values = rng.uniform(spec.offset - spec.scale, spec.offset + spec.scale, points)
    else:
        values = np.round(rng.uniform(-spec.scale, spec.scale, points)) + spec.offset
    # ecCodes 2.38's spatial differencing encoder crashes (segmentation fault) on a field of
    # 9999s (its default missing value), whatever missingValue says
    values[values == 9999.0] = 9998.0
    if spec.missing:
        values[rng.random(points) < spec.missing] = MISSING_IN
        if spec.missing == 1.0:
            values[:] = MISSING_IN
    return values


def write_message(spec: FileSpec, field: FieldSpec) -> bytes:
    """One message as ecCodes writes it (rejected when ecCodes refuses)."""
    eccodes = load_eccodes()
    grid, pack = spec.grid, spec.packing
    values = make_values(field.values, grid.points)
    if "second_order" in pack.packing and (values != MISSING_IN).sum() < 16:
        reject()  # ecCodes' second-order encoders abort the process on so few values
    handle = eccodes.codes_grib_new_from_samples(grid.sample)
    try:
        for key, value in grid.keys + field.keys:
            eccodes.codes_set(handle, key, value)
        eccodes.codes_set_values(handle, np.linspace(1.0, 2.0, grid.points))
        if eccodes.codes_get(handle, "packingType") != pack.packing:
            eccodes.codes_set(handle, "packingType", pack.packing)
        for key, value in pack.extra:
            eccodes.codes_set(handle, key, value)
        if pack.decimal is not None:
            eccodes.codes_set(handle, "decimalScaleFactor", pack.decimal)
        if pack.bits is not None:
            eccodes.codes_set(handle, "bitsPerValue", pack.bits)
        eccodes.codes_set(handle, "missingValue", MISSING_IN)
        if spec.bitmap:
            eccodes.codes_set(handle, "bitmapPresent", 1)
        eccodes.codes_set_values(handle, values)
        return bytes(eccodes.codes_get_message(handle))
    except eccodes.GribInternalError:
        reject()
    finally:
        eccodes.codes_release(handle)


def write_file(spec: FileSpec, path: Path) -> list[bytes]:
    trace = os.environ.get("REFZARR_GRIB_FUZZ_TRACE")
    if trace:  # ecCodes' encoders can crash the process: this names the last file drawn
        Path(trace).write_text(repr(spec))
    messages = [write_message(spec, field) for field in spec.fields]
    if len(messages) > 1 and not all(map(decodable, messages)):
        reject()  # one such message to a file (`check_undecodable`)
    if spec.per_message > 1:
        size = spec.per_message
        messages = [multi_field(messages[k : k + size]) for k in range(0, len(messages), size)]
    path.write_bytes(b"".join(messages))
    return messages


def multi_field(parts: list[bytes]) -> bytes:
    """One GRIB2 message of the fields of ``parts`` (single-field messages on one grid):
    sections 0 to 3 of the first, then sections 4 to 7 of each, a bitmap equal to the
    previous field's written as indicator 254."""
    first = grib2_fields(parts[0])[0]
    body, previous = [parts[0][16 : first.product[0]]], None
    for part in parts:
        field = grib2_fields(part)[0]
        bitmap = part[slice(*field.bitmap)]
        if bitmap[5] == 0 and bitmap == previous:
            bitmap = (6).to_bytes(4, "big") + bytes([6, 254])
        elif bitmap[5] == 0:
            previous = bitmap
        product = part[field.product[0] : field.representation[1]]
        body += [product, bitmap, part[slice(*field.data)]]
    total = 16 + sum(map(len, body)) + 4
    return parts[0][:8] + total.to_bytes(8, "big") + b"".join(body) + b"7777"


def decodable(message: bytes) -> bool:
    """Whether ecCodes decodes the values of a message it wrote (not always: a constant
    field PNG-packed is "Message invalid")."""
    eccodes = load_eccodes()
    handle = eccodes.codes_new_from_message(message)
    try:
        eccodes.codes_get_values(handle)
    except eccodes.GribInternalError:
        return False
    finally:
        eccodes.codes_release(handle)
    return True


# -- ecCodes' truth ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Truth:
    """What ecCodes says of a field besides its values."""

    name: str
    step_type: str
    level_type: str
    time: np.datetime64
    step: np.timedelta64
    level: float
    number: int | None
    latitudes: np.ndarray | None
    longitudes: np.ndarray | None
    attributes: dict[str, Any]
    bounds: tuple[float, float] | None


def eccodes_truth(path: Path) -> dict[tuple[int, int], Truth]:
    """Every field's keys and coordinates by ``(message offset, field index)``, as ecCodes
    reads them (several fields to a message included)."""
    return {key: _truth(eccodes, handle) for key, eccodes, handle in eccodes_handles(path)}


def _truth(eccodes: Any, handle: Any) -> Truth:
    def get(key: str) -> Any:
        return eccodes.codes_get(handle, key) if eccodes.codes_is_defined(handle, key) else None

    date, hhmm = int(get("dataDate")), int(get("dataTime"))
    time = np.datetime64(
        dt.datetime(date // 10000, date // 100 % 100, date % 100, hhmm // 100, hhmm % 100), "ns"
    )
    eccodes.codes_set(handle, "stepUnits", "s")  # ecCodes' step in seconds, whatever its unit
    step = np.timedelta64(eccodes.codes_get_long(handle, "endStep"), "s")
    names = [n for n in (get("cfVarName"), get("shortName")) if n not in (None, "unknown", "~")]
    if not names:  # named by its table entry
        table = ("discipline", "parameterCategory", "parameterNumber")
        if get("editionNumber") == 1:
            table = ("table2Version", "indicatorOfParameter")
        names = ["_".join(["param", *(str(get(k)) for k in table)])]
    name = names[0]
    attributes = {f"GRIB_{k}": get(k) for k in ("paramId", "gridType", "units", "stepType")}
    top, bottom = get("topLevel"), get("bottomLevel")
    bounds = None if top is None or top == bottom else (float(top), float(bottom))
    number = get("number") if get("perturbationNumber") is not None else None
    lats = lons = None
    if get("gridType") != "sh":
        # ecCodes gives each point's coordinates in stored order, alternate rows laid out in
        # one direction (it does not reverse them), so only columns are turned into rows
        grid = {k: get(k) for k in ("Nx", "Ny") if get(k) is not None}
        lats, lons = (
            in_rows(eccodes, handle, np.asarray(eccodes.codes_get_double_array(handle, key)),
                    grid, alternate=False)
            for key in ("latitudes", "longitudes")
        )  # fmt: skip
    return Truth(name, get("stepType"), get("typeOfLevel"), time, step.astype("m8[ns]"),
                 float(get("level")), number, lats, lons, attributes, bounds)  # fmt: skip


# -- checks ------------------------------------------------------------------------------------


def read_refzarr(group: RefGroup) -> Any:
    def read(path: str, name: str) -> Any:
        with refzarr.open_dataset(group, group=path) as ds:
            return ds[name].values

    return read


def check_coordinates(group: RefGroup, truth: dict[tuple[int, int], Truth]) -> None:
    """Every chunk's cell has its field's time, step, level and member; the group path has
    its name, step type and level type; every point its latitude and longitude."""
    for path, node, name in leaf_groups(group):
        array = node.members[name]
        assert isinstance(array, RefArray)
        dims = array.meta.dimension_names or ()
        with refzarr.open_dataset(group, group=path) as ds:
            coords = {c: ds[c].values for c in ds.variables if c != name}
        header = [d for d in dims if d not in ("latitude", "longitude", "y", "x", "values")]
        for index in np.ndindex(*array.manifest.grid_shape[: len(header)]):
            chunk = array.manifest[index + (0,) * (len(dims) - len(header))]
            if chunk is None:
                continue
            want = truth[(chunk.offset, int(array.meta.codecs[-1].get("field", 0)))]
            assert path.split("/")[:2] == [want.name, want.step_type], path
            assert path.split("/")[2].split("_")[0] == want.level_type.split("_")[0], path
            at = dict(zip(header, index, strict=True))

            def coord(key: str, at: dict[str, int] = at, coords: Any = coords) -> Any:
                values = coords[key]
                return values[at[key]] if key in at else values.reshape(())[()]

            assert coord("time") == want.time, f"{path}{index}: time"
            assert coord("step") == want.step, f"{path}{index}: step"
            assert coord(want.level_type) == want.level, f"{path}{index}: level"
            if want.number is not None:
                assert coord("number") == want.number, f"{path}{index}: number"
            if want.bounds is not None:
                bounds = coords[f"{want.level_type}_bounds"]
                got = bounds[at[want.level_type]] if want.level_type in at else bounds
                assert tuple(got.tolist()) == want.bounds, f"{path}{index}: bounds"
            for key, value in want.attributes.items():
                assert array.meta.attributes.get(key) == value, f"{path}{index}: {key}"
            check_points(path, dims, coords, want)


def check_points(path: str, dims: tuple[str, ...], coords: dict[str, Any], want: Truth) -> None:
    """Each point's latitude and longitude, in the array's order, are ecCodes' for the
    point the codec puts there."""
    if want.latitudes is None:
        assert "latitude" not in coords, path
        return
    lat, lon = coords["latitude"], coords["longitude"]
    if dims[-2:] == ("latitude", "longitude"):
        lat, lon = np.broadcast_arrays(lat[:, None], lon[None, :])
    np.testing.assert_array_equal(lat.reshape(-1), want.latitudes, strict=True, err_msg=path)
    np.testing.assert_array_equal(lon.reshape(-1), want.longitudes, strict=True, err_msg=path)


def check_undecodable(path: Path) -> None:
    """ecCodes cannot decode a message it wrote itself (a constant field PNG-packed, ...):
    reading it through refzarr must fail too, not give values."""
    try:
        group = scan(path)
    except refzarr.RefzarrError:
        return
    read = read_refzarr(group)
    for leaf, _, name in leaf_groups(group):
        with pytest.raises(Exception):  # noqa: B017, PT011 (whatever ecCodes raises)
            read(leaf, name)


def check_file(spec: FileSpec, path: Path, where: Path) -> None:
    try:
        fields = eccodes_fields(path)
    except load_eccodes().GribInternalError:
        check_undecodable(path)
        return
    truth = eccodes_truth(path)
    group = scan(path)
    assert assert_matches_eccodes(group, fields, read_refzarr(group)) == len(fields)
    check_coordinates(group, truth)
    targets = [where / "refs.json"] + ([where / "refs.parq"] if spec.parquet else [])
    for target in targets:
        refzarr.write(group, target)

        def through_zarr(leaf: str, name: str, target: Path = target) -> Any:
            return open_zarr_group(target, leaf)[name][...]

        assert_matches_eccodes(group, fields, through_zarr)
        for leaf, node, _ in leaf_groups(group):
            z = open_zarr_group(target, leaf)
            for coord in ("latitude", "longitude", "time", "step"):
                if coord in node.members:
                    raw = {"decode_times": False, "decode_timedelta": False}
                    with refzarr.open_dataset(group, group=leaf, **raw) as ds:
                        want = ds[coord].values
                    got = z[coord][...]
                    err = f"{leaf}/{coord}"
                    np.testing.assert_array_equal(got, want, strict=True, err_msg=err)


# -- the tests ---------------------------------------------------------------------------------


@FASTPARQUET
@fuzz_settings(ci_examples=12)
@given(spec=file_specs())
def test_grib_files_read_as_eccodes_decodes_them(spec: FileSpec, tmp_path_factory: Any) -> None:
    where = tmp_path_factory.mktemp("fuzz")
    path = where / "fuzz.grib"
    write_file(spec, path)
    keys = dict(spec.grid.keys)
    grid = "lambert" if keys.get("dataRepresentationType") == 3 else spec.grid.sample
    grid = keys.get("gridType", grid.removesuffix(f"_grib{spec.grid.edition}"))
    event(f"grib{spec.grid.edition} {grid} {spec.packing.packing}")
    event(f"bitmap {spec.bitmap}, {spec.per_message} field(s) a message")
    check_file(spec, path, where)


# -- regressions the fuzz found -----------------------------------------------------------------

SURFACE: Keys = (("paramId", 130), ("typeOfLevel", "surface"), ("level", 0), ("dataDate", 20240229),
                 ("dataTime", 1200), ("stepUnits", "h"), ("step", 6))  # fmt: skip
ARANGE = ValuesSpec(0, "integers", 0.0, 0.0, 0.0)
"""Values 0, 0, ...: replaced by `_arange_file`'s 0, 1, 2, ... (each point told apart)."""


def _regular(edition: int, ni: int = 3, nj: int = 2, **flags: int) -> GridSpec:
    lons = (12, 10) if flags.get("iScansNegatively") else (10, 12)
    lats = (49, 50) if flags.get("jScansPositively") else (50, 49)
    keys: dict[str, Any] = dict(flags)
    keys.update(Ni=ni, Nj=nj, iDirectionIncrementInDegrees=1, jDirectionIncrementInDegrees=1)
    keys.update(_corners(lats, lons) if ni * nj > 1 else _corners(lats[:1] * 2, lons[:1] * 2))
    if edition == 2:
        keys["numberOfDataPoints"] = ni * nj
    return GridSpec(edition, f"regular_ll_sfc_grib{edition}", tuple(keys.items()), ni * nj)


def _arange_file(grid: GridSpec, path: Path, keys: Keys = SURFACE) -> np.ndarray:
    """A one-field file whose stored values are 0, 1, 2, ... (IEEE packed): returns them."""
    spec = FileSpec(grid, PackSpec("grid_ieee", None, None, (("precision", 1),)), False,
                    (FieldSpec(keys, ARANGE),))  # fmt: skip
    eccodes = load_eccodes()
    handle = eccodes.codes_new_from_message(write_message(spec, spec.fields[0]))
    try:
        stored = np.arange(grid.points, dtype=np.float64)
        eccodes.codes_set_values(handle, stored)
        path.write_bytes(bytes(eccodes.codes_get_message(handle)))
    finally:
        eccodes.codes_release(handle)
    return stored


def _read(path: Path, leaf: str = "t/instant/surface") -> Any:
    group = scan(path)
    with refzarr.open_dataset(group, group=leaf) as ds:
        ds.load()
        return group, ds


@FASTPARQUET
def test_one_point_grid_keeps_its_dimensions(tmp_path: Path) -> None:
    """A 1 x 1 lat-lon grid: latitude and longitude were scalars while the data array had
    their dimensions, so xarray refused to open the group (loud)."""
    path = tmp_path / "point.grib2"
    _arange_file(_regular(2, 1, 1), path)
    _, ds = _read(path)
    assert ds["t"].dims[-2:] == ("latitude", "longitude")
    assert ds["latitude"].values.tolist() == [50.0]
    assert ds["longitude"].values.tolist() == [10.0]
    check_file(FileSpec(_regular(2, 1, 1), PackSpec("grid_ieee", None, None), False, (), True),
               path, tmp_path)  # fmt: skip


def test_grib1_step_in_minutes(tmp_path: Path) -> None:
    """A GRIB1 step of 1 minute: ecCodes cannot give it in its default hours ("unable to
    represent the step in h"), which was a ScanError; it is 60 s."""
    path = tmp_path / "minutes.grib1"
    keys = (*SURFACE[:-2], ("stepUnits", "m"), ("step", 1))
    _arange_file(_regular(1), path, keys)
    group, ds = _read(path, "t/instant/surface")
    np.testing.assert_array_equal(ds["step"].values, np.array([60], "m8[s]").astype("m8[ns]"))
    assert group["t/instant/surface/t"].meta.attributes["GRIB_stepUnits"] == 1  # type: ignore[union-attr]


@pytest.mark.parametrize("edition", [1, 2])
def test_grid_scanning_westwards(tmp_path: Path, edition: int) -> None:
    """``iScansNegatively``: the points run east to west. The longitudes were ecCodes'
    distinctLongitudes, which are sorted: every value was labelled with the mirrored
    longitude (silent; cfgrib does the same)."""
    path = tmp_path / "west.grib"
    stored = _arange_file(_regular(edition, iScansNegatively=1), path)
    _, ds = _read(path)
    assert ds["longitude"].values.tolist() == [12.0, 11.0, 10.0]
    assert ds["latitude"].values.tolist() == [50.0, 49.0]
    np.testing.assert_array_equal(ds["t"].values.reshape(2, 3), stored.reshape(2, 3))


@pytest.mark.parametrize("edition", [1, 2])
def test_points_stored_column_by_column(tmp_path: Path, edition: int) -> None:
    """``jPointsAreConsecutive``: the points are stored a column at a time. They were laid
    out as rows, each value on another point's latitude and longitude (silent; cfgrib does
    the same); the codec's ``columns`` turns them into rows."""
    path = tmp_path / "columns.grib"
    stored = _arange_file(_regular(edition, jPointsAreConsecutive=1), path)
    group, ds = _read(path)
    assert group["t/instant/surface/t"].meta.codecs[-1]["columns"] == (2, 3)  # type: ignore[union-attr]
    assert ds["latitude"].values.tolist() == [50.0, 49.0]
    assert ds["longitude"].values.tolist() == [10.0, 11.0, 12.0]
    np.testing.assert_array_equal(ds["t"].values.reshape(2, 3), stored.reshape(3, 2).T)


def test_alternate_rows_on_a_regular_grid(tmp_path: Path) -> None:
    """``alternativeRowScanning`` on a regular lat-lon grid: every other row runs east to
    west. Only projected grids had their rows turned (cfgrib turns every 2-D grid's)."""
    path = tmp_path / "rows.grib2"
    stored = _arange_file(_regular(2, alternativeRowScanning=1), path)
    _, ds = _read(path)
    assert ds["longitude"].values.tolist() == [10.0, 11.0, 12.0]
    np.testing.assert_array_equal(ds["t"].values.reshape(2, 3), [[0, 1, 2], [5, 4, 3]])
    assert stored.tolist() == [0, 1, 2, 3, 4, 5]


def test_codec_columns_config() -> None:
    codec = GribCodec(rows=(2, 3), columns=(2, 3))
    assert codec.get_config() == {"id": "refzarr.grib", "rows": [2, 3], "columns": [2, 3]}
    # stored lines are columns; every other one reversed, then turned into rows
    got = row_order(np.arange(6.0), (2, 3), (2, 3)).reshape(2, 3)
    np.testing.assert_array_equal(got, [[0, 3, 4], [1, 2, 5]])
