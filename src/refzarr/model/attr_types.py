"""The numpy types of attributes, kept beside their JSON values as NCZarr keeps them.

JSON has one number type, so a ``float32`` ``scale_factor`` read back is a ``float64`` and xarray
then unpacks to ``float64`` where netCDF4 gives ``float32``. Scanners record the types that JSON
loses in the attribute ``_nczarr_attr`` (``{"types": {name: "<f4", ...}}``, the key netCDF-C's
NCZarr writes; xarray's Zarr backend hides attributes named ``_nc*``), and refzarr's xarray
backend turns the values back into numpy values of those types.

The same key lists the array's unlimited dimensions (``"unlimited": ["time"]``, shown as
xarray's ``encoding["unlimited_dims"]``; on a group: its unlimited dimensions no array of it
uses) and marks an array whose source follows netCDF's masking rules: a value equal to the
Zarr fill value is masked only when the attributes hold ``_FillValue`` (or ``missing_value``),
as ``engine="netcdf4"`` decodes (netCDF's default fill values are never masked). Its
``"netcdf"`` entry (`NETCDF_KEY`) names the netCDF family of the source, for what JSON cannot
say either: numbers whose type JSON keeps are numpy values there too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from refzarr.errors import UnsupportedFeatureError

__all__ = [
    "LAYOUT_ATTR",
    "NETCDF_KEY",
    "RESERVED_ATTRS",
    "TYPES_ATTR",
    "attribute_type",
    "has_untyped_numbers",
    "netcdf_family",
    "netcdf_masking",
    "original_bytes",
    "reserved_attribute",
    "source_layout",
    "typed_attributes",
    "unlimited_dimensions",
    "with_types",
]

TYPES_ATTR = "_nczarr_attr"
"""The attribute holding ``{"types": {attribute name: numpy dtype string}}``."""

LAYOUT_ATTR = "_nc_source_layout"
"""The attribute holding a loaded coordinate's stored layout in its source file,
``{"chunks": [...], "codecs": [...]}``: its values are held in one raw chunk, and refzarr's
engine shows the source's chunking and filters in ``encoding`` (so that ``to_netcdf`` writes
them again). Named ``_nc...`` so that xarray's Zarr backend hides it, as it hides NCZarr's."""

NETCDF_KEY = "netcdf"
"""The key of `TYPES_ATTR` naming the netCDF family a scanned source belongs to: ``3`` for
netCDF3 (classic, 64-bit offset, 64-bit data), ``4`` for HDF5 (netCDF-4 or not: netCDF-C
reads any HDF5 file as netCDF-4). refzarr's engine then shows the object as netCDF4-python
does: a number JSON reads back as int or float (no recorded type) is a numpy ``int64`` /
``float64`` (a list a numpy array), and a netCDF3 variable's ``encoding["dtype"]`` is in
native byte order. NCZarr's own records carry no such key."""

RESERVED_ATTRS = (TYPES_ATTR, LAYOUT_ATTR)
"""Attribute names refzarr keeps its records under: a source attribute of either name is
refused (`reserved_attribute`), never merged into or taken for a record."""


def reserved_attribute(where: str, name: str) -> UnsupportedFeatureError:
    """The error for a source attribute named like one of refzarr's records (``where``: the
    file and the object holding it)."""
    return UnsupportedFeatureError(
        f"{where}: attribute {name!r}: refzarr keeps its own records (attribute types, "
        "unlimited dimensions, source layout) under this name, and the source's attribute "
        "would be taken for one or overwritten; rename the attribute in the file, or scan "
        "with on_unsupported='skip' to leave it out (it is then listed as skipped)"
    )


_JSON_NATIVE = frozenset({np.dtype("int64"), np.dtype("float64"), np.dtype("bool")})
"""Types a JSON value reads back as anyway: not recorded."""


def attribute_type(value: Any) -> str | None:
    """The dtype string (native byte order) to record for an attribute's source value, or None
    when JSON keeps its type (text, int64, float64, bool; but an empty list has no type in
    JSON, so an empty numeric attribute always gets one) or it is no number."""
    dtype = getattr(value, "dtype", None)
    if not isinstance(dtype, np.dtype) or dtype.kind not in "iuf":
        return None
    native = dtype.newbyteorder("=")
    empty = getattr(value, "size", 1) == 0 or getattr(value, "shape", ()) is None  # h5py.Empty
    if native in _JSON_NATIVE and not empty:
        return None
    return native.str


def with_types(
    attributes: dict[str, Any],
    types: Mapping[str, str],
    *,
    mark: bool,
    unlimited: Sequence[str] = (),
    raw_bytes: Mapping[str, Any] | None = None,
    netcdf: int | None = None,
) -> None:
    """Add ``types`` to ``attributes`` under `TYPES_ATTR` (also when empty if ``mark``: the
    array follows netCDF's masking rules), the names of its unlimited dimensions,
    ``raw_bytes``: the original bytes (lists of ints) of text attributes that are not UTF-8,
    shown with U+FFFD as netCDF4-python shows them but kept, never re-encoded, and
    ``netcdf``: the netCDF family of the source (`NETCDF_KEY`, always recorded when given)."""
    if not (types or mark or unlimited or raw_bytes or netcdf):
        return
    entry = attributes.get(TYPES_ATTR)
    known = dict(entry) if isinstance(entry, Mapping) else {}
    value: dict[str, Any] = {**known, "types": {**known.get("types", {}), **types}}
    if unlimited:
        value["unlimited"] = list(unlimited)
    if netcdf:
        value[NETCDF_KEY] = netcdf
    if raw_bytes:
        value["bytes"] = {**known.get("bytes", {}), **raw_bytes}
    attributes[TYPES_ATTR] = value


