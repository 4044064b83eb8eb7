"""The GCTP projection of an HDF-EOS2 grid as CF grid-mapping attributes, and as WKT through
pyproj when installed: the ``spatial_ref`` rioxarray and GDAL users expect.

``StructMetadata.0`` gives each grid a GCTP projection code, ``ProjParams`` (13 or 15 numbers,
angles in packed ``DDDMMMSSS.SS``), a ``SphereCode`` and, for UTM, a ``ZoneCode``. The meaning
of each parameter follows the GCTP table (HDF-EOS User's Guide, chapter 6): 0 ``SMajor`` (or
the sphere radius), 1 ``SMinor`` (semi-minor axis, or eccentricity squared when at most 1),
2 and 3 standard parallels (2 is the scale factor of Transverse Mercator), 4 the central
meridian (the longitude below the pole for polar stereographic), 5 the latitude of origin (of
true scale for Mercator and polar stereographic), 6 and 7 false easting and northing.

Only what reads one way is given a CRS: the projections below, on a sphere or ellipsoid that
GCTP and GDAL agree on. Anything else gets none (`grid_mapping` returns None), never a guess.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

__all__ = ["SUPPORTED", "crs_attributes", "grid_mapping", "packed_degrees"]

Params = tuple[float, ...]
Build = Callable[[Params, int | None], dict[str, Any] | None]

CLARKE_1866 = (6378206.4, 6356583.8)
GCTP_SPHERE = 6370997.0
"""GCTP's sphere when a grid gives neither radius nor spheroid."""

SPHEROIDS: dict[int, tuple[float, float]] = {
    0: CLARKE_1866,
    1: (6378249.145, 6356514.86955),  # Clarke 1880
    2: (6377397.155, 6356078.96284),  # Bessel
    3: (6378157.5, 6356772.2),  # International 1967
    4: (6378388.0, 6356911.94613),  # International 1909
    5: (6378135.0, 6356750.519915),  # WGS 72
    6: (6377276.3452, 6356075.4133),  # Everest
    7: (6378145.0, 6356759.769356),  # WGS 66
    8: (6378137.0, 6356752.31414),  # GRS 1980
    9: (6377563.396, 6356256.91),  # Airy
    10: (6377304.063, 6356103.039),  # Modified Everest
    11: (6377340.189, 6356034.448),  # Modified Airy
    12: (6378137.0, 6356752.314245),  # WGS 84
    13: (6378155.0, 6356773.3205),  # Southeast Asia
    14: (6378160.0, 6356774.719),  # Australian National
    15: (6378245.0, 6356863.0188),  # Krassovsky
    16: (6378270.0, 6356794.343479),  # Hough
    17: (6378166.0, 6356784.283666),  # Mercury 1960
    18: (6378150.0, 6356768.337303),  # Modified Mercury 1968
    19: (GCTP_SPHERE, GCTP_SPHERE),
    20: (6371228.0, 6371228.0),  # HDF-EOS's sphere of EASE-Grid
    21: (6371007.181, 6371007.181),  # HDF-EOS's sphere of the MODIS grids
}
"""GCTP spheroid codes as HDF-EOS2 defines them: (semi-major, semi-minor axis), metres.
Codes from 20 on differ between GCTP versions (GDAL reads 20 as Bessel Namibia); 20 and 21
are HDF-EOS's spheres, later codes are not read."""

_SPHERE_CODES = (19, 20, 21)
_SPHERE_ONLY = ("GCTP_SNSOID", "GCTP_LAMAZ")
"""Projections GCTP computes on a sphere only (its radius: ``SMajor``, or a sphere code)."""


