"""GRIB test kit: ecCodes' decoded fields (the truth for values), cfgrib's datasets (the truth
for names and coordinates), and checks that a scanned group reads back equal to both.

cfgrib is always opened with ``indexpath=""``: the corpus is read-only and no ``.idx`` file
may be written next to it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

import refzarr
from corpus import CORPUS, corpus_files
from refzarr import RefArray, RefGroup
from refzarr.codecs.grib_eccodes import MISSING, load_eccodes

__all__ = [
    "EccField",
    "assert_matches_cfgrib",
    "assert_matches_eccodes",
    "blank_all_but_last_head",
    "cfgrib_dataset",
    "eccodes_fields",
    "eccodes_handles",
    "grib_corpus",
    "indexed_run",
    "leaf_groups",
]

SUFFIXES = (".grib", ".grib1", ".grib2")


def grib_corpus() -> list[Path]:
    """The corpus's GRIB files (not the index files other tools left next to them)."""
    return corpus_files("grib", *SUFFIXES)


@dataclass(frozen=True)
class EccField:
    """One field as ecCodes decodes it: where its message is, its values and a few keys."""

    offset: int
    field: int
    values: np.ndarray
    keys: dict[str, Any]


def eccodes_fields(path: Path | str) -> dict[tuple[int, int], EccField]:
    """Every field of a file, by ``(message offset, field index in the message)``: values as
    cfgrib gets them (float32, NaN where missing, alternate rows reversed), row by row (a grid
    stored column by column, ``jPointsAreConsecutive``, transposed: cfgrib does not)."""
    return {
        key: EccField(*key, *_decode(eccodes, handle))
        for key, eccodes, handle in eccodes_handles(path)
    }


def eccodes_handles(path: Path | str) -> Iterator[tuple[tuple[int, int], Any, Any]]:
    """``((message offset, field index), eccodes module, handle)`` for every field of a file
    (several fields to a message included); each handle is released after its turn."""
    eccodes = load_eccodes()
    eccodes.codes_grib_multi_support_on()
    try:
        with open(path, "rb") as f:
            previous, index = -1, 0
            while (handle := eccodes.codes_grib_new_from_file(f)) is not None:
                try:
                    offset = int(eccodes.codes_get(handle, "offset"))
                    index = index + 1 if offset == previous else 0
                    previous = offset
                    yield (offset, index), eccodes, handle
                finally:
                    eccodes.codes_release(handle)
    finally:
        eccodes.codes_grib_multi_support_off()


def _decode(eccodes: Any, handle: Any) -> tuple[np.ndarray, dict[str, Any]]:
    eccodes.codes_set_double(handle, "missingValue", MISSING)
    values = np.asarray(eccodes.codes_get_values(handle), dtype=np.float32)
    values[values == MISSING] = np.nan
    keys = {
        k: eccodes.codes_get(handle, k)
        for k in ("shortName", "paramId", "gridType", "Nx", "Ny")
        if eccodes.codes_is_defined(handle, k)
    }
    return in_rows(eccodes, handle, values, keys), keys


def _flag(eccodes: Any, handle: Any, key: str) -> bool:
    return bool(eccodes.codes_is_defined(handle, key) and eccodes.codes_get(handle, key))


def in_rows(
    eccodes: Any, handle: Any, values: np.ndarray, keys: dict[str, Any], *, alternate: bool = True
) -> np.ndarray:
    """A 2-D grid's values (or coordinates) in stored order -> row by row: stored lines
    (columns when ``jPointsAreConsecutive``) alternately reversed when the grid says so and
    ``alternate``, then columns transposed into rows."""
    columns = _flag(eccodes, handle, "jPointsAreConsecutive") and "Nx" in keys
    if not (alternate and _flag(eccodes, handle, "alternativeRowScanning")) and not columns:
        return values
    lines = values.reshape((keys["Nx"], keys["Ny"]) if columns else (keys["Ny"], keys["Nx"]))
    if alternate and _flag(eccodes, handle, "alternativeRowScanning"):
        lines[1::2] = lines[1::2, ::-1].copy()
    return np.ascontiguousarray(lines.T if columns else lines).reshape(-1)


