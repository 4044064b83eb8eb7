"""Grid-mapping variables (CF's ``grid_mapping``: GeoTIFF's ``spatial_ref``, netCDF's ``crs``):
found in the files, kept once (never stacked) and checked to describe one CRS and grid."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from refzarr.errors import IncompatibleError
from refzarr.model import RefArray
from refzarr.model.frozen import json_identity, thaw_json

__all__ = ["ADVICE", "attributes_difference", "check_grid_mapping", "grid_mapping_paths"]

Describe = Callable[[Sequence[int]], str]

#: Attributes named first when they differ: the CRS, then the grid.
_FIRST = {"crs_wkt": 0, "spatial_ref": 1, "GeoTransform": 2}

#: Attributes whose text is shortened in messages (WKT runs to kilobytes).
_SHOWN = 120


def grid_mapping_paths(arrays: Iterable[tuple[str, RefArray]]) -> frozenset[str]:
    """Paths of the variables some array of ``arrays`` (path, array: ``group.arrays()``)
    names in its ``grid_mapping`` attribute (``"spatial_ref"``, or CF's extended ``"crs: x y
    crs2: lat lon"``), each looked up in the naming variable's group, then in its ancestors
    (CF's search)."""
    named = dict(arrays)
    found = set()
    for path, array in named.items():
        text = array.meta.attributes.get("grid_mapping")
        if not isinstance(text, str):
            continue
        folder = path.rpartition("/")[0]
        for name in _names(text):
            target = _resolve(named, folder, name)
            if target is not None and target != path:
                found.add(target)
    return frozenset(found)


def _names(text: str) -> list[str]:
    """The variable names of a ``grid_mapping`` attribute, plain or extended."""
    words = text.split()
    if any(w.endswith(":") for w in words):
        return [w[:-1] for w in words if w.endswith(":") and len(w) > 1]
    return words[:1]


def _resolve(arrays: Mapping[str, RefArray], folder: str, name: str) -> str | None:
    """The path of array ``name`` seen from ``folder``: absolute, else the nearest ancestor."""
    if name.startswith("/"):
        name = name.strip("/")
        return name if name in arrays else None
    while True:
        path = f"{folder}/{name}" if folder else name
        if path in arrays:
            return path
        if not folder:
            return None
        folder = folder.rpartition("/")[0]


def check_grid_mapping(
    path: str, arrays: Sequence[RefArray], files: Sequence[int], describe: Describe
) -> None:
    """Raise IncompatibleError when the grid-mapping variable ``path`` has other attributes
    (another CRS, another GeoTransform) in some file than in the first."""
    first = arrays[0].meta.attributes
    for array, file in zip(arrays[1:], files[1:], strict=True):
        attributes = array.meta.attributes
        if attributes is first or attributes.items() == first.items():  # usual: one call
            continue
        if attributes == first:  # exact (`json_equal`): NaN attributes, other key order
            continue
        raise IncompatibleError(
            f"grid mapping {path!r} differs between {describe([files[0]])} and "
            f"{describe([file])}, so the files are not on one CRS and grid: "
            f"{attributes_difference(first, array.meta.attributes)}; {ADVICE}"
        )


ADVICE = "combine each CRS's (or grid's) files separately, or reproject them"


def attributes_difference(first: Mapping[str, Any], second: Mapping[str, Any]) -> str:
    """The first differing attribute of two grid mappings in words (the CRS first)."""
    a, b = thaw_json(first), thaw_json(second)
    names = sorted(set(a) | set(b), key=lambda k: (k not in _FIRST, _FIRST.get(k, 0), k))
    differ = [k for k in names if _key(a, k) != _key(b, k)]
    if not differ:
        return "their attributes are equal"
    name = differ[0]
    also = f" (also {', '.join(map(repr, differ[1:4]))})" if len(differ) > 1 else ""
    return (
        f"{name!r} is {_short(a.get(name))} in the first and {_short(b.get(name))} in the "
        f"second{also}"
    )


def _key(attributes: dict[str, Any], name: str) -> str | None:
    return json_identity(attributes[name]) if name in attributes else None


def _short(value: object) -> str:
    if value is None:
        return "absent"
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 5]}...{text[-4:]}"
