"""netCDF3 files (CDF-1 classic, CDF-2 64-bit offset, CDF-5 64-bit data): `NetCDF3Scanner`,
our own header parser (no netCDF library at scan time). Importing this package is light."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from refzarr.scan.base import Probe, ScanFormat

if TYPE_CHECKING:
    from refzarr.scan.netcdf3.scanner import NetCDF3Scanner

__all__ = ["FORMAT", "NetCDF3Scanner", "is_netcdf3"]


def is_netcdf3(probe: Probe) -> bool:
    """Whether ``probe`` is a netCDF3 file: ``CDF`` then a version byte.

    Any version byte is accepted, so that an unknown version is reported by the scanner
    (which names the versions it reads) rather than as an unrecognised file.
    """
    return probe.read_at is not None and len(probe.head) >= 4 and probe.head[:3] == b"CDF"


FORMAT = ScanFormat(
    name="netcdf3",
    title="netCDF3 (classic, 64-bit offset, 64-bit data)",
    detect=is_netcdf3,
    scanner="refzarr.scan.netcdf3.scanner:NetCDF3Scanner",
    options=("chunk_bytes",),
)


def __getattr__(name: str) -> Any:
    if name == "NetCDF3Scanner":
        from refzarr.scan.netcdf3.scanner import NetCDF3Scanner

        return NetCDF3Scanner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
