"""DMR++ sidecars (OPeNDAP's XML index of the chunks of an HDF5 / netCDF4 file): `DmrppScanner`
references the data file's chunks from the sidecar alone. Importing this package is light."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from refzarr.scan.base import Probe, ScanFormat

if TYPE_CHECKING:
    from refzarr.scan.dmrpp.scanner import DmrppScanner

__all__ = ["DMRPP_NAMESPACE", "FORMAT", "DmrppScanner", "is_dmrpp"]

DMRPP_NAMESPACE = b"http://xml.opendap.org/dap/dmrpp/1.0.0#"
"""The namespace every DMR++ document declares (on its ``Dataset`` element)."""

_BOMS = (b"\xef\xbb\xbf",)


def is_dmrpp(probe: Probe) -> bool:
    """Whether ``probe`` is an XML document (``<?xml`` or ``<Dataset`` first) that declares the
    DMR++ namespace within its first bytes."""
    head = probe.head
    for bom in _BOMS:
        head = head.removeprefix(bom)
    start = head.lstrip()
    if not start.startswith((b"<?xml", b"<Dataset")):
        return False
    return DMRPP_NAMESPACE in head


FORMAT = ScanFormat(
    name="dmrpp",
    title="DMR++ sidecar",
    detect=is_dmrpp,
    scanner="refzarr.scan.dmrpp.scanner:DmrppScanner",
    options=("data_url", "check_data_file", "multi_block_bytes"),
)


def __getattr__(name: str) -> Any:
    if name == "DmrppScanner":
        from refzarr.scan.dmrpp.scanner import DmrppScanner

        return DmrppScanner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
