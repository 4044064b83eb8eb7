"""GeoTIFF georeferencing as rioxarray shows it: the affine transformation (GDAL's
GeoTransform) from the tie point and pixel scale or the transformation matrix, 1-D pixel-centre
``x`` / ``y`` coordinates when it is not rotated, and the ``spatial_ref`` variable's
attributes (``crs_wkt`` through pyproj when installed, ``GeoTransform``, ``gcps``).

pyproj is optional: without it ``spatial_ref`` has no ``crs_wkt`` (nor the CF grid-mapping
attributes), but keeps the EPSG code GeoKeys name as ``crs_epsg`` whenever there is one.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Georeference", "georeference"]

_PIXEL_SCALE, _TIEPOINT, _TRANSFORMATION, _GEOKEYS = 33550, 33922, 34264, 34735
_USER_DEFINED = 32767
_PIXEL_IS_POINT = 2


@dataclass(frozen=True, slots=True)
class Georeference:
    """A page's georeferencing: GDAL geotransform (None for GCPs only), the ``spatial_ref``
    attributes, and whether the raster is PixelIsPoint."""

    transform: tuple[float, ...] | None
    spatial_ref: dict[str, Any]
    point: bool

    def at_level(self, height: int, width: int, full: tuple[int, int]) -> Georeference:
        """The georeferencing of a reduced-resolution level of ``height`` x ``width`` pixels of
        an image of ``full`` (height, width): pixels ``full / level`` times as large."""
        if self.transform is None:
            return self
        a, b, c, d, e, f = _affine(self.transform)
        sx, sy = full[1] / width, full[0] / height
        transform = (c, a * sx, b * sy, f, d * sx, e * sy)
        return Georeference(transform, _with_transform(self.spatial_ref, transform), self.point)

    def coordinates(
        self, height: int, width: int
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None:
        """Pixel-centre ``(y, x)`` of an unrotated transformation (as rioxarray computes them),
        else None."""
        if self.transform is None:
            return None
        a, b, c, d, e, f = _affine(self.transform)
        if b != 0 or d != 0:
            return None
        c2 = a * 0.5 + b * 0.5 + c
        f2 = d * 0.5 + e * 0.5 + f
        cols, rows = np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64)
        x = cols * a + np.zeros(width) * b + c2
        y = np.zeros(height) * d + rows * e + f2
        return y, x


def georeference(page: Any) -> Georeference | None:
    """The georeferencing of a page's tags, or None when it has none."""
    tags = page.tags
    transform = _transform(tags)
    gcps = None
    if transform is None:
        gcps = _gcps(tags)
        if gcps is None:
            return None
    keys = _geokeys(page) if _GEOKEYS in tags else {}
    point = keys.get("GTRasterTypeGeoKey") == _PIXEL_IS_POINT
    if point and transform is not None:
        gt = list(transform)
        gt[0] -= gt[1] * 0.5 + gt[2] * 0.5
        gt[3] -= gt[4] * 0.5 + gt[5] * 0.5
        transform = tuple(gt)
    attrs = _crs_attributes(keys)
    if gcps is not None:
        attrs["gcps"] = gcps
    elif transform is not None:
        attrs = _with_transform(attrs, transform)
    return Georeference(transform, attrs, point)


def _transform(tags: Any) -> tuple[float, ...] | None:
    if _TRANSFORMATION in tags:
        m = [float(v) for v in tags[_TRANSFORMATION].value]
        if len(m) >= 8:
            return (m[3], m[0], m[1], m[7], m[4], m[5])
    if _PIXEL_SCALE in tags and _TIEPOINT in tags:
        scale = [float(v) for v in tags[_PIXEL_SCALE].value]
        tie = [float(v) for v in tags[_TIEPOINT].value]
        if len(scale) >= 2 and len(tie) >= 6:
            i, j, x, y = tie[0], tie[1], tie[3], tie[4]
            return (x - i * scale[0], scale[0], 0.0, y + j * scale[1], 0.0, -scale[1])
    return None


def _gcps(tags: Any) -> str | None:
    """Tie points without a pixel scale as rioxarray's GeoJSON ``gcps`` (ids from 1)."""
    if _TIEPOINT not in tags:
        return None
    tie = [float(v) for v in tags[_TIEPOINT].value]
    if len(tie) < 6:
        return None
    features = []
    for k in range(len(tie) // 6):
        col, row, _, x, y, z = tie[6 * k : 6 * k + 6]
        features.append(
            {
                "type": "Feature",
                "properties": {"id": str(k + 1), "info": "", "row": row, "col": col},
                "geometry": {"type": "Point", "coordinates": [x, y, z]},
            }
        )
    return json.dumps({"type": "FeatureCollection", "features": features})


def _geokeys(page: Any) -> dict[str, Any]:
    try:
        return _decode_geokeys(page)
    except (KeyError, ValueError, TypeError, IndexError):
        return {}


def _decode_geokeys(page: Any) -> dict[str, Any]:
    """GeoKey name -> value, as tifffile decodes them."""
    values = page.geotiff_tags
    return {k: (int(v) if hasattr(v, "value") else v) for k, v in values.items()}


def _epsg(keys: dict[str, Any]) -> int | None:
    for name in ("ProjectedCSTypeGeoKey", "GeographicTypeGeoKey"):
        code = keys.get(name)
        if isinstance(code, int) and 0 < code != _USER_DEFINED:
            return code
    return None


def _crs_attributes(keys: dict[str, Any]) -> dict[str, Any]:
    """``crs_wkt`` and the CF grid-mapping attributes rioxarray writes, from the EPSG code
    the GeoKeys name (pyproj needed); ``crs_epsg`` without pyproj."""
    code = _epsg(keys)
    if code is None:
        return {}
    return dict(_epsg_attributes(code))


@functools.lru_cache(maxsize=64)
def _epsg_attributes(code: int) -> tuple[tuple[str, Any], ...]:
    """`_crs_attributes` of an EPSG code, made once per process (pyproj takes ~20 ms)."""
    return tuple(_build_epsg_attributes(code).items())


def _build_epsg_attributes(code: int) -> dict[str, Any]:
    try:
        from pyproj import CRS
        from pyproj.exceptions import CRSError
    except ImportError:
        return {"crs_epsg": code}
    try:
        crs = CRS.from_epsg(code)
    except CRSError:
        return {"crs_epsg": code}
    wkt = crs.to_wkt("WKT1_GDAL")
    attrs: dict[str, Any] = {"crs_wkt": wkt}
    attrs.update({k: v for k, v in crs.to_cf().items() if k != "crs_wkt"})
    attrs["spatial_ref"] = wkt
    return attrs


def _with_transform(attrs: dict[str, Any], transform: tuple[float, ...]) -> dict[str, Any]:
    out = dict(attrs)
    out["GeoTransform"] = " ".join(str(float(v)) for v in transform)
    return out


def _affine(gt: tuple[float, ...]) -> tuple[float, float, float, float, float, float]:
    """GDAL's (c, a, b, f, d, e) as the affine's (a, b, c, d, e, f)."""
    return gt[1], gt[2], gt[0], gt[4], gt[5], gt[3]
