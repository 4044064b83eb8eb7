"""The SD (scientific data) interface's structure, as HDF4's netCDF layer writes it: a vgroup
of class ``CDF0.0`` holding dimension vgroups (``Dim0.0`` / ``UDim0.0``), variable vgroups
(``Var0.0``: dimensions, attributes, number type, data) and attribute vdatas (``Attr0.0``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.scan.hdf4.numtypes import nt_record_dtype
from refzarr.scan.hdf4.vsets import DFTAG_VG, DFTAG_VH, VData, VGroup, Vsets

__all__ = ["SdDimension", "SdFile", "SdVariable", "read_sd"]

CDF, VARIABLE, DIMENSION, UDIMENSION = "CDF0.0", "Var0.0", "Dim0.0", "UDim0.0"
ATTRIBUTE, DIM_VALS, DIM_VALS01, COORD_VAR = "Attr0.0", "DimVal0.0", "DimVal0.1", "CoordVar0.0"
DFTAG_NT, DFTAG_SD = 106, 702


@dataclass(frozen=True, slots=True)
class SdDimension:
    """A dimension: its name and size (None: unlimited)."""

    name: str
    size: int | None


@dataclass(slots=True)
class SdVariable:
    """A variable (SDS or dimension scale) of the SD interface."""

    name: str
    ref: int
    dimensions: list[SdDimension]
    dtype: np.dtype[Any] | None
    attributes: dict[str, Any]
    data_ref: int | None
    coordinate: bool
    sds: bool = False
    """Whether its vgroup says it is an SDS (``Var0.0`` vdata), not a dimension scale."""

    @property
    def record(self) -> bool:
        """Whether its first dimension is unlimited."""
        return bool(self.dimensions) and self.dimensions[0].size is None


@dataclass(slots=True)
class SdFile:
    """The SD interface of a file: dimensions, variables in file order, file attributes and
    the refs of every vgroup and vdata the interface uses (not user tables)."""

    dimensions: dict[str, SdDimension]
    variables: list[SdVariable]
    attributes: dict[str, Any]
    internal_vgroups: set[int]
    internal_vdatas: set[int]


def read_sd(vsets: Vsets, where: str) -> SdFile | None:
    """The SD structure of a file, or None when it has no ``CDF0.0`` vgroup."""
    cdf = next(
        (vsets.group(r) for r in vsets.table.refs(DFTAG_VG) if vsets.group(r).klass == CDF), None
    )
    if cdf is None:
        return None
    sd = SdFile({}, [], {}, {cdf.ref}, set())
    for tag, ref in cdf.members:
        if tag == DFTAG_VG and vsets.table.get(tag, ref) is not None:
            group = vsets.group(ref)
            if group.klass in (DIMENSION, UDIMENSION):
                _read_dimension(vsets, group, sd)
    for tag, ref in cdf.members:
        if tag == DFTAG_VG and vsets.table.get(tag, ref) is not None:
            group = vsets.group(ref)
            if group.klass == VARIABLE:
                sd.variables.append(_read_variable(vsets, group, sd, where))
    sd.attributes = read_attributes(vsets, cdf, sd.internal_vdatas, f"{where}: file")
    return sd


def _read_dimension(vsets: Vsets, group: VGroup, sd: SdFile) -> None:
    sd.internal_vgroups.add(group.ref)
    size: int | None = None
    for tag, ref in group.members:
        if tag != DFTAG_VH or vsets.table.get(tag, ref) is None:
            continue
        vdata = vsets.vdata(ref)
        sd.internal_vdatas.add(ref)
        if vdata.klass == DIM_VALS01:
            size = _first_int(vsets, vdata, group.name)
        elif vdata.klass == DIM_VALS and size is None:
            size = vdata.nrecords
    if group.klass == UDIMENSION:
        size = None
    elif size is None:
        size = 0
    sd.dimensions.setdefault(group.name, SdDimension(group.name, size))


def _first_int(vsets: Vsets, vdata: VData, what: str) -> int:
    values = vsets.records(vdata, f"dimension {what!r}")
    if values.size == 0 or not values.dtype.names:
        return 0
    return int(np.asarray(values[values.dtype.names[0]]).reshape(-1)[0])


def _read_variable(vsets: Vsets, group: VGroup, sd: SdFile, where: str) -> SdVariable:
    what = f"{where}: SDS {group.name!r}"
    sd.internal_vgroups.add(group.ref)
    var = SdVariable(group.name, group.ref, [], None, {}, None, False)
    for tag, ref in group.members:
        if vsets.table.get(tag, ref) is None and tag != DFTAG_SD:
            continue
        if tag == DFTAG_VG:
            sub = vsets.group(ref)
            if sub.klass in (DIMENSION, UDIMENSION):
                var.dimensions.append(_dimension_named(sd, sub, what))
        elif tag == DFTAG_VH:
            vdata = vsets.vdata(ref)
            sd.internal_vdatas.add(ref)
            if vdata.klass == COORD_VAR:
                var.coordinate = True
            elif vdata.klass == VARIABLE:
                var.sds = True
        elif tag == DFTAG_SD:
            var.data_ref = ref
        elif tag == DFTAG_NT:
            dd = vsets.table.find(tag, ref, f"{what}: number type")
            record = vsets.source.read_range(dd.offset, dd.length, f"{what}: number type")
            var.dtype = nt_record_dtype(record, what)
    if var.dtype is None:
        raise ScanError(f"{what}: no number type record (tag 106) in its vgroup")
    var.attributes = read_attributes(vsets, group, sd.internal_vdatas, what)
    if not var.sds and len(var.dimensions) == 1 and var.dimensions[0].name == var.name:
        var.coordinate = True  # files older than the Var0.0 / CoordVar0.0 marks
    return var


def _dimension_named(sd: SdFile, group: VGroup, what: str) -> SdDimension:
    """The file's dimension of that name (HDF4 looks dimensions up by name)."""
    found = sd.dimensions.get(group.name)
    if found is None:
        raise ScanError(f"{what}: dimension {group.name!r} is not among the file's dimensions")
    return found


