"""netCDF's default fill values (``NC_FILL_*``): what netCDF-C reads where a variable holds
nothing written, shared by the scanners and the VirtualiZarr interop."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NETCDF_DEFAULT_FILLS", "netcdf_default_fill"]

NETCDF_DEFAULT_FILLS: dict[str, int | float] = {
    "i1": -127,
    "u1": 255,
    "i2": -32767,
    "u2": 65535,
    "i4": -2147483647,
    "u4": 4294967295,
    "i8": -9223372036854775806,
    "u8": 18446744073709551614,
    "f4": 9.9692099683868690e36,
    "f8": 9.9692099683868690e36,
}
"""netCDF's default fill values (``NC_FILL_*``) by numpy type code."""


def netcdf_default_fill(dtype: np.dtype[Any]) -> Any:
    """netCDF's default fill value for ``dtype`` (None: a type netCDF gives none to)."""
    if dtype.kind == "S":
        return dtype.type(b"")  # NC_FILL_CHAR is a NUL
    code = f"{dtype.kind}{dtype.itemsize}"
    if dtype.kind not in "iuf" or code not in NETCDF_DEFAULT_FILLS:
        return None
    return np.asarray(NETCDF_DEFAULT_FILLS[code]).astype(dtype)[()]
