"""Scanning: one source file -> a `RefGroup` of every array it holds, format detected."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from refzarr.model import RefGroup
from refzarr.scan.result import ScannedGroup, Skipped

__all__ = ["ScannedGroup", "Skipped", "scan"]


def scan(url: str, *, storage_options: Mapping[str, Any] | None = None, **options: Any) -> RefGroup:
    """Reference every array of one file, as a virtual Zarr hierarchy.

    Parameters
    ----------
    url
        A local path (str or path object) or an fsspec URL (``s3://bucket/file.nc``,
        ``memory://x.h5``, ...).
    storage_options
        Options for the fsspec filesystem of ``url``.
    **options
        Options of the format's scanner; for HDF5 / netCDF4 see `Hdf5Scanner`
        (``inline_threshold``, ``on_unsupported``).

    Returns
    -------
    RefGroup
        A `ScannedGroup`: also lists, in ``skipped``, what ``on_unsupported="skip"`` left out.

    Raises
    ------
    UnsupportedFeatureError
        When the file's format, or a feature it uses, cannot be referenced.
    SourceNotFoundError
        When the file does not exist.
    ScanError
        When the file is corrupt or not what its signature says.
    """
    url = os.fspath(url)
    # HDF5 is the only format so far: its scanner detects the format (`identify`) on the file
    # object it opens anyway, so a remote file costs no extra request for detection. With a
    # second format, open once here, identify, and hand the open file to that format's scanner.
    from refzarr.scan.hdf5 import Hdf5Scanner

    known = {f.name for f in dataclasses.fields(Hdf5Scanner)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(
            f"scan() got unknown options {unknown} for HDF5; the options are {sorted(known)}"
        )
    return Hdf5Scanner(**options)(url, storage_options)
