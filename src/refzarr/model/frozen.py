"""Deeply immutable JSON values: attributes and codec configs inside the frozen model."""

from __future__ import annotations

import json
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any

import numpy as np

__all__ = ["FrozenDict", "freeze_json", "json_identity", "plain_mapping", "thaw_json"]


class FrozenDict(Mapping[str, Any]):
    """A read-only, hashable, insertion-ordered mapping of str to frozen JSON values."""

    __slots__ = ("_data", "_hash")

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(items or {})
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # the Mapping mixins go through __getitem__ per key; the dict's own views are read-only too
    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def keys(self) -> KeysView[str]:
        return self._data.keys()

    def items(self) -> ItemsView[str, Any]:
        return self._data.items()

    def values(self) -> ValuesView[Any]:
        return self._data.values()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(json_identity(self))
        return self._hash

    def __eq__(self, other: object) -> bool:
        """Equal to any mapping with the same items; NaN equals NaN, key order is ignored."""
        if isinstance(other, Mapping):
            return json_identity(self) == json_identity(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
"""Exactly these types are JSON scalars as they are (subclasses take the general path)."""


def plain_mapping(value: Any) -> Any:
    """The dict behind a `FrozenDict` (to read only), else ``value`` as it is: for loops
    over thousands of them, where the FrozenDict's Python-level methods cost a microsecond
    or more per call."""
    return value._data if type(value) is FrozenDict else value


def freeze_json(value: Any, *, where: str = "value") -> Any:
    """Return an immutable copy of a JSON-like value (dicts -> FrozenDict, lists -> tuples).

    numpy scalars and arrays become Python numbers and tuples, so that attributes taken straight
    from a source library (h5py, netCDF4) are accepted.
    """
    if type(value) in _SCALAR_TYPES:  # the usual case first: no ABC instance checks
        return value
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: mapping keys must be str, got {key!r}")
            if type(item) in _SCALAR_TYPES:  # no recursion, no error context to format
                out[key] = item
            else:
                out[key] = freeze_json(item, where=f"{where}[{key!r}]")
        return FrozenDict(out)
    if isinstance(value, list | tuple):
        return tuple(freeze_json(item, where=where) for item in value)
    if isinstance(value, np.ndarray):
        return freeze_json(value.tolist(), where=where)
    if isinstance(value, np.generic):
        return freeze_json(value.item(), where=where)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"{where}: {type(value).__name__} is not a JSON value: {value!r}")


def thaw_json(value: Any) -> Any:
    """Return a plain, mutable JSON value (dict/list) from a frozen one."""
    if isinstance(value, Mapping):
        return {key: thaw_json(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [thaw_json(item) for item in value]
    return value


def json_identity(value: Any) -> str:
    """Canonical JSON text of a value: equal for equal values, NaN included, key order ignored."""
    return json.dumps(thaw_json(value), sort_keys=True, allow_nan=True)