def leaf_groups(group: RefGroup) -> Iterator[tuple[str, RefGroup, str]]:
    """``(path, group, variable name)`` of every ``<name>/<stepType>/<typeOfLevel>`` group."""
    for path, node in group.groups():
        if path.count("/") == 2:
            name = path.split("/")[0]
            assert name in node.members, f"{path}: no array {name!r}"
            yield path, node, name


def assert_matches_eccodes(
    group: RefGroup, fields: dict[tuple[int, int], EccField], read: Callable[[str, str], Any]
) -> int:
    """Every field is the chunk of exactly one array, and reading that array with ``read(group
    path, name)`` gives ecCodes' values there (missing chunks all NaN). Returns the count of
    fields compared."""
    seen: set[tuple[int, int]] = set()
    for path, node, name in leaf_groups(group):
        array = node.members[name]
        assert isinstance(array, RefArray)
        values = np.asarray(read(path, name))
        assert values.dtype == np.float32, f"{path}: dtype {values.dtype}"
        assert values.shape == array.shape, f"{path}: shape {values.shape} != {array.shape}"
        field = int(array.meta.codecs[-1].get("field", 0))
        header = array.manifest.grid_shape[: array.meta.ndim - _grid_ndim(array)]
        for index in np.ndindex(*header):
            chunk = array.manifest[index + (0,) * _grid_ndim(array)]
            got = values[index].reshape(-1)
            if chunk is None:
                assert np.isnan(got).all(), f"{path}{index}: a missing chunk reads as values"
                continue
            assert not isinstance(chunk, bytes), f"{path}{index}: inlined"
            key = (chunk.offset, field)
            assert key in fields, f"{path}{index}: no field at offset {chunk.offset}"
            assert key not in seen, f"{path}{index}: field {key} referenced twice"
            seen.add(key)
            np.testing.assert_array_equal(
                got, fields[key].values, strict=True, err_msg=f"{path}{index}"
            )
    assert seen == set(fields), f"fields never referenced: {sorted(set(fields) - seen)}"
    return len(seen)


def _grid_ndim(array: RefArray) -> int:
    dims = array.meta.dimension_names or ()
    return sum(d in ("latitude", "longitude", "y", "x", "values") for d in dims)


def cfgrib_dataset(path: Path | str, filter_by_keys: dict[str, Any]) -> xr.Dataset:
    """cfgrib's dataset of the fields matching ``filter_by_keys`` (no index file written)."""
    return xr.open_dataset(
        path,
        engine="cfgrib",
        backend_kwargs={"filter_by_keys": filter_by_keys, "indexpath": ""},
    )


def cfgrib_filter(node: RefGroup, name: str) -> dict[str, Any] | None:
    """The cfgrib filter selecting a group's fields, from its array's attributes (None for a
    parameter cfgrib names ``unknown``: the test gives the table keys itself)."""
    array = node.members[name]
    assert isinstance(array, RefArray)
    attrs = array.meta.attributes
    keys = {"stepType": attrs["GRIB_stepType"], "typeOfLevel": attrs["GRIB_typeOfLevel"]}
    if name.startswith("param_"):
        return None
    keys["paramId"] = attrs["GRIB_paramId"]
    return keys


def table_filter(name: str, edition: int) -> dict[str, Any]:
    """The table keys a ``param_...`` name stands for."""
    parts = [int(p) for p in name.split("_")[1:]]
    if edition == 2:
        return dict(zip(("discipline", "parameterCategory", "parameterNumber"), parts, strict=True))
    return dict(zip(("table2Version", "indicatorOfParameter"), parts, strict=True))