def read_attributes(vsets: Vsets, group: VGroup, internal: set[int], what: str) -> dict[str, Any]:
    """The attributes (``Attr0.0`` vdatas) of a vgroup, typed as pyhdf gives them."""
    out: dict[str, Any] = {}
    for tag, ref in group.members:
        if tag != DFTAG_VH or vsets.table.get(tag, ref) is None:
            continue
        vdata = vsets.vdata(ref)
        if vdata.klass != ATTRIBUTE:
            continue
        internal.add(ref)
        out[vdata.name] = attribute_value(vsets, vdata, f"{what}: attribute {vdata.name!r}")
    return out


def attribute_value(vsets: Vsets, vdata: VData, what: str) -> Any:
    """An attribute's value: text for characters, a number for one value, else a list."""
    if len(vdata.fields) != 1:
        raise UnsupportedFeatureError(f"{what}: an attribute vdata with {len(vdata.fields)} fields")
    records = vsets.records(vdata, what)
    values = np.asarray(records[records.dtype.names[0]]) if records.dtype.names else records
    if values.dtype.kind == "S":
        return _text_value(values.tobytes().rstrip(b"\0"), what)  # NUL padding is no text
    flat = values.reshape(-1)
    items = [v.item() for v in flat]
    if values.dtype.kind == "f":
        items = [float(v) for v in items]
    return items[0] if len(items) == 1 else items


def _text_value(raw: bytes, what: str) -> Any:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


def record_count(var: SdVariable, logical_bytes: int) -> int:
    """Records of a record variable holding ``logical_bytes`` bytes (as HDF4 counts them)."""
    assert var.dtype is not None
    per_record = var.dtype.itemsize * math.prod(d.size or 0 for d in var.dimensions[1:])
    return logical_bytes // per_record if per_record else 0
