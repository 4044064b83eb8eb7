"""TIFF, GeoTIFF, COG and BigTIFF files: `TiffScanner` (tifffile for tags and segment offsets,
imagecodecs for the codecs). Importing this package is light; the scanner imports tifffile
when first used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from refzarr.scan.base import Probe, ScanFormat

if TYPE_CHECKING:
    from refzarr.scan.tiff.scanner import TiffScanner

__all__ = ["FORMAT", "TiffScanner", "is_tiff"]

_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")
"""Classic TIFF and BigTIFF headers, little- and big-endian."""


def is_tiff(probe: Probe) -> bool:
    """Whether a file starts with a TIFF or BigTIFF header."""
    return probe.head.startswith(_MAGIC)


FORMAT = ScanFormat(
    name="tiff",
    title="TIFF / GeoTIFF / COG / BigTIFF",
    detect=is_tiff,
    scanner="refzarr.scan.tiff.scanner:TiffScanner",
    extra="tiff",
    requires=("tifffile", "imagecodecs"),
)


def __getattr__(name: str) -> Any:
    if name == "TiffScanner":
        from refzarr.scan.tiff.scanner import TiffScanner

        return TiffScanner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
