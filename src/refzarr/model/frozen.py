"""Deeply immutable JSON values: attributes and codec configs inside the frozen model."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any

import numpy as np

__all__ = [
    "DeferredJSON",
    "FrozenDict",
    "freeze_json",
    "json_equal",
    "json_identity",
    "plain_json",
    "plain_mapping",
    "thaw_json",
]


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
        """Equal to any mapping with the same items as JSON (`json_equal`): NaN equals NaN,
        1, 1.0 and True differ, key order is ignored."""
        if isinstance(other, Mapping):
            return _same_mapping(self._data, other)
        return NotImplemented

    # the cached hash is not pickled: str hashes differ between processes (hash seeds); a
    # 1-tuple, never empty (protocols 0 and 1 drop an empty state without __setstate__)
    def __getstate__(self) -> tuple[dict[str, Any]]:
        return (self._data,)

    def __setstate__(self, state: Any) -> None:
        if len(state) == 2:  # pickled before: (None, {"_data": ..., "_hash": ...})
            state = (state[1]["_data"],)
        self._data = state[0]
        self._hash = None

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"


class DeferredJSON(Mapping[str, Any]):
    """A frozen JSON object made only when first used: a reference set's record of its
    sources (thousands of entries, needed by source checks and refreshes, not by opening).

    Parameters
    ----------
    load
        Returns the document (a JSON object, plain dicts and lists; not changed afterwards)
        or raises (`RefFormatError` naming the set, for a record that cannot be read); called
        at the first use, and again at the next use after it raised.
    document
        The document, when it is already parsed (its freezing is what is deferred).
    lookup
        With ``load``: returns a view of parts of the document that costs less than loading
        it whole (a record's states of the files a read asks for), or None; see `partial`.

    Notes
    -----
    `freeze_json` keeps it as it is (it is immutable), so `RefGroup.sources` may hold one.
    `raw` gives the document unfrozen (to read only), for lookups that need no frozen copy.
    Pickled, it carries the document (loaded first), never the loader.
    """

    __slots__ = ("_document", "_frozen", "_load", "_lock", "_lookup")

    def __init__(
        self,
        load: Callable[[], Mapping[str, Any]] | None = None,
        *,
        document: Mapping[str, Any] | None = None,
        lookup: Callable[[], Any] | None = None,
    ) -> None:
        if (load is None) == (document is None):
            raise TypeError("DeferredJSON takes a loader or a document")
        self._load = load
        self._lookup = lookup
        self._document = document
        self._frozen: FrozenDict | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the document has been read."""
        return self._document is not None

    def partial(self) -> Any:
        """What the ``lookup`` given with the loader returns (parts of the document, read as
        they are asked for: its owner knows what), while the document is not loaded; else
        None (then use the document)."""
        if self._document is not None or self._lookup is None:
            return None
        return self._lookup()

    def raw(self) -> Mapping[str, Any]:
        """The document as loaded (plain dicts: read it, never change it)."""
        document = self._document
        if document is None:
            with self._lock:
                document = self._document
                if document is None:
                    document = self._loaded()
        return document

    def _loaded(self) -> Mapping[str, Any]:
        assert self._load is not None
        document = self._load()
        if not isinstance(document, Mapping):
            raise TypeError(f"the loaded document is no JSON object: {document!r:.80}")
        self._document = document
        self._load = self._lookup = None  # what they held is no longer needed
        return document

    def frozen(self) -> FrozenDict:
        """The document frozen (`freeze_json`), made once."""
        frozen = self._frozen
        if frozen is None:
            frozen = freeze_json(dict(self.raw()), where="sources")
            self._frozen = frozen
        return frozen

    def __getitem__(self, key: str) -> Any:
        return self.frozen()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.frozen())

    def __len__(self) -> int:
        return len(self.raw())

    def __contains__(self, key: object) -> bool:
        return key in self.raw()

    def get(self, key: str, default: Any = None) -> Any:
        return self.frozen().get(key, default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.frozen() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.frozen())

    def __reduce__(self) -> tuple[Any, ...]:
        return (_deferred_document, (self.raw(),))

    def __repr__(self) -> str:
        if self._document is None:
            return "DeferredJSON(<not loaded>)"
        return f"DeferredJSON({self._document!r:.200})"


def _deferred_document(document: Mapping[str, Any]) -> DeferredJSON:
    return DeferredJSON(document=document)


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
"""Exactly these types are JSON scalars as they are (subclasses take the general path)."""


