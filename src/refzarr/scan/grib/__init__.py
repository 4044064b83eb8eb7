"""GRIB editions 1 and 2: `GribScanner` (our own section-0 framing, ecCodes for the keys of
each field). Importing this package is light; the scanner loads ecCodes when first used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from refzarr.scan.base import Probe, ScanFormat

if TYPE_CHECKING:
    from refzarr.scan.grib.index import build_many, scan_indexed
    from refzarr.scan.grib.scanner import GribScanner

__all__ = ["FORMAT", "GribScanner", "build_many", "is_grib", "scan_indexed"]


SEARCH_BYTES = 1 << 16
"""How far into a file detection looks for its first message (some files open with a header
of their own: 12,000 bytes in a Meteo-France ECOCLIMAP file)."""


def is_grib(probe: Probe) -> bool:
    """Whether a file holds a GRIB edition 1 or 2 message within its first `SEARCH_BYTES`
    (one that ends with ``7777`` where its length says, when it does not start the file)."""
    if probe.read_at is None:
        return False
    head = probe.head
    if head[:4] == b"GRIB" and head[7:8] in (b"\x01", b"\x02"):
        return True
    if len(head) < 4096:
        return False
    more = head + probe.read_at(len(head), SEARCH_BYTES - len(head))
    start = more.find(b"GRIB")
    while start >= 0:
        if _ends_with_marker(probe, more, start):
            return True
        start = more.find(b"GRIB", start + 1)
    return False


def _ends_with_marker(probe: Probe, data: bytes, start: int) -> bool:
    header = data[start : start + 16]
    if len(header) < 16 or header[7] not in (1, 2) or probe.read_at is None:
        return False
    length = int.from_bytes(header[4:7] if header[7] == 1 else header[8:16], "big")
    return length > 16 and probe.read_at(start + length - 4, 4) == b"7777"


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
    options=("grib_index",),
    many="refzarr.scan.grib.index:build_many",
)


def __getattr__(name: str) -> Any:
    if name == "GribScanner":
        from refzarr.scan.grib.scanner import GribScanner

        return GribScanner
    if name in ("scan_indexed", "build_many"):
        from refzarr.scan.grib import index

        return getattr(index, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
