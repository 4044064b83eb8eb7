"""Padding bits of HDF5 integer types: which datasets need `Hdf5NBit` to read as h5py does.

Works on anything shaped like h5py's ``TypeID`` (duck typed: this layer does not import h5py).
"""

from __future__ import annotations

from typing import Any, Protocol

from refzarr.errors import UnsupportedFeatureError

__all__ = ["TypeLike", "integer_padding"]

# HDF5's H5T_class_t codes
_INTEGER, _COMPOUND, _ENUM, _ARRAY = 0, 6, 8, 10


class TypeLike(Protocol):
    """The part of h5py's ``TypeID`` this module reads."""

    def get_class(self) -> int: ...

    def get_size(self) -> int: ...


def integer_padding(type_id: TypeLike, where: str = "") -> tuple[int, int] | None:
    """``(precision, offset)`` of an integer type with padding bits, None for any other type.

    Raises
    ------
    UnsupportedFeatureError
        When a padded integer is nested in a compound, enum or array type.
    """
    cls = type_id.get_class()
    if cls == _INTEGER:
        return _padding(type_id)
    if _nested_padding(type_id):
        raise UnsupportedFeatureError(
            f"{where}: integers with padding bits inside compound, enum or array types "
            "are not supported"
        )
    return None


def _padding(type_id: Any) -> tuple[int, int] | None:
    precision, offset = int(type_id.get_precision()), int(type_id.get_offset())
    if precision == 8 * type_id.get_size() and offset == 0:
        return None
    return precision, offset


def _nested_padding(type_id: Any) -> bool:
    cls = type_id.get_class()
    if cls == _INTEGER:
        return _padding(type_id) is not None
    if cls in (_ENUM, _ARRAY):
        return _nested_padding(type_id.get_super())
    if cls == _COMPOUND:
        return any(
            _nested_padding(type_id.get_member_type(i)) for i in range(type_id.get_nmembers())
        )
    return False
