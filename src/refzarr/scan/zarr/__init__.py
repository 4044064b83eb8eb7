"""Zarr v2 and v3 stores as input: `ZarrScanner` (zarr-python parses the metadata; one listing
of the store gives every chunk's key and size). Importing this package is light; the scanner
imports zarr when first used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from refzarr.scan.base import Probe, ScanFormat

if TYPE_CHECKING:
    from refzarr.scan.zarr.scanner import ZarrScanner

__all__ = ["FORMAT", "METADATA_KEYS", "ZarrScanner", "is_zarr_store"]

METADATA_KEYS = frozenset({".zgroup", ".zarray", ".zmetadata", "zarr.json"})
"""Entries whose presence makes a directory the root of a Zarr store (v2 or v3)."""


def is_zarr_store(probe: Probe) -> bool:
    """Whether ``probe`` is a directory holding Zarr metadata at its top level."""
    return probe.is_directory and not METADATA_KEYS.isdisjoint(probe.listing)


FORMAT = ScanFormat(
    name="zarr",
    title="Zarr v2 / v3 store",
    detect=is_zarr_store,
    scanner="refzarr.scan.zarr.scanner:ZarrScanner",
)


def __getattr__(name: str) -> Any:
    if name == "ZarrScanner":
        from refzarr.scan.zarr.scanner import ZarrScanner

        return ZarrScanner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
