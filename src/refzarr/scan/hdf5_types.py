"""HDF5 datatypes as the numpy dtypes of their stored bytes; fill values; enum mappings.

The dtype is the type *on disk* (byte order, compound member offsets and padding kept), so that
a chunk's raw bytes are exactly what the dtype describes. Types whose bytes do not map to a
numpy dtype one to one raise `UnsupportedFeatureError`.
"""

from __future__ import annotations

from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5t

from refzarr.errors import UnsupportedFeatureError

__all__ = ["ENUM_ATTR", "enum_mapping", "fill_value", "storage_dtype", "without_metadata"]

ENUM_ATTR = "_hdf5_enum"
"""Attribute holding an enum dataset's ``{name: value}`` mapping (the array holds the values)."""

# IEEE layouts, by size: (sign pos, exponent pos, exponent size, mantissa pos, mantissa size)
_IEEE = {
    2: ((15, 10, 5, 0, 10), 15),
    4: ((31, 23, 8, 0, 23), 127),
    8: ((63, 52, 11, 0, 52), 1023),
}

_UNSUPPORTED_CLASSES = {
    h5t.OPAQUE: "opaque datatypes",
    h5t.BITFIELD: "bitfield datatypes",
    h5t.TIME: "time datatypes",
    h5t.REFERENCE: "object or region references",
    h5t.VLEN: "variable-length sequences",
}


def storage_dtype(ds: h5py.Dataset, where: str) -> np.dtype[Any]:
    """The numpy dtype of the dataset's stored elements.

    Raises `UnsupportedFeatureError` for variable-length data, references, opaque and bitfield
    types, array-typed datasets, and integers or floats with a non-standard bit layout.
    """
    tid = ds.id.get_type()
    _check_type(tid, where)
    dtype: np.dtype[Any] = ds.dtype
    if dtype.subdtype is not None:
        raise UnsupportedFeatureError(f"{where}: array datatype {dtype} is not supported yet")
    if dtype.hasobject:
        raise UnsupportedFeatureError(f"{where}: datatype {dtype} holds object fields")
    if dtype.names and any(dtype.fields[n][0].names for n in dtype.names):  # type: ignore[index]
        raise UnsupportedFeatureError(
            f"{where}: nested compound types are not supported yet "
            "(zarr-python 3 cannot read nested structured dtypes)"
        )
    if dtype.itemsize != tid.get_size():
        raise UnsupportedFeatureError(
            f"{where}: datatype of {tid.get_size()} bytes maps to {dtype} of {dtype.itemsize}"
        )
    return without_metadata(dtype)


def without_metadata(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """``dtype`` without h5py's metadata (string encoding, enum mapping), fields included."""
    if dtype.names is not None:
        fields = [dtype.fields[name] for name in dtype.names]  # type: ignore[index]
        return np.dtype(
            {
                "names": list(dtype.names),
                "formats": [without_metadata(f[0]) for f in fields],
                "offsets": [f[1] for f in fields],
                "itemsize": dtype.itemsize,
            }
        )
    if dtype.subdtype is not None:
        return np.dtype((without_metadata(dtype.subdtype[0]), dtype.subdtype[1]))
    return np.dtype(dtype.str)


def _check_type(tid: h5t.TypeID, where: str) -> None:
    cls = tid.get_class()
    if cls in _UNSUPPORTED_CLASSES:
        raise UnsupportedFeatureError(f"{where}: {_UNSUPPORTED_CLASSES[cls]} are not supported yet")
    if cls == h5t.STRING and tid.is_variable_str():
        raise UnsupportedFeatureError(f"{where}: variable-length strings are not supported yet")
    if cls == h5t.STRING and tid.get_strpad() == h5t.STR_SPACEPAD:
        raise UnsupportedFeatureError(f"{where}: space-padded fixed strings are not supported yet")
    if cls == h5t.INTEGER:
        _check_integer(tid, where)
    elif cls == h5t.FLOAT:
        _check_float(tid, where)
    elif cls in (h5t.ENUM, h5t.ARRAY):
        _check_type(tid.get_super(), where)
    elif cls == h5t.COMPOUND:
        for index in range(tid.get_nmembers()):
            _check_type(tid.get_member_type(index), where)


def _check_integer(tid: h5t.TypeIntegerID, where: str) -> None:
    size = tid.get_size()
    if tid.get_precision() != 8 * size or tid.get_offset() != 0 or size not in (1, 2, 4, 8):
        raise UnsupportedFeatureError(
            f"{where}: integer of {tid.get_precision()} significant bits at bit "
            f"{tid.get_offset()} in {size} bytes is not supported"
        )


def _check_float(tid: h5t.TypeFloatID, where: str) -> None:
    size = tid.get_size()
    layout = _IEEE.get(size)
    if layout is None or (tid.get_fields(), tid.get_ebias()) != layout or tid.get_offset():
        raise UnsupportedFeatureError(
            f"{where}: a {size}-byte float that is not IEEE 754 binary{8 * size} is not supported"
        )


def fill_value(ds: h5py.Dataset, dtype: np.dtype[Any]) -> Any:
    """The dataset's fill value in ``dtype`` (HDF5 reads unwritten chunks as this value).

    None when the file defines none: HDF5 then reads zeros, as Zarr does for a null fill
    value, and xarray (which takes a Zarr v2 fill value for ``_FillValue``) masks nothing.
    """
    defined = ds.id.get_create_plist().fill_value_defined()
    if defined != h5d.FILL_VALUE_USER_DEFINED:
        return None
    value = np.asarray(ds.fillvalue)
    if dtype.names:
        return np.frombuffer(value.tobytes(), dtype=dtype)[0]
    return value.astype(dtype)[()]


def enum_mapping(ds: h5py.Dataset) -> dict[str, int] | None:
    """The ``{name: value}`` mapping of an enum dataset, or None (booleans are no enum)."""
    mapping = h5py.check_enum_dtype(ds.dtype)
    if mapping is None or ds.dtype.kind == "b":
        return None
    return {str(name): int(value) for name, value in mapping.items()}