def assert_matches_cfgrib(ours: xr.Dataset, theirs: xr.Dataset, name: str) -> None:
    """Our dataset (length-1 dimensions squeezed as cfgrib does) holds cfgrib's variable and
    coordinates, equal in values and dtypes."""
    squeezed = ours.squeeze()
    their_name = name if name in theirs else "unknown"
    got, want = squeezed[name], theirs[their_name]
    assert got.dims == want.dims, f"{name}: dims {got.dims} != {want.dims}"
    np.testing.assert_array_equal(got.values, want.values, strict=True, err_msg=name)
    for coord in want.coords:
        assert coord in squeezed.coords, f"{name}: coordinate {coord!r} missing"
        mine, theirs_c = squeezed[coord], want[coord]
        assert mine.dims == theirs_c.dims, f"{coord}: dims {mine.dims} != {theirs_c.dims}"
        np.testing.assert_array_equal(
            mine.values.astype(theirs_c.dtype), theirs_c.values, strict=True, err_msg=coord
        )
        assert mine.dtype.kind == theirs_c.dtype.kind, f"{coord}: {mine.dtype} != {theirs_c.dtype}"
    for attr in ("units", "long_name", "standard_name", "GRIB_paramId", "GRIB_gridType"):
        if attr in want.attrs:
            assert got.attrs.get(attr) == want.attrs[attr], f"{name}: attribute {attr}"


def scan(path: Path | str, **options: Any) -> RefGroup:
    """`refzarr.scan` with the GRIB format named (so that a failure is the scanner's)."""
    return refzarr.scan(path, format="grib", **options)


INDEX_SOURCE = CORPUS / "grib" / "gec00_20250101_00_soilw.grib2"
"""A one-message GRIB2 file (GEFS soil moisture), the model of `indexed_run`'s messages."""
INDEX_LEVEL = "0-0.1 m below ground"


def grib_variant(date: int, hours: int, **keys: Any) -> bytes:
    """`INDEX_SOURCE`'s message at another reference date and forecast hour (and ``keys``)."""
    eccodes = load_eccodes()
    handle = eccodes.codes_new_from_message(INDEX_SOURCE.read_bytes())
    try:
        eccodes.codes_set(handle, "dataDate", date)
        eccodes.codes_set(handle, "forecastTime", hours)
        for key, value in keys.items():
            eccodes.codes_set(handle, key, value)
        return bytes(eccodes.codes_get_message(handle))
    finally:
        eccodes.codes_release(handle)


def indexed_run(
    where: Path, dates: list[int], steps: list[int], *, ecmwf: bool = False, **keys: Any
) -> list[Path]:
    """Files of one layout (a message per step of ``steps``), one per date, with sidecars:
    wgrib2 lines at ``<file>.idx``, or ECMWF JSON lines at ``<file stem>.index``."""
    files = []
    for date in dates:
        parts = [grib_variant(date, hours, **keys) for hours in steps]
        path = where / f"gefs.{date}.grib2"
        path.write_bytes(b"".join(parts))
        lines, offset = [], 0
        for k, (hours, part) in enumerate(zip(steps, parts, strict=True)):
            if ecmwf:
                entry = {"date": str(date), "time": "0000", "step": str(hours), "param": "swvl1",
                         "levtype": "sfc", "_offset": offset, "_length": len(part)}  # fmt: skip
                lines.append(json.dumps(entry))
            else:
                fcst = "anl" if hours == 0 else f"{hours} hour fcst"
                lines.append(f"{k + 1}:{offset}:d={date}00:SOILW:{INDEX_LEVEL}:{fcst}:ENS=ctl")
            offset += len(part)
        sidecar = path.with_suffix(".index") if ecmwf else Path(f"{path}.idx")
        sidecar.write_text("\n".join(lines) + "\n")
        files.append(path)
    return files


def blank_all_but_last_head(path: Path) -> None:
    """Zero every byte of a file but sections 0 to 4 of its last message (all the sidecar
    path may read of it), so that only a sidecar can index it."""
    data = bytearray(path.read_bytes())
    offsets = [m.start() for m in re.finditer(b"GRIB", bytes(data))]
    last = offsets[-1]
    position = last + 16
    while data[position + 4] != 5:
        position += int.from_bytes(data[position : position + 4], "big")
    data[:last] = bytes(last)
    data[position:] = bytes(len(data) - position)
    path.write_bytes(bytes(data))
