"""Files an HDF5 file points to (external raw data files, external links), found by name.

HDF5 resolves a relative name against a prefix given at run time (``H5Pset_efile_prefix``,
``H5Pset_elink_prefix``) or else the current directory. A reference set must not depend on
where it was built, so refzarr looks first next to the HDF5 file (the directory of a local
file, the "directory" of a URL: where files shipped together are), then, for local files only,
in the current directory; the first that exists is referenced by its absolute path or URL.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any

import h5py
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.scan.hdf5.contiguous import Segment
from refzarr.scan.paths import opened_path

__all__ = ["candidates", "external_segments", "find_sibling"]

UNLIMITED = 2**64 - 1
"""``H5F_UNLIMITED``: the size of an external segment that runs to the end of its file."""


def candidates(base_url: str, name: str, local: bool) -> list[str]:
    """Where a file named ``name`` by the file at ``base_url`` may be, in lookup order."""
    if local:
        if os.path.isabs(name):
            return [opened_path(name)]
        found = [os.path.join(os.path.dirname(base_url), name), name]
        return list(dict.fromkeys(opened_path(p) for p in found))
    if name.startswith("/") or "://" in name:
        return [] if name.startswith("/") else [name]
    protocol, sep, path = base_url.rpartition("://")
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), name))
    return [f"{protocol}{sep}{joined}"]


def find_sibling(fs: AbstractFileSystem, base_url: str, name: str, what: str) -> str:
    """The URL of the file ``name`` refers to; `UnsupportedFeatureError` naming ``what``."""
    places = candidates(base_url, name, isinstance(fs, LocalFileSystem))
    for place in places:
        if fs.exists(place):
            return place
    looked = ", ".join(repr(p) for p in places) or "nowhere (an absolute path in a remote file)"
    raise UnsupportedFeatureError(f"{what}: file {name!r} not found; looked at {looked}")


def external_segments(
    ds: h5py.Dataset, nbytes: int, fs: AbstractFileSystem, base_url: str, where: str
) -> list[Segment]:
    """The segments of external raw data files holding the ``nbytes`` of a dataset, in order.

    Raises `UnsupportedFeatureError` when a file is missing or shorter than its segment
    (HDF5 reads zeros past its end; a reference would fail).
    """
    dcpl = ds.id.get_create_plist()
    segments: list[Segment] = []
    remaining = nbytes
    for index in range(dcpl.get_external_count()):
        if remaining == 0:
            break
        raw_name, offset, size = dcpl.get_external(index)
        name = os.fsdecode(raw_name)
        what = f"{where}: external raw data file {index}"
        url = find_sibling(fs, base_url, name, what)
        used = min(remaining, size if size != UNLIMITED else remaining)
        _check_size(fs, url, int(offset) + used, what)
        segments.append(Segment(url, int(offset), used))
        remaining -= used
    if remaining:
        raise ScanError(
            f"{where}: external raw data files hold {nbytes - remaining} of its {nbytes} bytes"
        )
    return segments


def _check_size(fs: AbstractFileSystem, url: str, needed: int, what: str) -> None:
    size: Any = fs.size(url)
    if size is not None and int(size) < needed:
        raise UnsupportedFeatureError(
            f"{what}: {url!r} has {size} bytes, the dataset needs {needed}; HDF5 reads zeros "
            "past its end but a reference cannot: extend the file or copy the dataset"
        )