def packed_degrees(value: float) -> float:
    """Decimal degrees of a GCTP packed ``DDDMMMSSS.SS`` angle."""
    sign = -1.0 if value < 0 else 1.0
    value = abs(value)
    degrees = int(value // 1_000_000)
    minutes = int((value - degrees * 1_000_000) // 1_000)
    seconds = value - degrees * 1_000_000 - minutes * 1_000
    return sign * (degrees + minutes / 60 + seconds / 3600)


def _axes_from_params(p0: float, p1: float) -> tuple[float, float] | None:
    """GCTP's spheroid of a grid without a sphere code: from ``SMajor`` / ``SMinor``."""
    major, minor = abs(p0), abs(p1)
    if major > 0:
        if minor > 1:
            return (major, minor) if minor <= major else None
        if minor == 1:  # an eccentricity of 1: no ellipsoid
            return None
        if minor > 0:  # eccentricity squared
            return major, math.sqrt(1.0 - minor) * major
        return major, major
    return CLARKE_1866 if minor > 0 else (GCTP_SPHERE, GCTP_SPHERE)


def _spheroid(projection: str, code: int, params: Params) -> tuple[float, float] | None:
    """(semi-major, semi-minor) the grid's projection is computed on, or None when GCTP and
    GDAL would read it differently."""
    if projection in _SPHERE_ONLY:
        # GCTP uses a sphere whatever the code says; GDAL uses the ellipsoid: agree on spheres
        if code >= 0:
            return SPHEROIDS[code] if code in _SPHERE_CODES else None
        return _axes_from_params(params[0], 0.0) if params[1] == 0 else None
    if projection == "GCTP_UTM" and code < 0:
        # parameters 0 and 1 of UTM are a longitude and latitude, not axes
        return (GCTP_SPHERE, GCTP_SPHERE) if params[0] == params[1] == 0 else None
    if code < 0:
        return _axes_from_params(params[0], params[1])
    return SPHEROIDS.get(code)


def _earth(axes: tuple[float, float]) -> dict[str, Any]:
    major, minor = axes
    if major == minor:
        return {"earth_radius": major}
    return {"semi_major_axis": major, "semi_minor_axis": minor}


def _false_origin(params: Params) -> dict[str, Any]:
    return {"false_easting": params[6], "false_northing": params[7]}


def _sinusoidal(params: Params, zone: int | None) -> dict[str, Any] | None:
    return {
        "grid_mapping_name": "sinusoidal",
        "longitude_of_projection_origin": packed_degrees(params[4]),
        **_false_origin(params),
    }


def _geographic(params: Params, zone: int | None) -> dict[str, Any] | None:
    return {"grid_mapping_name": "latitude_longitude"}


def _polar_stereographic(params: Params, zone: int | None) -> dict[str, Any] | None:
    true_scale = packed_degrees(params[5])
    return {
        "grid_mapping_name": "polar_stereographic",
        "straight_vertical_longitude_from_pole": packed_degrees(params[4]),
        # GCTP: the sign of the latitude of true scale chooses the pole
        "latitude_of_projection_origin": -90.0 if true_scale < 0 else 90.0,
        "standard_parallel": true_scale,
        **_false_origin(params),
    }


def _utm(params: Params, zone: int | None) -> dict[str, Any] | None:
    if not zone:  # GCTP: the zone of the point (longitude, latitude) parameters 0 and 1 give
        lon, lat = packed_degrees(params[0]), packed_degrees(params[1])
        if lon == lat == 0:
            return None
        zone = min(int((lon + 180.0) // 6.0) + 1, 60) * (-1 if lat < 0 else 1)
    if not 1 <= abs(zone) <= 60:
        return None
    return {
        "grid_mapping_name": "transverse_mercator",
        "longitude_of_central_meridian": abs(zone) * 6.0 - 183.0,
        "latitude_of_projection_origin": 0.0,
        "scale_factor_at_central_meridian": 0.9996,
        "false_easting": 500_000.0,
        "false_northing": 10_000_000.0 if zone < 0 else 0.0,
    }


def _transverse_mercator(params: Params, zone: int | None) -> dict[str, Any] | None:
    if params[2] <= 0:
        return None
    return {
        "grid_mapping_name": "transverse_mercator",
        "longitude_of_central_meridian": packed_degrees(params[4]),
        "latitude_of_projection_origin": packed_degrees(params[5]),
        "scale_factor_at_central_meridian": params[2],
        **_false_origin(params),
    }


def _lambert_azimuthal(params: Params, zone: int | None) -> dict[str, Any] | None:
    return {
        "grid_mapping_name": "lambert_azimuthal_equal_area",
        "longitude_of_projection_origin": packed_degrees(params[4]),
        "latitude_of_projection_origin": packed_degrees(params[5]),
        **_false_origin(params),
    }


def _conic(name: str) -> Build:
    def build(params: Params, zone: int | None) -> dict[str, Any] | None:
        return {
            "grid_mapping_name": name,
            "standard_parallel": [packed_degrees(params[2]), packed_degrees(params[3])],
            "longitude_of_central_meridian": packed_degrees(params[4]),
            "latitude_of_projection_origin": packed_degrees(params[5]),
            **_false_origin(params),
        }

    return build


def _mercator(params: Params, zone: int | None) -> dict[str, Any] | None:
    return {
        "grid_mapping_name": "mercator",
        "longitude_of_projection_origin": packed_degrees(params[4]),
        "standard_parallel": packed_degrees(params[5]),
        **_false_origin(params),
    }


_PROJECTIONS: dict[str, Build] = {
    "GCTP_SNSOID": _sinusoidal,
    "GCTP_GEO": _geographic,
    "GCTP_PS": _polar_stereographic,
    "GCTP_UTM": _utm,
    "GCTP_TM": _transverse_mercator,
    "GCTP_LAMAZ": _lambert_azimuthal,
    "GCTP_ALBERS": _conic("albers_conical_equal_area"),
    "GCTP_LAMCC": _conic("lambert_conformal_conic"),
    "GCTP_MERCAT": _mercator,
}
"""The projections refzarr expresses, as CF grid-mapping attributes of their parameters."""

SUPPORTED = tuple(_PROJECTIONS)


def grid_mapping(
    projection: str, params: tuple[float, ...], sphere_code: int | None, zone: int | None
) -> dict[str, Any] | None:
    """CF grid-mapping attributes of a GCTP projection (no pyproj needed), or None when
    refzarr cannot express it without guessing.

    Parameters
    ----------
    projection
        The ``Projection`` of ``StructMetadata.0`` (``GCTP_SNSOID``, ...).
    params
        ``ProjParams`` (padded with zeros to 15 values).
    sphere_code
        ``SphereCode``; None when the grid gives none (usual for ``GCTP_GEO``): HDF-EOS's
        default 0, Clarke 1866, which is what GDAL reports.
    zone
        ``ZoneCode`` (UTM only; negative for the southern hemisphere).
    """
    build = _PROJECTIONS.get(projection)
    if projection == "GCTP_GEO" and not params:  # GEO has no parameters to give
        params = (0.0,) * 15
    if build is None or len(params) < 8 or not all(math.isfinite(v) for v in params):
        return None
    axes = _spheroid(projection, 0 if sphere_code is None else sphere_code, params)
    attrs = build(params, zone)
    if axes is None or attrs is None:
        return None
    attrs.update(_earth(axes))
    return attrs


def crs_attributes(cf: dict[str, Any]) -> dict[str, Any]:
    """The ``spatial_ref`` attributes of CF grid-mapping attributes: ``crs_wkt`` (WKT1 as
    GDAL writes it) and rioxarray's ``spatial_ref`` when pyproj is installed, then the CF
    attributes themselves (enough for ``pyproj.CRS.from_cf`` later)."""
    key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in cf.items())
    wkt = _wkt(key)
    if wkt is None:
        return dict(cf)
    return {"crs_wkt": wkt, **cf, "spatial_ref": wkt}


_PROJ = {
    "sinusoidal": "sinu",
    "latitude_longitude": "longlat",
    "polar_stereographic": "stere",
    "transverse_mercator": "tmerc",
    "lambert_azimuthal_equal_area": "laea",
    "albers_conical_equal_area": "aea",
    "lambert_conformal_conic": "lcc",
    "mercator": "merc",
}
_PROJ_PARAMS = {
    "longitude_of_projection_origin": "lon_0",
    "longitude_of_central_meridian": "lon_0",
    "straight_vertical_longitude_from_pole": "lon_0",
    "latitude_of_projection_origin": "lat_0",
    "scale_factor_at_central_meridian": "k_0",
    "false_easting": "x_0",
    "false_northing": "y_0",
    "earth_radius": "R",
    "semi_major_axis": "a",
    "semi_minor_axis": "b",
}


def _proj_string(cf: dict[str, Any]) -> str:
    """The PROJ string of our CF attributes (pyproj builds a CRS from it in a millisecond;
    ``CRS.from_cf`` takes a second, looking names up in PROJ's database)."""
    name = cf["grid_mapping_name"]
    words = [f"+proj={_PROJ[name]}"]
    for key, value in cf.items():
        if key in _PROJ_PARAMS:
            words.append(f"+{_PROJ_PARAMS[key]}={value!r}")
        elif key == "standard_parallel" and isinstance(value, list | tuple):
            words += [f"+lat_1={value[0]!r}", f"+lat_2={value[1]!r}"]
        elif key == "standard_parallel":
            words.append(f"+lat_ts={value!r}")
    if name != "latitude_longitude":
        words.append("+units=m")
    return " ".join([*words, "+no_defs", "+type=crs"])


@functools.lru_cache(maxsize=64)
def _wkt(key: tuple[tuple[str, Any], ...]) -> str | None:
    """The WKT (GDAL's WKT 1) of CF attributes, made once per process, or None without
    pyproj. Names are PROJ's "unknown": GCTP gives an ellipsoid and no datum (GDAL says "Not
    specified (based on ... spheroid)"), and PROJ compares "unknown" equal to any name."""
    try:
        from pyproj import CRS
        from pyproj.exceptions import CRSError
    except ImportError:
        return None
    cf = {k: list(v) if isinstance(v, tuple) else v for k, v in key}
    try:
        return str(CRS.from_proj4(_proj_string(cf)).to_wkt("WKT1_GDAL"))
    except CRSError:
        return None
