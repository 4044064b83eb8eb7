"""`refresh_icechunk`: scan again the sources of an Icechunk repository that changed since
their scan and commit their new references as one new snapshot.

The repository's record (`refzarr.formats.icechunk.record`) says which files each scan
referenced and where its chunks are in each array; a rescanned file's chunks replace that
region's (same arrays, dtypes, codecs, chunk shape and extent, else a named
`IncompatibleError`: combine and write again). A repository of a single scan is rewritten
whole from the new scan. Loaded coordinates (native chunks) are not read again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import IncompatibleError
from refzarr.formats.icechunk.reading import IcechunkRecord, record_of_store
from refzarr.formats.icechunk.record import REGIONS_ATTR, REGIONS_VERSION
from refzarr.model import RefArray, RefGroup
from refzarr.model.hierarchy import SOURCES_ATTR
from refzarr.sources.check import SourceChange

__all__ = ["IcechunkRefresh", "refresh_icechunk"]

_AGAIN = "the file's layout changed: scan, combine and write the repository again"


@dataclass(frozen=True, slots=True)
class IcechunkRefresh:
    """What `refresh_icechunk` did: the changes found and the new snapshot (None when
    nothing changed and nothing was committed)."""

    changes: list[SourceChange]
    snapshot: str | None


def refresh_icechunk(
    repository: str | os.PathLike[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    refs_options: Mapping[str, Any] | None = None,
    branch: str = "main",
    message: str | None = None,
) -> IcechunkRefresh:
    """Scan again the changed sources of an Icechunk repository refzarr wrote, and commit
    their new references to ``branch`` in one snapshot (nothing when none changed).

    Parameters
    ----------
    repository
        Local path or ``s3://bucket/prefix`` of the repository.
    storage_options
        fsspec options for the source files.
    refs_options
        s3fs-style options for the repository itself (`refzarr.commit_icechunk`).
    branch
        The branch whose tip is checked and committed to.
    message
        The commit message (default: ``refzarr refresh: N changed source(s) scanned
        again: names``).

    Raises
    ------
    SourceNotFoundError
        When a scanned source vanished or cannot be reached (nothing is committed).
    IncompatibleError
        When a changed file no longer fits its place (names file and array).
    RefFormatError
        When the repository records no sources.
    CommitConflictError
        When another writer committed to ``branch`` meanwhile.
    """
    from refzarr.formats.icechunk.repository import commit_session, open_repository
    from refzarr.sources.check import changes_of, required
    from refzarr.sources.refresh import refuse_unscannable, rescan_many

    where = os.fspath(repository)
    session = open_repository(where, refs_options).writable_session(branch)
    record = record_of_store(session.store, where)  # read without zarr's I/O thread
    scans = required(record.scans, where)
    changes = changes_of(scans, storage_options)
    if not changes:
        return IcechunkRefresh([], None)
    refuse_unscannable(changes)
    redo = list(dict.fromkeys(c.scan for c in changes))
    by_url = {scan.url: scan for scan in scans}
    # scanned together (a process pool for many files) before zarr starts its I/O thread
    # (`_apply`): with that thread running, the pool could not fork its workers, and would
    # start them afresh (each importing refzarr and h5py again)
    fresh = rescan_many([by_url[url] for url in redo], storage_options)
    _apply(session.store, record, fresh, where, storage_options)
    text = message or _message(redo)
    return IcechunkRefresh(changes, commit_session(session, text, where, branch))


def _apply(
    store: Any,
    record: IcechunkRecord,
    fresh: Mapping[str, RefGroup],
    where: str,
    storage_options: Mapping[str, Any] | None,
) -> None:
    from refzarr.formats.icechunk.write import source_checksums, to_icechunk
    from refzarr.sources.record import read_record, sources_document

    if len(record.scans) == 1:  # the repository is that one scan: written again whole
        (group,) = fresh.values()
        to_icechunk(group, store, storage_options=storage_options)
        return
    by_array: dict[str, list[_Place]] = {}  # each array opened and written once
    for url, group in fresh.items():
        regions = record.regions.get(url)
        if not regions:
            raise IncompatibleError(
                f"{where}: its record holds no region for {url} (written by a refzarr before "
                "regions were recorded, or its chunks share their region with another "
                f"file's); {_AGAIN}"
            )
        checksums = source_checksums(group)
        for path, (start, stop) in regions.items():
            by_array.setdefault(path, []).append(_Place(url, group, (start, stop), checksums))
    located: dict[str, str] = {}
    for path, places in by_array.items():
        _replace(store, path, places, located)
    scans = [read_record(fresh[s.url])[0] if s.url in fresh else s for s in record.scans]
    _set_record(store, sources_document(scans), record.regions, where)


@dataclass(frozen=True, slots=True)
class _Place:
    """A rescanned file's new scan, and the region of an array its chunks replace."""

    url: str
    group: RefGroup
    region: tuple[Sequence[int], Sequence[int]]
    checksums: Mapping[str, Any]


