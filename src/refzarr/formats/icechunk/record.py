"""The record of sources inside an Icechunk repository: the root group's hidden attributes
``_nc_refzarr_sources`` (`RefGroup.sources`, as the JSON and Parquet writers store it) and
``_nc_refzarr_regions``, where each scan's chunks are in each array's chunk grid (what
`refresh_icechunk` needs to put a rescanned file's new references in place of its old ones,
as Icechunk gives no public way to ask which chunk points where).

The regions document::

    {"version": 1,
     "scans": {"/data/a.nc": {"v": [[0, 0], [2, 2]]}}}   # chunk grid [start, stop) per array

A scan's region in an array is the box of the chunks that reference its files; it is recorded
only when no other scan's chunk lies inside it (so that replacing it touches nothing else).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from refzarr.errors import RefFormatError
from refzarr.model import RefArray, RefGroup
from refzarr.model.frozen import thaw_json
from refzarr.model.hierarchy import SOURCES_ATTR
from refzarr.sources.record import (
    ScanRecord,
    read_record,
    record_of_document,
    sources_document,
)

__all__ = [
    "REGIONS_ATTR",
    "REGIONS_VERSION",
    "Regions",
    "merged_attributes",
    "read_regions",
    "record_attributes",
    "scan_regions",
]

REGIONS_ATTR = "_nc_refzarr_regions"
"""Root attribute of an Icechunk repository refzarr wrote: each scan's region per array.
Hidden by xarray (``_nc`` prefix) like `SOURCES_ATTR`."""

REGIONS_VERSION = 1

Regions = dict[str, dict[str, list[list[int]]]]
"""Scanned URL -> array path -> ``[start, stop]`` chunk indices (stop exclusive)."""


def scan_regions(
    arrays: Mapping[str, RefArray],
    scans: Sequence[ScanRecord],
    shifts: Mapping[str, Sequence[int]] | None = None,
) -> Regions:
    """Each scan's region in each of ``arrays`` (store path -> array) that references its
    files, moved by ``shifts[path]`` chunks (where an append puts the array's chunks)."""
    scan_of = {url: k for k, scan in enumerate(scans) for url in scan.files}
    out: Regions = {}
    for path, array in arrays.items():
        shift = np.asarray((shifts or {}).get(path) or [0] * array.meta.ndim, dtype=np.int64)
        found, starts, stops = _boxes(array, scan_of)
        # whole columns to Python lists at once: a scan per file makes thousands of boxes
        lows, highs = (starts + shift).tolist(), (stops + shift).tolist()
        for k, low, high in zip(found.tolist(), lows, highs, strict=True):
            out.setdefault(scans[k].url, {})[path] = [low, high]
    return out


def _boxes(array: RefArray, scan_of: Mapping[str, int]) -> tuple[Any, Any, Any]:
    """The scans whose box of chunks (those referencing their files) holds no other scan's
    chunk, nor a chunk of a file no scan recorded: their numbers, and their boxes' starts and
    stops (one row each). All boxes at once: a box is clean when the referenced chunks inside
    it are the scan's own, counted through prefix sums over the chunk grid."""
    manifest = array.manifest
    grid = manifest.grid_shape
    ndim = len(grid)
    written = manifest.written_entries()
    table = np.asarray([scan_of.get(url, -2) for url in written.paths] or [-2], dtype=np.int64)
    ids = np.asarray(written.path_id)
    referenced = ids >= 0
    numbers = np.asarray(written.numbers)[referenced]
    labels = table[ids[referenced]]
    empty = np.zeros((0, ndim), dtype=np.int64)
    if not numbers.size:
        return np.zeros(0, dtype=np.int64), empty, empty
    order = np.argsort(labels, kind="stable")
    found, firsts, counts = np.unique(labels[order], return_index=True, return_counts=True)
    if ndim:
        coords = np.stack(np.unravel_index(numbers[order], grid), axis=1).astype(np.int64)
        starts = np.minimum.reduceat(coords, firsts, axis=0)
        stops = np.maximum.reduceat(coords, firsts, axis=0) + 1
        inside = _box_sums(_prefix_sums(grid, numbers), starts, stops)
    else:  # one chunk: its scan's box holds nothing else
        starts = stops = np.zeros((found.size, 0), dtype=np.int64)
        inside = counts
    clean = (found >= 0) & (inside == counts)
    return found[clean], starts[clean], stops[clean]


def _prefix_sums(grid: tuple[int, ...], numbers: Any) -> Any:
    """How many referenced chunks (flat ``numbers``) lie below each corner of the chunk grid:
    ``sums[i, j, ...]`` counts those at indices below ``(i, j, ...)`` (one more row per axis)."""
    dtype = np.int32 if numbers.size < 2**31 else np.int64
    flat = np.zeros(int(np.prod(grid)), dtype=dtype)
    flat[numbers] = 1
    sums = np.zeros(tuple(n + 1 for n in grid), dtype=dtype)
    inner = flat.reshape(grid)
    for axis in range(len(grid)):
        inner = np.cumsum(inner, axis=axis, dtype=dtype)
    sums[tuple(slice(1, None) for _ in grid)] = inner
    return sums


def _box_sums(sums: Any, starts: Any, stops: Any) -> Any:
    """The number of referenced chunks inside each box (rows of ``starts``, ``stops``), by
    inclusion and exclusion over the boxes' corners."""
    ndim = starts.shape[1]
    total = np.zeros(starts.shape[0], dtype=np.int64)
    for corner in range(2**ndim):
        upper = [(corner >> axis) & 1 for axis in range(ndim)]
        index = tuple(stops[:, axis] if up else starts[:, axis] for axis, up in enumerate(upper))
        sign = -1 if (ndim - sum(upper)) % 2 else 1
        total += sign * sums[index].astype(np.int64)
    return total


def record_attributes(
    group: RefGroup,
    arrays: Mapping[str, RefArray],
    shifts: Mapping[str, Sequence[int]] | None,
    scans: Sequence[ScanRecord] | None = None,
) -> dict[str, Any]:
    """The root attributes recording ``group``'s sources and their regions in ``arrays`` (an
    empty dict when the group records no sources); ``scans``: its record, when already read."""
    scans = read_record(group) if scans is None else scans
    if not scans:
        return {}
    return {
        SOURCES_ATTR: thaw_json(group.sources),
        REGIONS_ATTR: {"version": REGIONS_VERSION, "scans": scan_regions(arrays, scans, shifts)},
    }


def merged_attributes(
    existing: Mapping[str, Any], added: Mapping[str, Any], where: str
) -> dict[str, Any]:
    """The record attributes of a store holding ``existing``'s and then ``added``'s scans
    (a scan of a URL already recorded replaces the older one)."""
    if not added:
        return {}
    old = record_of_document(existing.get(SOURCES_ATTR), where)
    sources = sources_document([*old, *record_of_document(added[SOURCES_ATTR], where)])
    regions = read_regions(existing, where)
    regions.update(added[REGIONS_ATTR]["scans"])
    return {SOURCES_ATTR: sources, REGIONS_ATTR: {"version": REGIONS_VERSION, "scans": regions}}


def read_regions(attributes: Mapping[str, Any], where: str) -> Regions:
    """The regions a root group's attributes record (empty when none).

    Raises
    ------
    RefFormatError
        When the record is malformed or of a newer version (names ``where``).
    """
    doc = attributes.get(REGIONS_ATTR)
    if doc is None:
        return {}
    if not isinstance(doc, Mapping) or doc.get("version") != REGIONS_VERSION:
        raise RefFormatError(
            f"{where}: attribute {REGIONS_ATTR!r} has version "
            f"{doc.get('version') if isinstance(doc, Mapping) else doc!r}; this refzarr reads "
            f"version {REGIONS_VERSION} (upgrade refzarr)"
        )
    scans = doc.get("scans")
    if not isinstance(scans, Mapping):
        raise RefFormatError(f"{where}: attribute {REGIONS_ATTR!r} is malformed")
    return {str(url): _arrays(value, where) for url, value in scans.items()}


def _arrays(value: Any, where: str) -> dict[str, list[list[int]]]:
    ok = isinstance(value, Mapping) and all(_is_region(r) for r in value.values())
    if not ok:
        raise RefFormatError(f"{where}: attribute {REGIONS_ATTR!r} holds a malformed region")
    return {str(path): [list(r[0]), list(r[1])] for path, r in value.items()}


def _is_region(region: Any) -> bool:
    if type(region) is list and len(region) == 2:  # as JSON gives it: checked at once
        start, stop = region
        if (
            type(start) is list
            and type(stop) is list
            and len(start) == len(stop)
            and all(type(v) is int for v in start)
            and all(type(v) is int for v in stop)
        ):
            return True
    if not isinstance(region, Sequence) or len(region) != 2:
        return False
    return all(_ints(part) for part in region) and len(region[0]) == len(region[1])


def _ints(values: Iterable[Any]) -> bool:
    return isinstance(values, Sequence) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in values
    )