def original_bytes(attributes: Mapping[str, Any], name: str) -> Any:
    """The original bytes of a text attribute that was not UTF-8 (``bytes``, or a list of
    them for a list attribute), as `with_types` kept them; None when it was UTF-8 text."""
    entry = attributes.get(TYPES_ATTR)
    kept = entry.get("bytes") if isinstance(entry, Mapping) else None
    value = kept.get(name) if isinstance(kept, Mapping) else None
    if not isinstance(value, list | tuple):
        return None
    if value and all(isinstance(item, list | tuple) for item in value):
        return [bytes(item) for item in value]
    return bytes(value)


def unlimited_dimensions(attributes: Mapping[str, Any]) -> tuple[str, ...]:
    """The unlimited dimensions `with_types` recorded (none when not recorded)."""
    entry = attributes.get(TYPES_ATTR)
    names = entry.get("unlimited") if isinstance(entry, Mapping) else None
    if not isinstance(names, list | tuple):
        return ()
    return tuple(str(name) for name in names)


def netcdf_masking(attributes: Mapping[str, Any]) -> bool:
    """Whether the attributes carry `TYPES_ATTR`: mask by ``_FillValue`` attributes only."""
    return TYPES_ATTR in attributes


def netcdf_family(attributes: Mapping[str, Any]) -> int | None:
    """The netCDF family (3 or 4) `with_types` recorded for the source (`NETCDF_KEY`), or
    None: not recorded (another format, NCZarr, references written before it was)."""
    entry = attributes.get(TYPES_ATTR)
    family = entry.get(NETCDF_KEY) if isinstance(entry, Mapping) else None
    return family if family in (3, 4) and not isinstance(family, bool) else None


def typed_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Plain attributes with the recorded types applied (numpy scalars or arrays) and
    `TYPES_ATTR` and `LAYOUT_ATTR` left out; values that do not convert exactly stay as they are.

    For a netCDF source (`netcdf_family`) the numbers without a recorded type become what
    netCDF4-python gives for them too: ``int64`` / ``float64`` numpy scalars, numpy arrays
    for lists (text, and anything else, as it is)."""
    out = {k: v for k, v in attributes.items() if k not in (TYPES_ATTR, LAYOUT_ATTR)}
    entry = attributes.get(TYPES_ATTR)
    types = entry.get("types") if isinstance(entry, Mapping) else None
    types = types if isinstance(types, Mapping) else {}
    for name, text in types.items():
        if name in out:
            out[name] = _typed(out[name], text)
    if netcdf_family(attributes) is not None:
        for name, value in out.items():
            if name not in types:
                out[name] = _netcdf_number(value)
    return out


def has_untyped_numbers(attributes: Mapping[str, Any], types: Mapping[str, str]) -> bool:
    """Whether an attribute holds numbers JSON keeps the type of (no type in ``types``): what
    `NETCDF_KEY` changes the reading of (a scanner records it only then, so that the
    attributes of objects without such numbers are written as before)."""
    return any(
        name not in types and _numbers(value) is not None
        for name, value in attributes.items()
        if name not in (TYPES_ATTR, LAYOUT_ATTR)
    )


def _numbers(value: Any) -> Sequence[Any] | None:
    """The numbers of a JSON number or non-empty list of numbers (no bools), else None."""
    items = value if isinstance(value, list | tuple) else (value,)
    if items and all(isinstance(v, int | float) and not isinstance(v, bool) for v in items):
        return items
    return None


def _netcdf_number(value: Any) -> Any:
    """A JSON number (or a non-empty list of them) as netCDF4-python shows an ``int64`` or
    ``double`` attribute; anything else as it is."""
    items = _numbers(value)
    if items is None:
        return value
    dtype = np.float64 if any(isinstance(v, float) for v in items) else np.int64
    try:
        converted = np.asarray(items if isinstance(value, list | tuple) else value, dtype=dtype)
    except OverflowError:  # an integer beyond int64 (never a netCDF value)
        return value
    return converted[()] if converted.ndim == 0 else converted


def _typed(value: Any, text: Any) -> Any:
    try:
        dtype = np.dtype(text)
        converted = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        return value
    if dtype.kind not in "iuf" or not np.array_equal(converted, np.asarray(value), equal_nan=True):
        return value
    return converted[()] if converted.ndim == 0 else converted


def source_layout(attributes: Mapping[str, Any]) -> tuple[tuple[int, ...], tuple[Any, ...]] | None:
    """The chunk shape and codec configurations `LAYOUT_ATTR` records (None: not recorded
    or not understood)."""
    entry = attributes.get(LAYOUT_ATTR)
    if not isinstance(entry, Mapping):
        return None
    chunks, codecs = entry.get("chunks"), entry.get("codecs")
    if not isinstance(chunks, list | tuple) or not isinstance(codecs, list | tuple):
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in chunks):
        return None
    if not all(isinstance(codec, Mapping) for codec in codecs):
        return None
    return tuple(chunks), tuple(codecs)