def _replace(store: Any, path: str, places: Sequence[_Place], located: dict[str, str]) -> None:
    """The chunks of each place's region of the array at ``path`` replaced by its new scan's
    (every new scan checked first; then the chunks each no longer holds deleted, then every
    new chunk written at once)."""
    import zarr

    from refzarr.formats.icechunk.append import check_alike
    from refzarr.formats.icechunk.write import ChunkPart, write_parts
    from refzarr.sources.refresh import with_new_axes

    existing = zarr.open_array(store, path=path, mode="r")
    names = getattr(existing.metadata, "dimension_names", None)  # Zarr v3 only
    parts: list[ChunkPart] = []
    checksums: dict[str, Any] = {}
    placed = []
    for place in places:
        array = with_new_axes(_fresh_array(place.group, path, place.url), names, existing.chunks)
        try:
            check_alike(path, array, existing, loaded=False)
        except IncompatibleError as exc:
            raise IncompatibleError(f"{place.url}: {exc}; {_AGAIN}") from exc
        _check_fill(path, array, existing, place.url)
        shift = _shift(path, array, existing, place.region, place.url)
        parts.append((array.manifest, shift))
        checksums.update(place.checksums)
        placed.append((array, place.region, shift))
    for array, region, shift in placed:
        _delete_unwritten(store, path, array, region, shift)
    write_parts(store, path, parts, checksums, located)


def _check_fill(path: str, array: RefArray, existing: Any, url: str) -> None:
    from refzarr.formats.icechunk.write import zarr_fill

    now = np.asarray(zarr_fill(array.meta.fill_value, array.meta.dtype))
    stored = np.asarray(existing.metadata.fill_value)
    if not np.array_equal(now, stored, equal_nan=now.dtype.kind in "fc"):
        raise IncompatibleError(
            f"{url}: array {path!r} has fill value {now} now, {stored} in the repository; {_AGAIN}"
        )


def _fresh_array(group: RefGroup, path: str, url: str) -> RefArray:
    try:
        array = group[path]
    except KeyError:
        array = None
    if not isinstance(array, RefArray):
        raise IncompatibleError(f"{url}: array {path!r} is gone from the file; {_AGAIN}")
    return array


def _shift(
    path: str,
    array: RefArray,
    existing: Any,
    region: tuple[Sequence[int], Sequence[int]],
    url: str,
) -> tuple[int, ...]:
    """Where the new scan's chunk grid goes in the stored array's: its referenced chunks'
    corner on the recorded region's, checked to cover the same extent inside the array."""
    start, stop = np.asarray(region[0]), np.asarray(region[1])
    found = _referenced_box(array)
    if found is None:
        raise IncompatibleError(f"{url}: array {path!r} references no bytes now; {_AGAIN}")
    low, high = found
    grid = -(-np.asarray(existing.shape) // np.asarray(existing.chunks))
    shift = start - low
    fits = (shift >= 0).all() and (shift + np.asarray(array.manifest.grid_shape) <= grid).all()
    if not (high - low == stop - start).all() or not fits:
        raise IncompatibleError(
            f"{url}: array {path!r} has chunks {low.tolist()}..{high.tolist()} now, which do "
            f"not fit its region {start.tolist()}..{stop.tolist()} of the repository; {_AGAIN}"
        )
    return tuple(int(k) for k in shift)


def _referenced_box(array: RefArray) -> tuple[Any, Any] | None:
    grid = array.manifest.grid_shape
    written = array.manifest.written_entries()
    numbers = np.asarray(written.numbers)[np.asarray(written.path_id) >= 0]
    if not numbers.size:
        return None
    if not grid:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    coords = np.stack(np.unravel_index(numbers, grid), axis=1)
    return coords.min(axis=0), coords.max(axis=0) + 1


def _delete_unwritten(
    store: Any,
    path: str,
    array: RefArray,
    region: tuple[Sequence[int], Sequence[int]],
    shift: tuple[int, ...],
) -> None:
    """Delete the region's chunks the new scan no longer holds (now missing: fill value)."""
    from zarr.core.sync import sync

    grid = array.manifest.grid_shape
    if not grid:
        return
    held = np.zeros(grid, dtype=bool)
    held.flat[np.asarray(array.manifest.written_entries().numbers)] = True
    start = np.asarray(region[0]) - np.asarray(shift)
    stop = np.asarray(region[1]) - np.asarray(shift)
    box = tuple(slice(int(a), int(b)) for a, b in zip(start, stop, strict=True))
    for index in np.argwhere(~held[box]):
        where = index + start + np.asarray(shift)
        sync(store.delete(f"{path}/c/" + "/".join(str(int(i)) for i in where)))


def _set_record(store: Any, sources: Any, regions: Mapping[str, Any], where: str) -> None:
    from refzarr.formats.icechunk.rootdoc import add_attributes

    record = {SOURCES_ATTR: sources, REGIONS_ATTR: {"version": REGIONS_VERSION, "scans": regions}}
    add_attributes(store, "", record, where)


def _message(urls: Sequence[str]) -> str:
    names = ", ".join(os.path.basename(u.rstrip("/")) or u for u in urls[:10])
    more = f" and {len(urls) - 10} more" if len(urls) > 10 else ""
    return f"refzarr refresh: {len(urls)} changed source(s) scanned again: {names}{more}"
