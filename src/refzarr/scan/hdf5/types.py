"""HDF5 datatypes as the numpy dtypes of their stored bytes; fill values; enum mappings.

The dtype is the type *on disk* (byte order, compound member offsets and padding kept), so that
a chunk's raw bytes are exactly what the dtype describes. Opaque types are void (``|V<n>``),
bitfields the unsigned integer of their size and byte order, and an HDF5 array type the numpy
sub-array dtype of one element (e.g. ``('<f4', (3,))``; the scanner unfolds it into trailing
axes). Types whose bytes do not map to a numpy dtype one to one raise `UnsupportedFeatureError`.
"""

from __future__ import annotations

from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5t

from refzarr.errors import UnsupportedFeatureError
from refzarr.scan.hdf5.attrs import AttributeTable

__all__ = [
    "ENUM_ATTR",
    "ENUM_NAME_ATTR",
    "OPAQUE_TAG_ATTR",
    "creation_plist",
    "enum_mapping",
    "fill_value",
    "opaque_tag",
    "storage_dtype",
    "type_attributes",
    "without_metadata",
]

ENUM_ATTR = "_hdf5_enum"
"""Attribute holding an enum dataset's ``{name: value}`` mapping (the array holds the values)."""

ENUM_NAME_ATTR = "_hdf5_enum_name"
"""Attribute holding the name of an enum dataset's named datatype, when it has one."""

OPAQUE_TAG_ATTR = "_hdf5_opaque_tag"
"""Attribute holding an opaque dataset's tag (the description HDF5 keeps with the type)."""

# IEEE layouts, by size: (sign pos, exponent pos, exponent size, mantissa pos, mantissa size)
_IEEE = {
    2: ((15, 10, 5, 0, 10), 15),
    4: ((31, 23, 8, 0, 23), 127),
    8: ((63, 52, 11, 0, 52), 1023),
}

_UNSUPPORTED_CLASSES = {
    h5t.TIME: "time datatypes are not supported",
    h5t.REFERENCE: "references inside compound or array types are not supported",
    h5t.VLEN: "variable-length sequences inside compound or array types are not supported",
}

_NEVER_ENUM = frozenset({h5t.INTEGER, h5t.FLOAT, h5t.STRING})
"""Datatype classes whose h5py dtype never holds an enum mapping."""

_HEAP_VALUES = (
    "such values live in the file's global heap, and zarr-python 3 cannot read structured "
    "dtypes with object fields"
)


def creation_plist(ds: h5py.Dataset) -> h5py.h5p.PropDCID:
    """The dataset's creation property list, fetched once per `h5py.Dataset` object.

    h5py keeps it (``Dataset._dcpl``, what ``ds.chunks`` reads); a Dataset without it asks
    HDF5 for a new copy, as ``ds.id.get_create_plist()`` does.
    """
    dcpl: h5py.h5p.PropDCID | None = getattr(ds, "_dcpl", None)
    return ds.id.get_create_plist() if dcpl is None else dcpl


def storage_dtype(ds: h5py.Dataset, where: str, tid: h5t.TypeID | None = None) -> np.dtype[Any]:
    """The numpy dtype of the dataset's stored elements (``tid``: its datatype, when at hand).

    Raises `UnsupportedFeatureError` for variable-length data or references inside other types,
    nested compounds and compound members that are arrays (zarr-python 3 reads neither), and
    integers or floats with a non-standard bit layout.
    """
    tid = ds.id.get_type() if tid is None else tid
    try:
        key: bytes | None = tid.encode()
    except (TypeError, ValueError, RuntimeError):
        key = None
    found = None if key is None else _STORAGE_DTYPES.get(key)
    if found is not None:
        return found
    dtype = _checked_dtype(ds, tid, where)
    if key is not None:
        _STORAGE_DTYPES[key] = dtype
    return dtype


_STORAGE_DTYPES: dict[bytes, np.dtype[Any]] = {}
"""`storage_dtype` of the datatypes seen so far, by their HDF5 encoding (which describes a
type whole: h5py's dtype and every check below depend on nothing else)."""


