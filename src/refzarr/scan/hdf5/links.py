"""External links: the group or dataset another HDF5 file holds, scanned as if it were here.

The target file is found like an external raw data file (`refzarr.scan.hdf5.external`: next to
the linking file first), opened with the same storage options and scanned with the same
options; its chunks reference the target file. A link back to a group that is being scanned
(in any file of the chain) is a cycle and raises `UnsupportedFeatureError`, as does a missing
target file or object: with ``on_unsupported="skip"`` the link is left out.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any, Protocol

import fsspec
import h5py

from refzarr.errors import SourceNotFoundError, UnsupportedFeatureError
from refzarr.model import RefArray, RefGroup
from refzarr.scan.hdf5.dims import is_dimension_only
from refzarr.scan.hdf5.external import find_sibling
from refzarr.scan.hdf5.source import OpenSource, open_source
from refzarr.scan.result import Skipped

__all__ = ["Walker", "follow_external_link"]


class Walker(Protocol):
    """What following a link needs of a scan: scan a group or a dataset, list what it skipped."""

    skipped: list[Skipped]

    def group(self, group: h5py.Group, ancestors: frozenset[Any]) -> RefGroup:
        """A group and everything below it."""
        ...

    def array(self, ds: h5py.Dataset, path: str) -> RefArray:
        """A dataset as an array."""
        ...


def follow_external_link(
    link: h5py.ExternalLink,
    path: str,
    ancestors: frozenset[Any],
    source: OpenSource,
    make_walk: Callable[[OpenSource], Walker],
    skipped: list[Skipped],
) -> RefArray | RefGroup | None:
    """The object ``link`` (at ``path`` of ``source``) points to, scanned in its own file.

    ``ancestors`` holds what is being scanned above the link; ``make_walk`` starts a scan of
    another open file with the same options; what that scan skips is added to ``skipped``
    under the link's path. Returns None for objects that are not arrays (named datatypes,
    netCDF dimension-only datasets).

    Raises
    ------
    UnsupportedFeatureError
        When the target file or object does not exist, or the link leads back into a group
        being scanned.
    """
    where = f"{source.url}: link {path!r} (external link to {link.path!r} in {link.filename!r})"
    fs = getattr(source.raw, "fs", None) or fsspec.core.url_to_fs(source.url)[0]
    target_url = find_sibling(fs, source.url, link.filename, where)
    inside = ancestors | _chain(source.url, posixpath.dirname(path))
    target_path = posixpath.normpath("/" + link.path.lstrip("/"))
    if (target_url, target_path) in inside:
        raise UnsupportedFeatureError(f"{where}: leads back to a group that contains it (a cycle)")
    try:
        with open_source(target_url, getattr(fs, "storage_options", None)) as target:
            walk = make_walk(target)
            found = _scan_target(target, target_path, walk, inside, where)
    except SourceNotFoundError as exc:
        raise UnsupportedFeatureError(f"{where}: target file {target_url!r} not found") from exc
    prefix = target_path.rstrip("/")
    for item in walk.skipped:
        inner = item.path[len(prefix) :] if item.path.startswith(prefix) else item.path
        skipped.append(Skipped(path + inner, item.reason))
    return found


def _chain(url: str, group: str) -> frozenset[tuple[str, str]]:
    """``(url, path)`` of ``group`` and of every group above it."""
    parts = [p for p in group.split("/") if p]
    return frozenset((url, "/" + "/".join(parts[:n])) for n in range(len(parts) + 1))


def _scan_target(
    target: OpenSource, path: str, walk: Walker, inside: frozenset[Any], where: str
) -> RefArray | RefGroup | None:
    try:
        item = target.h5.get(path)
    except (KeyError, OSError) as exc:  # a broken link on the way
        raise UnsupportedFeatureError(
            f"{where}: {path!r} cannot be opened in {target.url}: {exc}"
        ) from exc
    if item is None:
        raise UnsupportedFeatureError(f"{where}: object {path!r} not found in {target.url}")
    if item.id.fileno != target.h5.id.fileno:
        raise UnsupportedFeatureError(
            f"{where}: {path!r} leads on through another external link in {target.url}; "
            "link to the final file directly"
        )
    if isinstance(item, h5py.Group):
        return walk.group(item, inside | {(target.url, path)})
    if isinstance(item, h5py.Dataset) and not is_dimension_only(item):
        return walk.array(item, item.name or path)
    return None
