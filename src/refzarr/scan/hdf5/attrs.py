"""HDF5 attributes as JSON values, HDF5 and netCDF bookkeeping left out.

Conversions: numpy scalars become Python numbers; arrays become lists, except that an array of
exactly one element becomes that element (netCDF stores every attribute as a vector; netCDF4-
python and xarray show a length-1 vector as a scalar); bytes become text, bytes that are not
UTF-8 replaced by U+FFFD as netCDF4-python shows them; an empty (null-dataspace) attribute
becomes ``""`` when its type is a string and ``[]`` otherwise. Numbers whose type JSON loses
(float32, int16, ...) have it recorded in ``_nczarr_attr`` (`refzarr.model.attr_types`).

`AttributeTable` reads an object's attributes once, for the user attributes and for the
bookkeeping the scanner looks at (``CLASS``, ``NAME``, ``_FillValue``, netCDF's ids).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, cast

import h5py
import numpy as np
from h5py import h5, h5a, h5ds, h5p, h5s, h5t

from refzarr.errors import UnsupportedFeatureError
from refzarr.model.attr_types import (
    RESERVED_ATTRS,
    attribute_type,
    has_untyped_numbers,
    reserved_attribute,
    with_types,
)
from refzarr.scan.hdf5.attr_messages import UNREAD, HeaderAttributes
from refzarr.scan.hdf5.names import not_text, shown

__all__ = [
    "BASE64_PREFIX",
    "INTERNAL_ATTRS",
    "AttributeTable",
    "get_attribute",
    "is_scale",
    "read_attributes",
]

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
"""Prefix earlier releases gave a bytes attribute that is not UTF-8 text (now U+FFFD, as
netCDF4-python shows it)."""


_MISSING = UNREAD
"""Marks a value not read (yet), or one `_read_fast` leaves to h5py."""

_TYPES: dict[bytes, tuple[np.dtype[Any], h5t.TypeID] | None] = {}
"""``(numpy dtype, memory type)`` of the attribute types seen so far (None: left to h5py), by
their HDF5 encoding."""


class AttributeTable:
    """The attributes of one group or dataset: names in h5py's order, each value read once.

    Values are what ``obj.attrs[name]`` gives, exceptions included. Numbers, fixed-length
    strings and compounds of those and references, in a scalar or simple dataspace, are read
    with HDF5's low-level calls and a memory type cached per file type (h5py's high-level read
    builds both again for every attribute); anything else is read by h5py's high-level code.

    Parameters
    ----------
    obj
        The group or dataset.
    plist
        Its creation property list, when at hand (else fetched).
    header
        Its attributes as read from its object header (`refzarr.scan.hdf5.attr_messages`),
        when they could be: names and the values read there are taken from it.
    """

    __slots__ = ("_id", "_obj", "_scale", "_texts", "_values", "names")

    def __init__(
        self, obj: h5py.HLObject, plist: Any = None, header: HeaderAttributes | None = None
    ) -> None:
        self._obj, self._id = obj, obj.id
        self.names: list[str]
        """The attribute names, in the order ``obj.attrs`` lists them."""
        self._scale: bool | None = None
        self._texts: Mapping[str, bytes] | None = None
        """Stored bytes of scalar strings cut at a NUL, by name (None: not read from the
        header, ask HDF5)."""
        if header is None:
            self._values: dict[str, Any] = {}
            self.names = _attribute_names(obj.id, plist)
        else:
            self._values = {k: v for k, v in header.values.items() if v is not UNREAD}
            self.names = header.names
            self._scale = header.dimension_scale
            self._texts = header.texts or {}

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def __getitem__(self, name: str) -> Any:
        """The value of attribute ``name`` (KeyError when absent, h5py's errors when
        unreadable)."""
        value = self._values.get(name, _MISSING)
        if value is _MISSING:
            value = self._values[name] = self._read(name)
        if isinstance(value, _Refused):
            raise UnsupportedFeatureError(value.message)
        return value

    def refuse(self, name: str, message: str) -> None:
        """Never read attribute ``name``: asking for it raises `UnsupportedFeatureError`
        with ``message``."""
        self._values[name] = _Refused(message)

    def stored_text(self, name: str) -> bytes | None:
        """The stored bytes of attribute ``name`` when it is a scalar null-terminated string
        holding something after a NUL (its value, as h5py's, stops there), else None."""
        if self._texts is not None:
            return self._texts.get(name)
        try:
            return _stored_text(self._id, name)
        except Exception:  # h5py's reading of the value says what is wrong, if anything
            return None

    def settle(self, name: str, value: Any) -> None:
        """Attribute ``name`` has ``value`` (read elsewhere, exactly as h5py reads it)."""
        self._values[name] = value

    def get(self, name: str, default: Any = None) -> Any:
        """The value of attribute ``name``, or ``default`` when there is none."""
        return self[name] if name in self.names else default

    def storage_size(self, name: str) -> int:
        """Bytes the value of attribute ``name`` takes in the file (without reading it)."""
        size: int = h5a.open(self._id, name.encode("utf8")).get_storage_size()
        return size

    def dimension_scale(self) -> bool:
        """``h5ds.is_scale`` of the dataset, asked of HDF5 only when its attributes do not
        settle it (HDF5 looks for a ``CLASS`` attribute first: without one, it is no scale)."""
        if "CLASS" not in self.names:
            return False
        if self._scale is None:
            self._scale = bool(h5ds.is_scale(self._id))
        return self._scale

    def is_read(self, name: str) -> bool:
        """Whether the value of attribute ``name`` is at hand (reading it costs nothing)."""
        return name in self._values

    def _read(self, name: str) -> Any:
        return _read_value(self._id, self._obj.attrs, name)


class _Refused(NamedTuple):
    """An attribute refused before it is read (`AttributeTable.refuse`)."""

    message: str


def get_attribute(obj: h5py.HLObject, name: str, default: Any = None) -> Any:
    """``obj.attrs.get(name, default)``, read as `AttributeTable` reads it."""
    if not h5a.exists(obj.id, name.encode("utf8")):
        return default
    return _read_value(obj.id, obj.attrs, name)


def _read_value(oid: h5py.h5o.ObjectID, attrs: h5py.AttributeManager, name: str) -> Any:
    """``attrs[name]``: `_read_fast` when it can, else h5py."""
    try:
        value = _read_fast(oid, name)
    except Exception:  # h5py's own read below raises the proper error
        value = _MISSING
    return attrs[name] if value is _MISSING else value


def _attribute_names(oid: h5py.h5o.ObjectID, plist: Any) -> list[str]:
    """Attribute names as ``list(obj.attrs)`` gives them (creation order when tracked)."""
    names: list[str] = []

    def add(name: bytes, *_info: Any) -> None:
        try:
            names.append(name.decode("utf8"))
        except UnicodeDecodeError:  # h5py keeps such a name as bytes
            names.append(name)  # type: ignore[arg-type]

    plist = oid.get_create_plist() if plist is None else plist
    tracked = plist.get_attr_creation_order() & h5p.CRT_ORDER_TRACKED
    h5a.iterate(oid, add, index_type=h5.INDEX_CRT_ORDER if tracked else h5.INDEX_NAME)
    return names


def _read_fast(oid: h5py.h5o.ObjectID, name: str) -> Any:
    """An attribute read as h5py reads it, or `_MISSING` for the kinds left to h5py (see
    `_plain`; an empty dataspace)."""
    attr = h5a.open(oid, name.encode("utf8"))
    space = attr.get_space()
    kind = space.get_simple_extent_type()
    if kind not in (h5s.SCALAR, h5s.SIMPLE):
        return _MISSING
    types = _memory_type(attr.get_type())
    if types is None:
        return _MISSING
    dtype, mtype = types
    out = np.zeros(space.get_simple_extent_dims(), dtype=dtype)
    attr.read(out, mtype=mtype)
    return out[()] if out.ndim == 0 else out


def _stored_text(oid: h5py.h5o.ObjectID, name: str) -> bytes | None:
    """`AttributeTable.stored_text` asked of HDF5 (an attribute not read from the header)."""
    attr = h5a.open(oid, name.encode("utf8"))
    tid = attr.get_type()
    if tid.get_class() != h5t.STRING or tid.is_variable_str():
        return None
    if (
        tid.get_strpad() != h5t.STR_NULLTERM
        or attr.get_space().get_simple_extent_type() != h5s.SCALAR
    ):
        return None
    out = np.zeros((), dtype=f"S{tid.get_size()}")
    attr.read(out, mtype=tid)  # the file's type: no conversion, every byte as stored
    raw = out.tobytes()
    return raw if raw.partition(b"\0")[2].strip(b"\0") else None


def _memory_type(tid: h5t.TypeID) -> tuple[np.dtype[Any], h5t.TypeID] | None:
    """h5py's dtype of a file type and the memory type it reads into, or None when h5py's
    read needs more (cached by the type's encoding, which describes it whole)."""
    key = tid.encode()
    if key not in _TYPES:
        _TYPES[key] = _translate(tid)
    return _TYPES[key]


def _translate(tid: h5t.TypeID) -> tuple[np.dtype[Any], h5t.TypeID] | None:
    if not _plain(tid, members=True):
        return None
    dtype = tid.dtype
    return dtype, h5t.py_create(dtype)


def _plain(tid: h5t.TypeID, *, members: bool) -> bool:
    """Whether h5py reads values of ``tid`` with no more than a memory type: numbers, fixed
    strings, and (when ``members``) compounds of those and of references (dimension scales'
    ``REFERENCE_LIST``)."""
    cls = tid.get_class()
    if cls in (h5t.INTEGER, h5t.FLOAT):
        return True
    if cls == h5t.STRING:
        return not tid.is_variable_str()
    if cls == h5t.COMPOUND and members:
        return all(
            _plain(tid.get_member_type(k), members=False)
            or tid.get_member_class(k) == h5t.REFERENCE
            for k in range(tid.get_nmembers())
        )
    return False


def read_attributes(
    obj: h5py.HLObject,
    where: str,
    on_skip: Callable[[str, str], None] | None,
    table: AttributeTable | None = None,
) -> dict[str, Any]:
    """The user attributes of a group or dataset, in the file's order.

    An attribute that cannot be converted raises `UnsupportedFeatureError` naming it, or, when
    ``on_skip`` is given, is reported to ``on_skip(name, reason)`` and left out. ``table``:
    the object's attributes when already read (`AttributeTable`).
    """
    attrs = AttributeTable(obj) if table is None else table
    hidden = INTERNAL_ATTRS | (_SCALE_ATTRS if is_scale(attrs) else frozenset())
    out: dict[str, Any] = {}
    types: dict[str, str] = {}
    raw: dict[str, Any] = {}
    for name in cast("list[str | bytes]", attrs.names):  # h5py: bytes when not UTF-8
        if name in hidden:
            continue
        try:
            if isinstance(name, bytes):
                raise not_text(where, "attribute", name)
            if name in RESERVED_ATTRS:
                raise reserved_attribute(where, name)
            out[name], kind = _read_one(attrs, name, where)
        except UnsupportedFeatureError as exc:
            if on_skip is None:
                raise
            on_skip(shown(name), str(exc))
            continue
        if kind is not None:
            types[name] = kind
        if _replaced_text(out[name]):
            raw[name] = _original_bytes(attrs.stored_text(name) or attrs[name])
    # netCDF family 4: what netCDF-C (and so netCDF4-python) reads any HDF5 file as
    family = 4 if has_untyped_numbers(out, types) else None
    with_types(out, types, mark=False, raw_bytes={k: v for k, v in raw.items() if v}, netcdf=family)
    return out


def _replaced_text(value: Any) -> bool:
    """Whether a JSON value holds U+FFFD (text that may not have been UTF-8)."""
    if isinstance(value, str):
        return "\ufffd" in value
    return isinstance(value, list) and any(_replaced_text(item) for item in value)


def _original_bytes(value: Any) -> Any:
    """The bytes (as lists of ints) of a text attribute that is not UTF-8, None when it is."""
    items = value.reshape(-1).tolist() if isinstance(value, np.ndarray) else value
    if isinstance(items, bytes | np.bytes_):
        return None if _utf8(bytes(items)) else list(bytes(items))
    if isinstance(items, list) and all(isinstance(v, bytes | np.bytes_) for v in items):
        if all(_utf8(bytes(v)) for v in items):
            return None
        return [list(bytes(v)) for v in items]
    return None


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def is_scale(attrs: AttributeTable) -> bool:
    """Whether the attributes are a dimension scale's (``CLASS == "DIMENSION_SCALE"``)."""
    try:
        value = attrs.get("CLASS")
    except (OSError, TypeError):
        return False
    return isinstance(value, bytes | np.bytes_) and bytes(value) == b"DIMENSION_SCALE"


def _read_one(attrs: AttributeTable, name: str, where: str) -> tuple[Any, str | None]:
    """An attribute's JSON value and the numpy type JSON loses (`attribute_type`)."""
    try:
        value = attrs[name]
    except (OSError, TypeError, ValueError) as exc:
        raise UnsupportedFeatureError(
            f"{where}: attribute {name!r}: h5py cannot read it: {exc}"
        ) from exc
    if name != "_FillValue":  # netCDF4-python keeps a char _FillValue's bytes as they are
        value = _without_nul(value, attrs.stored_text(name) if _is_bytes(value) else None)
    try:
        return attribute_to_json(value), attribute_type(value)
    except TypeError as exc:
        raise UnsupportedFeatureError(f"{where}: attribute {name!r}: {exc}") from None


def _is_bytes(value: Any) -> bool:
    return isinstance(value, bytes)  # np.bytes_ too


def _without_nul(value: Any, stored: bytes | None) -> Any:
    """Fixed-length text as netCDF4-python shows it, which never holds NUL: a scalar string
    (netCDF's ``char`` attribute) whole (``stored``: its bytes when h5py's value stops at a
    NUL), every NUL removed; each string of an array up to its first NUL (netCDF-C reads
    them as C strings). Anything else as it is."""
    if isinstance(value, bytes):
        data = value if stored is None else stored
        return np.bytes_(data.replace(b"\0", b"")) if b"\0" in data else value
    if isinstance(value, np.ndarray) and value.dtype.kind == "S":
        if not any(b"\0" in item for item in value.reshape(-1).tolist()):
            return value
        cut = [item.partition(b"\0")[0] for item in value.reshape(-1).tolist()]
        return np.array(cut, dtype=value.dtype).reshape(value.shape)
    return value


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
    if type(value) is np.bytes_:  # the usual case (netCDF text) first
        return _text(value.item())
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
    # as netCDF4-python (and so xarray) shows text that is not UTF-8: undecodable bytes
    # replaced by U+FFFD
    return value.decode("utf-8", errors="replace")
