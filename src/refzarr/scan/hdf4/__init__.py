"""HDF4 files (SD interface, Vdata, GR images, HDF-EOS2): `Hdf4Scanner`, our own reader of
HDF4's data descriptor blocks (no HDF4 library needed). Importing this package is light."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from refzarr.scan.base import Probe, ScanFormat

if TYPE_CHECKING:
    from refzarr.scan.hdf4.scanner import Hdf4Scanner

__all__ = ["FORMAT", "MAGIC", "Hdf4Scanner", "is_hdf4"]

MAGIC = b"\x0e\x03\x13\x01"
"""The first four bytes of every HDF4 file."""


def is_hdf4(probe: Probe) -> bool:
    """Whether a source starts with HDF4's magic number."""
    return probe.head.startswith(MAGIC)


FORMAT = ScanFormat(
    name="hdf4",
    title="HDF4 / HDF-EOS2",
    detect=is_hdf4,
    scanner="refzarr.scan.hdf4.scanner:Hdf4Scanner",
    options=("eos_coordinates",),
)


def __getattr__(name: str) -> Any:
    if name == "Hdf4Scanner":
        from refzarr.scan.hdf4.scanner import Hdf4Scanner

        return Hdf4Scanner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
