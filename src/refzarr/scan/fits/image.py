"""Image HDUs (primary and ``IMAGE`` extensions): big-endian arrays as stored, chunked along
the slowest axis, scaled by CF attributes or by the unsigned codec."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from astropy.io import fits

from refzarr.codecs.fits import FitsUnsigned
from refzarr.model import ArrayMeta, RefArray
from refzarr.scan.fits.context import HduScan
from refzarr.scan.fits.header import (
    dimension_order_names,
    header_attributes,
    image_scaling,
    stored_dtype,
)

__all__ = ["image_array", "image_shape", "scaled_array_meta"]


def image_shape(header: fits.Header, prefix: str = "") -> tuple[int, ...]:
    """The image's shape in numpy order (``NAXISn`` ... ``NAXIS1``)."""
    naxis = int(header.get(f"{prefix}NAXIS", 0))
    return tuple(int(header[f"{prefix}NAXIS{k}"]) for k in range(naxis, 0, -1))


def image_array(scan: HduScan, index: int, hdu: Any, name: str, where: str) -> RefArray | None:
    """The image of an HDU, or None when it has no data (``NAXIS`` 0 or a length 0)."""
    header = hdu.header
    stored = stored_dtype(header, where)
    shape = image_shape(header)
    if not shape or 0 in shape:
        return None
    offset = scan.data_location(index, math.prod(shape) * stored.itemsize, where)
    chunks, manifest = scan.contiguous(offset, shape, stored.itemsize)
    meta = scaled_array_meta(scan, header, stored, shape, chunks, name, index)
    return RefArray(meta, manifest)


def scaled_array_meta(
    scan: HduScan,
    header: fits.Header,
    stored: np.dtype[Any],
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    name: str,
    index: int,
    codecs: tuple[dict[str, Any], ...] = (),
) -> ArrayMeta:
    """An image's metadata: its header as attributes, ``BSCALE``/``BZERO``/``BLANK`` as CF
    attributes or the unsigned codec after ``codecs`` (those giving ``stored`` values)."""
    scaling = image_scaling(header, stored)
    dtype = stored
    if scaling.unsigned is not None:
        dtype = scaling.unsigned
        codecs = (FitsUnsigned(stored.str, dtype.str).get_config(), *codecs)
    attrs = header_attributes(header)
    attrs.update(scaling.attributes)
    # BLANK, when astropy masks it: the Zarr fill value, and _FillValue for refzarr's engine
    # (which masks by _FillValue only where _nczarr_attr records types)
    fill = attrs.get("_FillValue")
    attrs["fits_hdu"] = index
    return ArrayMeta(
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        fill_value=fill,
        codecs=codecs,
        attributes=attrs,
        dimension_names=scan.dims.names(dimension_order_names(len(shape)), shape, name),
    )
