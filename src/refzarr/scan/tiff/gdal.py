"""GDAL's TIFF tags as attributes: ``GDAL_NODATA`` as the fill value, and the items of
``GDAL_METADATA`` (dataset items, band descriptions, scale, offset, units, per-band items),
named as rioxarray names them (``long_name``, ``scale_factor``, ``add_offset``, ``units``)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np

__all__ = ["gdal_attributes", "gdal_nodata", "text_tags"]

_NODATA, _METADATA = 42113, 42112
_ROLES = {
    "description": "long_name",
    "unittype": "units",
    "scale": "scale_factor",
    "offset": "add_offset",
}
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


_TEXT_TAGS = {
    269: "TIFFTAG_DOCUMENTNAME",
    270: "TIFFTAG_IMAGEDESCRIPTION",
    305: "TIFFTAG_SOFTWARE",
    306: "TIFFTAG_DATETIME",
    315: "TIFFTAG_ARTIST",
    316: "TIFFTAG_HOSTCOMPUTER",
    33432: "TIFFTAG_COPYRIGHT",
}
"""Text tags GDAL (and so rioxarray) shows as dataset metadata, by the names it gives them."""


def text_tags(page: Any) -> dict[str, str]:
    """The page's text tags as GDAL names them (``TIFFTAG_DATETIME``, ...): a ``time`` to
    combine files by (`refzarr.FromAttribute`)."""
    found = {}
    for code, name in _TEXT_TAGS.items():
        tag = page.tags.get(code)
        if tag is not None and isinstance(tag.value, str) and tag.value.strip("\x00 "):
            found[name] = tag.value.rstrip("\x00")
    return found


def gdal_nodata(page: Any, dtype: np.dtype[Any]) -> Any:
    """``GDAL_NODATA`` as a value of ``dtype``, or None (absent, or no value of ``dtype``)."""
    if _NODATA not in page.tags:
        return None
    text = str(page.tags[_NODATA].value).strip().rstrip("\x00")
    try:
        value = float(text)
    except ValueError:
        return None
    if dtype.kind == "f":
        return dtype.type(value)
    if dtype.kind in "iu":
        if not value.is_integer():
            return None
        info = np.iinfo(dtype)
        return dtype.type(int(value)) if info.min <= value <= info.max else None
    if dtype.kind == "c":
        return dtype.type(value)
    return None


def gdal_attributes(page: Any, bands: int) -> dict[str, Any]:
    """Attributes from ``GDAL_METADATA`` (default domain) for an image of ``bands`` bands:
    dataset items as they are, per-band items one value when every band has the same, else
    a list (one per band); scale and offset differing per band as ``scales`` / ``offsets``."""
    if _METADATA not in page.tags:
        return {}
    try:
        root = ET.fromstring(str(page.tags[_METADATA].value).strip().rstrip("\x00"))
    except ET.ParseError:
        return {}
    attrs: dict[str, Any] = {}
    per_band: dict[str, list[Any]] = {}
    for item in root.iter("Item"):
        if item.get("domain") or item.get("name") is None:
            continue
        name, value = str(item.get("name")), _value(item.text or "")
        role = item.get("role")
        sample = item.get("sample")
        if role in ("colorinterp",):
            continue
        if sample is None:
            attrs[name] = value
            continue
        band = int(sample)
        if not 0 <= band < bands:
            continue
        key = {"scale": "scale_factor", "offset": "add_offset"}.get(
            role or "", _ROLES.get(role or "", name)
        )
        per_band.setdefault(key, [None] * bands)[band] = value
    for key, values in per_band.items():
        attrs.update(_band_values(key, values, bands))
    return attrs


def _band_values(key: str, values: list[Any], bands: int) -> dict[str, Any]:
    if bands == 1 or all(v == values[0] for v in values):
        return {key: values[0]}
    if key == "scale_factor":
        return {"scales": values}
    if key == "add_offset":
        return {"offsets": values}
    return {key: values}


def _value(text: str) -> Any:
    """A number when the text is one (as rioxarray parses tags), else the text."""
    text = text.strip()
    if _NUMBER.match(text):
        number = float(text)
        if re.match(r"^[+-]?\d+$", text):
            return int(text)
        return number if math.isfinite(number) else text
    return text
