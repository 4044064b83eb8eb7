"""FITS files: `FitsScanner` (astropy for headers and data offsets; one array per HDU with
data). Importing this package is light; the scanner imports astropy when first used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from refzarr.scan.base import Probe, ScanFormat

if TYPE_CHECKING:
    from refzarr.scan.fits.scanner import FitsScanner

__all__ = ["FORMAT", "FitsScanner", "is_fits"]


def is_fits(probe: Probe) -> bool:
    """Whether a file starts as FITS does: a ``SIMPLE`` card whose value is ``T``."""
    head = probe.head
    return head[:9] == b"SIMPLE  =" and head[10:30].strip() == b"T"


FORMAT = ScanFormat(
    name="fits",
    title="FITS",
    detect=is_fits,
    scanner="refzarr.scan.fits.scanner:FitsScanner",
    options=("chunk_bytes", "inline_decoded", "stack_extensions"),
    extra="fits",
    requires=("astropy",),
)


def __getattr__(name: str) -> Any:
    if name == "FitsScanner":
        from refzarr.scan.fits.scanner import FitsScanner

        return FitsScanner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
