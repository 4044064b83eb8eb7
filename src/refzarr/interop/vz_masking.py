"""Which values read as missing, kept the same on both sides of the VirtualiZarr bridge.

refzarr's model follows Zarr v2 and kerchunk: an array's fill value masks (xarray's Zarr v2
rule) unless its attributes carry the attribute-types record (``_nczarr_attr``), which says
"mask by ``_FillValue`` attributes only" (netCDF's rule); the fill value may be undefined.
VirtualiZarr holds Zarr v3 metadata: the fill value always exists and never masks; only a
``_FillValue`` attribute does (xarray's Zarr v3 rule).

`mark` makes a refzarr array's attributes say, in v3 terms, what refzarr would mask (adding
``_FillValue`` where the fill value masks) and records in the types record what it changed,
so that `unmark` gives back exactly the original attributes and fill value. An array that
comes from VirtualiZarr unmarked gets an empty types record: masked by ``_FillValue``
attributes only, as VirtualiZarr's readers mask it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from refzarr.model import ArrayMeta
from refzarr.model.attr_types import LAYOUT_ATTR, TYPES_ATTR
from refzarr.model.dtypes import decode_fill_value, encode_fill_value

__all__ = ["MARK", "mark", "unmark"]

MARK = "virtualizarr"
"""Key of the types record under which `mark` notes what it changed."""
_ADDED_RECORD = "added_record"
_UNDEFINED_FILL = "undefined_fill_value"
_ADDED_FILL_ATTRIBUTE = "added_fill_value_attribute"
_FILL = "fill_value"


def mark(
    meta: ArrayMeta, attributes: dict[str, Any], *, loaded: bool = False, notes: bool = True
) -> dict[str, Any]:
    """``attributes`` (plain JSON, a copy is returned) with v3 masking and, if ``notes``, the
    notes to undo; ``loaded``: the array travels as a loaded variable, whose fill value no
    metadata keeps."""
    attrs = dict(attributes)
    record = attrs.get(TYPES_ATTR)
    changes: dict[str, Any] = {}
    if not isinstance(record, Mapping):
        record = {"types": {}}
        changes[_ADDED_RECORD] = True
        if meta.fill_value is not None and "_FillValue" not in attrs:
            attrs["_FillValue"] = _python(meta.fill_value)  # Zarr v2's fill value masks
            changes[_ADDED_FILL_ATTRIBUTE] = True
    if meta.fill_value is None:
        changes[_UNDEFINED_FILL] = True
    elif loaded:
        changes[_FILL] = encode_fill_value(meta.fill_value, meta.dtype)
    if changes and notes:
        attrs[TYPES_ATTR] = {**record, MARK: changes}
    elif not notes:  # refzarr's own records would show as attributes on the VirtualiZarr side
        attrs.pop(TYPES_ATTR, None)
        attrs.pop(LAYOUT_ATTR, None)
    return attrs


def unmark(
    attributes: dict[str, Any], fill_value: Any, dtype: np.dtype[Any]
) -> tuple[dict[str, Any], Any]:
    """The attributes and fill value `mark` started from; for an unmarked array from
    VirtualiZarr, an empty types record (mask by ``_FillValue`` attributes only)."""
    attrs = dict(attributes)
    record = attrs.get(TYPES_ATTR)
    if not isinstance(record, Mapping):
        attrs[TYPES_ATTR] = {"types": {}}
        return attrs, fill_value
    notes = record.get(MARK)
    if not isinstance(notes, Mapping):
        return attrs, fill_value
    rest = {k: v for k, v in record.items() if k != MARK}
    if notes.get(_ADDED_RECORD):
        del attrs[TYPES_ATTR]
    else:
        attrs[TYPES_ATTR] = rest
    if notes.get(_ADDED_FILL_ATTRIBUTE):
        attrs.pop("_FillValue", None)
    if notes.get(_UNDEFINED_FILL):
        fill_value = None
    elif _FILL in notes:
        fill_value = decode_fill_value(notes[_FILL], dtype)
    return attrs, fill_value


def _python(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
