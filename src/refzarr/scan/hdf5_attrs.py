"""HDF5 attributes as JSON values, HDF5 and netCDF bookkeeping left out.

Conversions: numpy scalars become Python numbers; arrays become lists, except that an array of
exactly one element becomes that element (netCDF stores every attribute as a vector; netCDF4-
python and xarray show a length-1 vector as a scalar); bytes become text when they are UTF-8
and ``"base64:<data>"`` otherwise; an empty (null-dataspace) attribute becomes ``""`` when its
type is a string and ``[]`` otherwise.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np

from refzarr.errors import UnsupportedFeatureError

__all__ = ["BASE64_PREFIX", "INTERNAL_ATTRS", "read_attributes"]

INTERNAL_ATTRS = frozenset(
    {
        "DIMENSION_LIST",
        "REFERENCE_LIST",
        "_Netcdf4Dimid",
        "_Netcdf4Coordinates",
        "_nc3_strict",
        "_NCProperties",
        "_SuperblockVersion",
        "_IsNetcdf4",
    }
)
"""Attributes of HDF5 dimension scales and of the netCDF-C library, never user attributes."""

_SCALE_ATTRS = frozenset({"CLASS", "NAME"})
"""Left out too on a dimension scale (``CLASS == "DIMENSION_SCALE"``)."""

BASE64_PREFIX = "base64:"
"""Prefix of a bytes attribute that is not UTF-8 text."""


def read_attributes(
    obj: h5py.HLObject, where: str, on_skip: Callable[[str, str], None] | None
) -> dict[str, Any]:
    """The user attributes of a group or dataset, in the file's order.

    An attribute that cannot be converted raises `UnsupportedFeatureError` naming it, or, when
    ``on_skip`` is given, is reported to ``on_skip(name, reason)`` and left out.
    """
    attrs = obj.attrs
    hidden = INTERNAL_ATTRS | (_SCALE_ATTRS if _is_scale(attrs) else frozenset())
    out: dict[str, Any] = {}
    for name in attrs:
        if name in hidden:
            continue
        try:
            out[name] = _read_one(attrs, name, where)
        except UnsupportedFeatureError as exc:
            if on_skip is None:
                raise
            on_skip(name, str(exc))
    return out


def _is_scale(attrs: h5py.AttributeManager) -> bool:
    try:
        value = attrs.get("CLASS")
    except (OSError, TypeError):
        return False
    return isinstance(value, bytes | np.bytes_) and bytes(value) == b"DIMENSION_SCALE"


def _read_one(attrs: h5py.AttributeManager, name: str, where: str) -> Any:
    try:
        value = attrs[name]
    except (OSError, TypeError, ValueError) as exc:
        raise UnsupportedFeatureError(
            f"{where}: attribute {name!r}: h5py cannot read it: {exc}"
        ) from exc
    try:
        return attribute_to_json(value)
    except TypeError as exc:
        raise UnsupportedFeatureError(f"{where}: attribute {name!r}: {exc}") from None


def attribute_to_json(value: Any) -> Any:
    """One attribute value as JSON (see the module docstring); TypeError when impossible."""
    if isinstance(value, h5py.Empty):
        return "" if h5py.check_string_dtype(value.dtype) else []
    if isinstance(value, np.ndarray):
        if value.dtype.names is not None:
            raise TypeError(f"compound-typed attributes ({value.dtype}) are not supported")
        if value.size == 1 and value.ndim <= 1:
            return _element(value.reshape(())[()])
        return _elements(value.tolist())
    return _element(value)


def _elements(values: Any) -> Any:
    if isinstance(values, list):
        return [_elements(v) for v in values]
    return _element(values)


def _element(value: Any) -> Any:
    if isinstance(value, np.void) or (isinstance(value, np.ndarray) and value.dtype.names):
        raise TypeError(f"compound-typed attributes ({value.dtype}) are not supported")
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        return _text(value)
    if isinstance(value, complex):
        raise TypeError("complex-valued attributes are not supported")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"attributes of type {type(value).__name__} are not supported")


def _text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return BASE64_PREFIX + base64.standard_b64encode(value).decode("ascii")
