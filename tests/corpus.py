"""The real-file corpus the tests read in place: ``../shared/corpus/files/<format>/``."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CORPUS", "ONE_PER_FORMAT", "corpus_files"]

CORPUS = (Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus" / "files").resolve()
"""The corpus folder: one subfolder per format (``hdf5``, ``netcdf3``, ``tiff``, ...)."""

ONE_PER_FORMAT = {
    "netcdf3": CORPUS / "netcdf3" / "example_1.nc",
    "hdf5": CORPUS / "dmrpp" / "d_int.h5",
    "tiff": CORPUS / "tiff" / "cogeo.tif",
    "grib": CORPUS / "grib" / "spherical_harmonics.grib",
    "hdf4": CORPUS / "hdf4" / "MOD14.hdf4",
    "fits": CORPUS / "fits" / "m13.fits",
    "dmrpp": CORPUS / "dmrpp" / "d_int.h5.dmrpp",
    "zarr": CORPUS / "zarr" / "zarrita_v2.zarr",
}
"""A small corpus file (a store for Zarr) of every format refzarr scans, by format name."""


def corpus_files(folder: str, *suffixes: str) -> list[Path]:
    """The files (and, for stores, directories) directly in ``CORPUS/folder``, sorted; only
    those whose name ends with one of ``suffixes`` when any are given. Empty when the
    corpus is absent."""
    where = CORPUS / folder
    if not where.is_dir():
        return []
    return sorted(p for p in where.iterdir() if not suffixes or p.name.endswith(suffixes))
