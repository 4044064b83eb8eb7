"""FITS header cards as array attributes, and what the scaling keywords mean for an image."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from astropy.io import fits

from refzarr.errors import ScanError
from refzarr.model.attr_types import with_types

__all__ = [
    "BITPIX_DTYPES",
    "ImageScaling",
    "dimension_order_names",
    "header_attributes",
    "image_scaling",
    "stored_dtype",
]

BITPIX_DTYPES = {8: ">u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}
"""The dtype (as stored, big-endian) of each ``BITPIX`` FITS defines."""

COMMENTARY = ("COMMENT", "HISTORY")
"""Keywords that repeat: their cards become one list each."""


def header_attributes(header: fits.Header) -> dict[str, Any]:
    """Every card as an attribute: the first value of a repeated keyword, ``COMMENT`` and
    ``HISTORY`` as lists of their texts; blank keywords left out."""
    attrs: dict[str, Any] = {}
    for card in header.cards:
        key = card.keyword
        if not key:
            continue
        if key in COMMENTARY:
            attrs.setdefault(key, []).append(str(card.value))
        elif key not in attrs:
            attrs[key] = _json_value(card.value)
    return attrs


def _json_value(value: Any) -> Any:
    """A card value as a JSON value (undefined: None; complex: [real, imag])."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, complex | np.complexfloating):
        return [float(value.real), float(value.imag)]
    if isinstance(value, str):
        return value
    return None  # astropy's Undefined


def stored_dtype(header: fits.Header, where: str, key: str = "BITPIX") -> np.dtype[Any]:
    """The stored dtype ``BITPIX`` (or ``ZBITPIX``) gives; ScanError for other values."""
    bitpix = header.get(key)
    try:
        return np.dtype(BITPIX_DTYPES[bitpix])
    except (KeyError, TypeError):
        raise ScanError(
            f"{where}: {key} = {bitpix!r} is not one FITS defines (8, 16, 32, 64, -32, -64); "
            "the header is damaged or not FITS"
        ) from None


@dataclass(frozen=True, slots=True)
class ImageScaling:
    """How an image's stored values become astropy's: ``unsigned`` (the dtype a shift by
    ``BZERO`` gives, as astropy does) or a linear scale (CF attributes, their numpy types in
    ``_nczarr_attr`` where JSON would lose them), or neither."""

    unsigned: np.dtype[Any] | None
    attributes: dict[str, Any]


def image_scaling(header: fits.Header, stored: np.dtype[Any]) -> ImageScaling:
    """What ``BSCALE``/``BZERO``/``BLANK`` of an image header mean for its values, as astropy
    applies them.

    The unsigned shift when ``BSCALE`` is 1 and ``BZERO`` the sign bit. Else, when an integer
    image has a scale, an offset or any ``BLANK`` (0 included), or a floating-point one a scale
    or an offset, astropy gives floats: ``float32`` for ``BITPIX`` 8, 16 and -32, ``float64``
    for 32, 64 and -64, scaled in that type, a nonzero ``BLANK`` read as NaN. The attributes
    say the same to xarray: ``scale_factor`` (always: alone it picks the float type) and
    ``add_offset`` (when not 0) of that type (recorded as ``<f4`` where float32; the values
    rounded to float32, as astropy's float32 arithmetic rounds them), ``_FillValue`` the
    ``BLANK`` astropy masks.
    """
    bscale = header.get("BSCALE", 1)
    bzero = header.get("BZERO", 0)
    blank = header.get("BLANK") if stored.kind in "iu" else None
    blank = blank if isinstance(blank, int) and not isinstance(blank, bool) else None
    if bscale == 1 and stored.kind in "iu" and bzero != 0:
        shifted = _shifted_dtype(stored, bzero)
        if shifted is not None:
            return ImageScaling(shifted, {})
    if bscale == 1 and bzero == 0 and blank is None:
        return ImageScaling(None, {})
    decoded = _scaled_dtype(stored)
    attrs: dict[str, Any] = {"scale_factor": float(decoded.type(bscale))}
    if bzero != 0:
        attrs["add_offset"] = float(decoded.type(bzero))
    if blank:  # astropy masks a BLANK of 0 as nothing (``if self._blank:``)
        attrs["_FillValue"] = blank
    if decoded == np.float32:
        types: dict[str, str] = {k: "<f4" for k in ("scale_factor", "add_offset") if k in attrs}
        with_types(attrs, types, mark=False)
    return ImageScaling(None, attrs)


def _scaled_dtype(stored: np.dtype[Any]) -> np.dtype[Any]:
    """The float type astropy scales an image of ``stored`` values into."""
    if stored.kind == "f":
        return np.dtype(stored.newbyteorder("="))
    return np.dtype("float32" if stored.itemsize <= 2 else "float64")


def _shifted_dtype(stored: np.dtype[Any], bzero: Any) -> np.dtype[Any] | None:
    """``uint16`` for ``int16`` shifted by 2^15 (and so on), ``int8`` for bytes shifted by
    -128: the types astropy gives; None for any other offset."""
    bits = 8 * stored.itemsize
    if stored.kind == "u" and bzero == -128:
        return np.dtype("i1")
    if stored.kind == "i" and not isinstance(bzero, bool) and bzero == 2 ** (bits - 1):
        return np.dtype(f"<u{stored.itemsize}")
    return None


def dimension_order_names(ndim: int) -> list[str]:
    """Default dimension names in numpy order: ``[..., dim_3, z, y, x]``."""
    base = ["x", "y", "z"]
    names = [base[k] if k < 3 else f"dim_{k}" for k in range(ndim)]
    return names[::-1]