def _checked_dtype(ds: h5py.Dataset, tid: h5t.TypeID, where: str) -> np.dtype[Any]:
    _check_type(tid, where)
    dtype: np.dtype[Any] = ds.dtype
    if dtype.hasobject:
        raise UnsupportedFeatureError(
            f"{where}: datatype {dtype} holds variable-length members: {_HEAP_VALUES}"
        )
    if dtype.base.names:  # a compound, or an array type of compounds
        _check_members(dtype.base, where)
    if dtype.itemsize != tid.get_size():
        raise UnsupportedFeatureError(
            f"{where}: datatype of {tid.get_size()} bytes maps to {dtype} of {dtype.itemsize}"
        )
    return without_metadata(dtype)


def _check_members(dtype: np.dtype[Any], where: str) -> None:
    """Reject the compound members zarr-python 3 (3.1) cannot read in a Zarr v2 dtype."""
    for name in dtype.names or ():
        member: np.dtype[Any] = dtype.fields[name][0]  # type: ignore[index]
        if member.names:
            raise UnsupportedFeatureError(
                f"{where}: nested compound types (member {name!r}) are not supported yet "
                "(zarr-python 3 cannot read nested structured dtypes)"
            )
        if member.subdtype is not None:
            raise UnsupportedFeatureError(
                f"{where}: compound member {name!r} is an array ({member.subdtype[0]}, "
                f"shape {member.subdtype[1]}): zarr-python 3 cannot read structured dtypes "
                "with sub-array fields"
            )


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


def type_attributes(ds: h5py.Dataset, tid: h5t.TypeID | None = None) -> dict[str, Any]:
    """Attributes describing the datatype beyond its dtype: enum mapping, opaque tag
    (``tid``: its datatype, when at hand)."""
    attrs: dict[str, Any] = {}
    tid = ds.id.get_type() if tid is None else tid
    # ``ds.dtype`` is costly the first time; numbers and strings never carry a mapping
    mapping = None if tid.get_class() in _NEVER_ENUM else enum_mapping(ds)
    if mapping is not None:
        attrs[ENUM_ATTR] = mapping
        name = enum_type_name(ds, tid)
        if name is not None:
            attrs[ENUM_NAME_ATTR] = name
    tag = opaque_tag(ds, tid)
    if tag:
        attrs[OPAQUE_TAG_ATTR] = tag
    return attrs


def enum_type_name(ds: h5py.Dataset, tid: h5t.TypeID) -> str | None:
    """The name of the named (committed) datatype equal to ``tid`` in the dataset's group or
    an ancestor, nearest first (netCDF-C commits each enum type it defines), or None."""
    group = ds.parent
    while True:
        for name in group:
            link = group.get(name, getclass=True)
            if link is h5py.Datatype and group[name].id == tid:
                return str(name)
        if group.name == "/":
            return None
        group = group.parent


def opaque_tag(ds: h5py.Dataset, tid: h5t.TypeID | None = None) -> str | None:
    """The tag of an opaque dataset (None for other types); non-UTF-8 bytes escaped."""
    tid = ds.id.get_type() if tid is None else tid
    if tid.get_class() != h5t.OPAQUE:
        return None
    tag: bytes = tid.get_tag()
    return tag.decode("utf-8", "backslashreplace")


def _check_type(tid: h5t.TypeID, where: str) -> None:
    cls = tid.get_class()
    if cls in _UNSUPPORTED_CLASSES:
        raise UnsupportedFeatureError(f"{where}: {_UNSUPPORTED_CLASSES[cls]}")
    if cls == h5t.STRING and tid.is_variable_str():
        raise UnsupportedFeatureError(
            f"{where}: variable-length strings inside compound or array types are not "
            f"supported: {_HEAP_VALUES}"
        )
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
    # padding bits (precision < 8 * size, offset > 0) are fine: h5py reads such an integer as
    # the plain integer of its size, and refzarr's N-bit codec (refzarr.codecs.hdf5.nbit)
    # turns the stored elements into exactly those values (filters_to_codecs adds it)
    size = tid.get_size()
    if size not in (1, 2, 4, 8) or tid.get_precision() + tid.get_offset() > 8 * size:
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


