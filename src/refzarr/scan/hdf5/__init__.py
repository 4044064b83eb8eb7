"""HDF5 and netCDF4 files: `Hdf5Scanner` (h5py for the chunk index, our own header parser for
the rest). Importing this package is light; the scanner imports h5py when first used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from refzarr.scan.base import ScanFormat
from refzarr.scan.hdf5.signature import is_hdf5

if TYPE_CHECKING:
    from refzarr.scan.hdf5.scanner import Hdf5Scanner

__all__ = ["FORMAT", "Hdf5Scanner"]

FORMAT = ScanFormat(
    name="hdf5",
    title="HDF5 / netCDF4",
    detect=is_hdf5,
    scanner="refzarr.scan.hdf5.scanner:Hdf5Scanner",
    options=("contiguous_chunk_bytes",),
)


def __getattr__(name: str) -> Any:
    if name == "Hdf5Scanner":
        from refzarr.scan.hdf5.scanner import Hdf5Scanner

        return Hdf5Scanner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
