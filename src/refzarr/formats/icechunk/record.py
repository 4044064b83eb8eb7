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
from refzarr.sources.record import ScanRecord, read_record, sources_document

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
        for k, (start, stop) in _boxes(array, scan_of).items():
            region = [(start + shift).tolist(), (stop + shift).tolist()]
            out.setdefault(scans[k].url, {})[path] = region
    return out


def _boxes(array: RefArray, scan_of: Mapping[str, int]) -> dict[int, tuple[Any, Any]]:
    """Scan number -> (start, stop) of the chunks that reference its files, for the scans
    whose box holds no other scan's chunk."""
    manifest = array.manifest
    grid = manifest.grid_shape
    written = manifest.written_entries()
    table = np.asarray([scan_of.get(url, -2) for url in written.paths] or [-2], dtype=np.int64)
    ids = np.asarray(written.path_id)
    referenced = ids >= 0
    numbers = np.asarray(written.numbers)[referenced]
    labels = table[ids[referenced]]
    if not numbers.size:
        return {}
    order = np.argsort(labels, kind="stable")
    found, starts = np.unique(labels[order], return_index=True)
    if grid:
        coords = np.stack(np.unravel_index(numbers[order], grid), axis=1)
    else:
        coords = np.zeros((numbers.size, 0), dtype=np.int64)
    grid_labels = _label_grid(grid, numbers, labels)
    out: dict[int, tuple[Any, Any]] = {}
    for scan, group in zip(
        found.tolist(), np.split(np.arange(order.size), starts[1:]), strict=True
    ):
        if scan < 0:
            continue
        box = coords[group]
        start, stop = box.min(axis=0), box.max(axis=0) + 1
        inside = grid_labels[tuple(slice(int(a), int(b)) for a, b in zip(start, stop, strict=True))]
        if np.isin(inside, (scan, -1)).all():
            out[scan] = (start, stop)
    return out


def _label_grid(grid: tuple[int, ...], numbers: Any, labels: Any) -> Any:
    """The scan number of every chunk (-1: no reference, -2: a file no scan recorded)."""
    flat = np.full(int(np.prod(grid)), -1, dtype=np.int64)
    flat[numbers] = labels
    return flat.reshape(grid)


def record_attributes(
    group: RefGroup, arrays: Mapping[str, RefArray], shifts: Mapping[str, Sequence[int]] | None
) -> dict[str, Any]:
    """The root attributes recording ``group``'s sources and their regions in ``arrays`` (an
    empty dict when the group records no sources)."""
    scans = read_record(group)
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
    old = RefGroup(sources=existing.get(SOURCES_ATTR))
    new = RefGroup(sources=added[SOURCES_ATTR])
    sources = sources_document([*read_record(old, where), *read_record(new, where)])
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
    if not isinstance(region, Sequence) or len(region) != 2:
        return False
    return all(_ints(part) for part in region) and len(region[0]) == len(region[1])


def _ints(values: Iterable[Any]) -> bool:
    return isinstance(values, Sequence) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in values
    )
