"""GRIB editions 1 and 2: `GribScanner` (our own section-0 framing, ecCodes for the keys of
each field). Importing this package is light; the scanner loads ecCodes when first used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from refzarr.scan.base import Probe, ScanFormat

if TYPE_CHECKING:
    from refzarr.scan.grib.scanner import GribScanner

__all__ = ["FORMAT", "GribScanner", "is_grib"]


def is_grib(probe: Probe) -> bool:
    """Whether a file starts with a GRIB edition 1 or 2 message."""
    head = probe.head
    return not probe.is_directory and head[:4] == b"GRIB" and head[7:8] in (b"\x01", b"\x02")


FORMAT = ScanFormat(
    name="grib",
    title="GRIB 1 / 2",
    detect=is_grib,
    scanner="refzarr.scan.grib.scanner:GribScanner",
    extra="grib",
    # no ``requires``: checking it imports ecCodes, which must be loaded after pyproj and only
    # when a GRIB file is scanned (see refzarr.codecs.grib_eccodes); the scanner raises
    # MissingDependencyError naming refzarr[grib] itself
    requires=(),
)


def __getattr__(name: str) -> Any:
    if name == "GribScanner":
        from refzarr.scan.grib.scanner import GribScanner

        return GribScanner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