def plain_mapping(value: Any) -> Any:
    """The dict behind a `FrozenDict` (to read only), the document of a `DeferredJSON`
    (unfrozen), else ``value`` as it is: for loops over thousands of them, where the
    FrozenDict's Python-level methods cost a microsecond or more per call."""
    kind = type(value)
    if kind is FrozenDict:
        return value._data
    if kind is DeferredJSON:
        return value.raw()
    return value


def freeze_json(value: Any, *, where: str = "value") -> Any:
    """Return an immutable copy of a JSON-like value (dicts -> FrozenDict, lists -> tuples).

    numpy scalars and arrays become Python numbers and tuples, so that attributes taken straight
    from a source library (h5py, netCDF4) are accepted.
    """
    if type(value) in _SCALAR_TYPES:  # the usual case first: no ABC instance checks
        return value
    if type(value) is DeferredJSON:  # frozen when used
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
    kind = type(value)
    if kind in _SCALAR_TYPES:  # the usual cases first: no ABC instance checks (a record of
        return value  # thousands of scans is thawed whenever a set is written)
    if kind is FrozenDict:
        return {key: thaw_json(item) for key, item in value._data.items()}
    if kind is tuple:
        return [thaw_json(item) for item in value]
    if isinstance(value, Mapping):
        return {key: thaw_json(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [thaw_json(item) for item in value]
    return value


def plain_json(value: Any) -> Any:
    """A plain JSON value to serialise (read it, never change it): the document of a
    `DeferredJSON` as loaded (not frozen and thawed again), else `thaw_json`'s copy."""
    if type(value) is DeferredJSON:
        return value.raw()
    return thaw_json(value)


def json_identity(value: Any) -> str:
    """Canonical JSON text of a value: equal for equal values, NaN included, key order ignored."""
    return json.dumps(thaw_json(value), sort_keys=True, allow_nan=True)


def json_equal(a: Any, b: Any) -> bool:
    """Whether two JSON values have the same `json_identity`, without writing it.

    Types count as in JSON text: 1, 1.0 and True differ, and so do 0.0 and -0.0; NaN equals
    NaN; key order is ignored; a list equals a tuple of the same items; subclasses of JSON
    types (numpy's float64) compare as the text JSON writes for them.

    Raises
    ------
    TypeError
        For a value JSON cannot write (bytes, numpy integers, ...) met while comparing.
    """
    if a is b:
        return True
    kind = type(a)
    if kind is type(b):  # the usual case: one exact type
        if kind is str or kind is int or kind is bool:
            return bool(a == b)
        if kind is float:
            return _same_float(a, b)
        if kind is FrozenDict or kind is dict:
            return _same_mapping(a, b)
        if kind is tuple or kind is list:
            return _same_sequence(a, b)
    return _same_as_json(a, b)


def _same_float(a: float, b: float) -> bool:
    if a == b:
        return a != 0.0 or math.copysign(1.0, a) == math.copysign(1.0, b)  # JSON: 0.0, -0.0
    return a != a and b != b  # NaN


def _same_mapping(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if len(a) != len(b):
        return False
    other = b._data if type(b) is FrozenDict else b  # its dict: lookups without a call
    for key, x in a.items():
        y = other.get(key, _ABSENT)
        if x is y:
            continue
        kind = type(x)
        if kind is type(y) and (kind is str or kind is int):  # the usual values, inline
            if x != y:
                return False
        elif y is _ABSENT or not json_equal(x, y):
            return False
    return True


_ABSENT = object()


def _same_sequence(a: tuple[Any, ...] | list[Any], b: Any) -> bool:
    return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))


def _same_as_json(a: Any, b: Any) -> bool:
    """`json_equal` of values of different types: compared as the JSON kind each writes."""
    kind = _json_kind(a)
    if kind != _json_kind(b):
        return False
    if kind == "number":
        return bool(int(a) == int(b))
    if kind == "real":
        return _same_float(float(a), float(b))
    if kind == "text":
        return str.__eq__(a, b) is True
    if kind == "object":
        return _same_mapping(a, b)
    if kind == "array":
        return _same_sequence(a, b)
    return True  # null, or two booleans of one value (distinct values are caught above)


def _json_kind(value: Any) -> str:
    """What JSON writes a value as (`json.dumps` after `thaw_json`); TypeError if nothing."""
    if value is None:
        return "null"
    if value is True or value is False:
        return f"bool {value}"
    for kind, types in _JSON_KINDS:
        if isinstance(value, types):
            return kind
    raise TypeError(f"{type(value).__name__} is not a JSON value: {value!r}")


_JSON_KINDS: tuple[tuple[str, Any], ...] = (
    ("number", int),  # bools are caught before
    ("real", float),
    ("text", str),
    ("array", (list, tuple)),
    ("object", Mapping),
)