def fill_value(
    ds: h5py.Dataset,
    dtype: np.dtype[Any],
    all_chunks_written: bool | None = None,
    attrs: AttributeTable | None = None,
) -> Any:
    """The Zarr fill value of a dataset, in ``dtype``: what never-written chunks read as, and
    what xarray masks (it takes a Zarr v2 fill value for ``_FillValue``).

    When every chunk is written, the fill value is never read, so it is the ``_FillValue``
    attribute (None without one): xarray then masks exactly what it masks reading the netCDF
    file, which ignores netCDF's default fill values (the HDF5 fill value netCDF-C sets for a
    variable without ``_FillValue``). When a chunk is missing it must read as HDF5 reads it:
    the user-defined HDF5 fill value, or None when that is zero or undefined (both read zeros,
    and xarray then masks by the ``_FillValue`` attribute, if any), or when the fill time is
    "never" and the dataset itself misses chunks (HDF5 fills nothing: h5py reads zeros).

    ``all_chunks_written`` says whether the manifest holds every chunk of the grid (None:
    ask HDF5 whether every chunk is allocated); ``attrs``: its attributes, when already read.
    """
    if all_chunks_written is None:
        all_chunks_written = _all_chunks_written(ds)
    if all_chunks_written:
        return _declared_fill(ds, dtype, attrs)
    plist = creation_plist(ds)
    if plist.fill_value_defined() != h5d.FILL_VALUE_USER_DEFINED:
        return None
    if plist.get_fill_time() == h5d.FILL_TIME_NEVER and not _all_chunks_written(ds):
        # HDF5 leaves the reader's buffer as it was where nothing was allocated (h5py's holds
        # zeros); only a netCDF extension past the dataset's end reads as its fill value
        return None
    stored = np.asarray(ds.fillvalue)
    if dtype.names:
        value = np.frombuffer(stored.tobytes(), dtype=dtype)[0]
    else:
        value = stored.astype(dtype)[()]
    return value if any(np.asarray(value).tobytes()) else None


def _all_chunks_written(ds: h5py.Dataset) -> bool:
    """Whether every chunk of the dataset's grid is stored (vacuously true when it is empty)."""
    if ds.size == 0:
        return True
    layout = creation_plist(ds).get_layout()
    if layout == h5d.COMPACT:
        return True
    if layout == h5d.CONTIGUOUS:
        return ds.id.get_offset() is not None
    if layout != h5d.CHUNKED or ds.chunks is None:
        return False
    grid = 1
    for length, chunk in zip(ds.shape, ds.chunks, strict=True):
        grid *= -(-length // chunk)
    return bool(ds.id.get_num_chunks() >= grid)


def _declared_fill(ds: h5py.Dataset, dtype: np.dtype[Any], attrs: AttributeTable | None) -> Any:
    """The ``_FillValue`` attribute in ``dtype``, or None (absent, or not one value of it)."""
    try:
        value = (ds.attrs if attrs is None else attrs).get("_FillValue")
    except (OSError, TypeError, ValueError):
        return None
    if value is None or isinstance(value, h5py.Empty):
        return None
    return _in_dtype(np.asarray(value), dtype)


def _in_dtype(value: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> Any:
    """One value in ``dtype`` (None unless it is exactly one value that converts exactly)."""
    if value.size != 1:
        return None
    if dtype.names or value.dtype.names:
        if value.dtype.itemsize != dtype.itemsize:
            return None
        return np.frombuffer(value.tobytes(), dtype=dtype)[0]
    try:
        converted = value.reshape(()).astype(dtype)
        back = converted.astype(value.dtype)
    except (TypeError, ValueError):
        return None
    if back.tobytes() != value.reshape(()).tobytes():
        return None
    return converted[()]


def enum_mapping(ds: h5py.Dataset) -> dict[str, int] | None:
    """The ``{name: value}`` mapping of an enum dataset, or None (booleans are no enum)."""
    mapping = h5py.check_enum_dtype(ds.dtype)
    if mapping is None or ds.dtype.kind == "b":
        return None
    return {str(name): int(value) for name, value in mapping.items()}
