"""`refresh`: scan again only the sources that changed since their scan, and put their new
references where the old ones were.

A set made from one scan is replaced by the new scan. In a combined set, each array's chunks
that referenced a changed file form one block of its chunk grid; the new scan's chunks take
that block's place (the file must keep its arrays, dtypes, codecs and chunk grid: a file
whose layout changed is named, with the advice to combine again). Coordinates that combine
loaded into the set are not read again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np

from refzarr.errors import IncompatibleError, SourceNotFoundError
from refzarr.formats.target_lock import DEFAULT_LOCK_TIMEOUT
from refzarr.model import INLINED, RefArray, RefGroup
from refzarr.model.frozen import thaw_json
from refzarr.model.manifest import ChunkManifest
from refzarr.sources.check import SourceChange, changes_of, require_record
from refzarr.sources.record import ScanRecord, read_record, sources_document

__all__ = [
    "json_version",
    "refresh",
    "refresh_group",
    "refuse_unscannable",
    "rescan",
    "with_new_axes",
    "written_form",
]


def refresh(
    refs: str | os.PathLike[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    refs_options: Mapping[str, Any] | None = None,
    durable: bool = False,
    lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
) -> list[SourceChange]:
    """Scan again the sources of a reference set that changed since their scan, and rewrite
    the set atomically with their new references (nothing is written when none changed).

    Parameters
    ----------
    refs
        Path or URL of a JSON or Parquet reference set made by refzarr (which records its
        sources), or of an Icechunk repository refzarr wrote (`refresh_icechunk`). The set
        keeps its form: JSON its Version (0 or 1) and compression, Parquet its record size.
    storage_options
        fsspec options for the source files.
    refs_options
        fsspec options for the reference set's own filesystem.
    durable
        Flush the rewritten set to disk (`refzarr.write`'s ``durable``; not for Icechunk).
    lock_timeout
        Seconds to wait at most while another writer of a local set holds its lock
        (`refzarr.write`'s ``lock_timeout``; None: no limit).

    Returns
    -------
    list of SourceChange
        The changes found, whose files were scanned again.

    Raises
    ------
    SourceNotFoundError
        When a scanned source vanished or cannot be reached (all are named; the set is left
        as it was).
    IncompatibleError
        When a changed file no longer fits its place in a combined set (names file and array).
    ConcurrentWriteError
        When another writer held a local set's lock longer than ``lock_timeout``, or replaced
        a set on an object store while this refresh read it (nothing written: run it again).
    RefFormatError
        When the set records no sources.
    """
    from refzarr.formats.api import read, replace_read_set
    from refzarr.formats.atomic import set_version
    from refzarr.formats.icechunk.reading import is_icechunk_repository
    from refzarr.formats.source import locate
    from refzarr.formats.target_lock import lock_timeout as waiting_at_most
    from refzarr.formats.target_lock import target_lock

    where = os.fspath(refs)
    if is_icechunk_repository(where, refs_options):
        from refzarr.formats.icechunk.refresh import refresh_icechunk

        return refresh_icechunk(where, storage_options, refs_options=refs_options).changes
    location = locate(refs, refs_options)
    # other local writers of the set (appends) wait until the refreshed set replaced it;
    # elsewhere (nothing locked) a set replaced while this one read it is not overwritten
    with waiting_at_most(lock_timeout), target_lock(location):
        form = seen = None
        if not location.is_local:
            form = written_form(refs, refs_options)
            seen = set_version(location, directory=form["format"] == "parquet")
        group = read(refs, refs_options)
        fresh, changes = refresh_group(group, storage_options, where=where)
        if changes:
            form = form or written_form(refs, refs_options)
            how = {"storage_options": refs_options, "durable": durable, **form}
            replace_read_set(fresh, refs, seen, lock_timeout=lock_timeout, **how)
    return changes


_HEAD_BYTES = 4096
"""Bytes read at the start of a JSON set to tell its Version (and its compression)."""


def written_form(
    refs: str | os.PathLike[str], refs_options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The `refzarr.write` arguments that write a set again in the form it has: ``format``,
    and JSON's ``version`` and ``compression`` or Parquet's ``record_size`` (one small read:
    the start of a JSON file, a Parquet set's ``.zmetadata``)."""
    from refzarr.formats.parquet.read import load_zmetadata
    from refzarr.formats.source import GZIP_MAGIC, ZSTD_MAGIC, detect_format, locate

    location = locate(refs, refs_options)
    found, head = detect_format(location, head=_HEAD_BYTES)
    if found == "parquet":
        return {"format": "parquet", "record_size": load_zmetadata(location, head).record_size}
    compression: Literal["zstd", "gzip"] | None = None
    if head.startswith(ZSTD_MAGIC):
        compression = "zstd"
    elif head.startswith(GZIP_MAGIC):
        compression = "gzip"
    text = _decompressed_head(head, compression)
    return {"format": "json", "compression": compression, "version": json_version(text)}


def _decompressed_head(head: bytes, compression: str | None) -> bytes:
    """The first bytes of the document a (possibly compressed) file's first bytes hold."""
    import gzip
    import io

    import zstandard

    if compression is None:
        return head
    try:
        if compression == "zstd":
            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(head))
            return bytes(reader.read(_HEAD_BYTES))
        with gzip.GzipFile(fileobj=io.BytesIO(head)) as stream:
            return stream.read(_HEAD_BYTES)
    except (zstandard.ZstdError, OSError, EOFError):
        return b""  # the set was read whole just before: a short head says Version 0


_V1_KEYS = frozenset({"version", "templates", "gen", "refs"})
"""A Version 1 document's top-level keys; a Version 0 document's are Zarr keys, never these."""


def json_version(head: bytes) -> Literal[0, 1]:
    """1 when the first key of the JSON document that ``head`` starts is one of Version 1's
    top-level keys (every key of a Version 1 document is), else 0."""
    text = head.decode("utf-8", errors="replace").lstrip()
    if not text.startswith("{"):
        return 0
    rest = text[1:].lstrip()
    if not rest.startswith('"'):
        return 0
    try:
        key, _ = json.JSONDecoder().raw_decode(rest)  # the key alone: a JSON string
    except ValueError:  # a key longer than the head: no Version 1 key
        return 0
    return 1 if key in _V1_KEYS else 0


def refresh_group(
    group: RefGroup, storage_options: Mapping[str, Any] | None = None, *, where: str = "the group"
) -> tuple[RefGroup, list[SourceChange]]:
    """``group`` with the sources that changed scanned again, and the changes found (the
    group itself when nothing changed); see `refresh`."""
    scans = require_record(group, where)
    changes = changes_of(scans, storage_options)
    if not changes:
        return group, []
    refuse_unscannable(changes)
    redo = {c.scan for c in changes}
    again = [s for s in scans if s.url in redo]
    rescanned = rescan_many(again, storage_options)
    if len(scans) == 1:
        return rescanned[scans[0].url], changes
    group = _replace_scans(group, [(s, rescanned[s.url]) for s in again])
    records = [read_record(rescanned[s.url])[0] if s.url in rescanned else s for s in scans]
    return replace(group, sources=sources_document(records)), changes


def refuse_unscannable(changes: Sequence[SourceChange]) -> None:
    """SourceNotFoundError naming every scanned source that vanished or is unreachable."""
    lost = [c for c in changes if c.kind != "changed" and (c.url == c.scan or c.kind != "vanished")]
    if lost:
        named = "; ".join(str(c) for c in lost)
        raise SourceNotFoundError(
            f"cannot scan again {len(lost)} source(s): {named}. Restore them, or combine the "
            "remaining files into a new reference set"
        )


def rescan(scan: ScanRecord, storage_options: Mapping[str, Any] | None) -> RefGroup:
    """The scanned URL scanned again with its recorded format and options (but storage
    options: refzarr never records them, and a stranger's record must not choose where the
    user's credentials go, such as another S3 endpoint: only ``storage_options`` count)."""
    from refzarr.scan import scan as scan_url

    return scan_url(scan.url, format=scan.format, **_rescan_options(scan, storage_options))


def _rescan_options(scan: ScanRecord, storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The recorded scan options, with the caller's storage options in place of any recorded."""
    options = {k: v for k, v in scan.options.items() if k != "storage_options"}
    if storage_options is not None:
        options["storage_options"] = storage_options
    return options


def rescan_many(
    scans: Sequence[ScanRecord], storage_options: Mapping[str, Any] | None
) -> dict[str, RefGroup]:
    """Each scanned URL scanned again with its recorded format and options, by URL: scans of
    one format and options together through `refzarr.scan_many` (a process pool for many
    files, as ``refzarr scan`` does: a whole archive copied without its times changes every
    file)."""
    from refzarr.parallel import scan_many

    alike: dict[str, list[ScanRecord]] = {}
    for scan in scans:
        key = json.dumps([scan.format, thaw_json(scan.options)], sort_keys=True, default=str)
        alike.setdefault(key, []).append(scan)
    found: dict[str, RefGroup] = {}
    for batch in alike.values():
        # the first here: the format's libraries (h5py, ~0.3 s) are imported once, in this
        # process, and every worker the pool forks has them
        found[batch[0].url] = rescan(batch[0], storage_options)
        if len(batch) == 1:
            continue
        options = _rescan_options(batch[0], storage_options)
        urls = [scan.url for scan in batch[1:]]
        groups = scan_many(urls, format=batch[0].format, progress=False, **options)
        found.update(zip(urls, groups, strict=True))
    return {scan.url: found[scan.url] for scan in scans if scan.url in found}


def _replace_scans(group: RefGroup, fresh: Sequence[tuple[ScanRecord, RefGroup]]) -> RefGroup:
    """``group`` with the chunks of every scan of ``fresh`` replaced by its new scan's, all
    in one pass per array (one per scan made a refresh of every file quadratic)."""
    replaced = {}
    for path, array in group.arrays():
        updated = _replace_array(path, array, fresh)
        if updated is not None:
            replaced[path] = updated
    return _rebuilt(group, replaced, "")


def _rebuilt(group: RefGroup, replaced: Mapping[str, RefArray], prefix: str) -> RefGroup:
    members: dict[str, RefArray | RefGroup] = {}
    for name, member in group.members.items():
        path = f"{prefix}{name}"
        if isinstance(member, RefGroup):
            members[name] = _rebuilt(member, replaced, f"{path}/")
        else:
            members[name] = replaced.get(path, member)
    return replace(group, members=members)


def _replace_array(
    path: str, array: RefArray, fresh: Sequence[tuple[ScanRecord, RefGroup]]
) -> RefArray | None:
    """``array`` with the block of chunks of each scan's files replaced by its new scan's
    chunks of the array at ``path``; None when the array holds no chunk of those files."""
    manifest = array.manifest
    ids = np.asarray(manifest.path_id)
    owner = np.full(len(manifest.paths), -1, dtype=np.int64)  # URL -> its scan in fresh
    place = {url: k for k, url in enumerate(manifest.paths)}
    for number, (scan, _) in enumerate(fresh):
        for url in scan.files:
            if url in place:
                owner[place[url]] = number
    # an array, not numpy's scalar, for a 0-d array's grid too (indexing gives a scalar there)
    chunk_owner = np.asarray(
        np.where(ids >= 0, owner[np.clip(ids, 0, None)], -2)
        if len(owner)
        else np.full_like(ids, -2)
    )
    flat = chunk_owner.reshape(-1)
    order = np.argsort(flat, kind="stable")
    ranked = flat[order]
    numbers = np.unique(ranked[ranked >= 0])
    if not numbers.size:
        return None
    splice = _Splice(manifest)
    lows = np.searchsorted(ranked, numbers, side="left")
    highs = np.searchsorted(ranked, numbers, side="right")
    for number, low, high in zip(numbers.tolist(), lows.tolist(), highs.tolist(), strict=True):
        scan, group = fresh[number]
        new = _fresh_array(path, array, group, scan.url)
        mine = (
            np.stack(np.unravel_index(order[low:high], ids.shape), axis=-1)
            if ids.ndim
            else np.zeros((high - low, 0), dtype=np.int64)
        )
        region = _region(path, mine, chunk_owner, number, new.manifest, scan.url)
        splice.put(new.manifest, region)
    return RefArray(array.meta, splice.result())


def _fresh_array(path: str, array: RefArray, fresh: RefGroup, url: str) -> RefArray:
    try:
        new = fresh[path]
    except KeyError:
        new = None
    if not isinstance(new, RefArray):
        raise IncompatibleError(f"{url}: array {path!r} is gone from the file; {_AGAIN}")
    new = with_new_axes(new, array.meta.dimension_names, array.meta.chunks)
    old, now = array.meta, new.meta
    for what in ("dtype", "chunks", "codecs", "fill_value", "order"):
        if not _same(getattr(old, what), getattr(now, what)):
            raise IncompatibleError(
                f"{url}: array {path!r} has {what} {getattr(now, what)} now, "
                f"{getattr(old, what)} in the reference set; {_AGAIN}"
            )
    return new


_AGAIN = "the file's layout changed: scan and combine the files again"


def with_new_axes(
    new: RefArray, dimension_names: Sequence[str] | None, chunks: Sequence[int]
) -> RefArray:
    """``new`` (a fresh scan's array) with a length-1 axis where combine added a dimension
    the file lacks (e.g. ``time`` taken from file names), so its chunk grid lines up with the
    set's array of those ``dimension_names`` and ``chunks``; else ``new`` itself."""
    was, now = dimension_names, new.meta.dimension_names
    if was is None or now is None or len(was) <= len(now):
        return new
    added = [k for k, name in enumerate(was) if name not in now]
    kept = [name for name in was if name in now]
    if kept != list(now) or any(chunks[k] != 1 for k in added):
        return new
    meta, manifest = new.meta, new.manifest
    grid = _inserted(manifest.grid_shape, added, 1)
    rectilinear = None if meta.rectilinear is None else _inserted(meta.rectilinear, added, None)
    inlined = {_inserted(k, added, 0): v for k, v in manifest.inlined.items()}
    ids, offsets, lengths = (
        np.reshape(c, grid) for c in (manifest.path_id, manifest.offset, manifest.length)
    )
    return RefArray(
        replace(
            meta,
            shape=_inserted(meta.shape, added, 1),
            chunks=_inserted(meta.chunks, added, 1),
            dimension_names=tuple(was),
            rectilinear=rectilinear,
        ),
        ChunkManifest.from_arrays(manifest.paths, ids, offsets, lengths, inlined),
    )


def _inserted(values: Sequence[Any], at: Sequence[int], value: Any) -> tuple[Any, ...]:
    """``values`` with ``value`` inserted so that it lands at each position of ``at``."""
    out = list(values)
    for k in at:
        out.insert(k, value)
    return tuple(out)


def _same(old: Any, now: Any) -> bool:
    """Whether two metadata values are equal, a NaN fill value equal to a NaN."""
    if isinstance(old, float | np.floating) and isinstance(now, float | np.floating):
        return bool(old == now or (np.isnan(old) and np.isnan(now)))
    return bool(old == now)


def _region(
    path: str, mine: Any, owner: Any, number: int, new: ChunkManifest, url: str
) -> tuple[slice, ...]:
    """Where the new scan's chunk grid goes in the set's (its referenced chunks' corner on
    the old ones', ``mine`` the coordinates of the old ones), checked to hold every old chunk
    of the file and no other file's (``owner``: each chunk's scan number, -1 for a chunk of
    another file, -2 for one referencing no file)."""
    new_refs = np.asarray(new.path_id) >= 0
    if not new_refs.any():
        raise IncompatibleError(f"{url}: array {path!r} references no bytes now; {_AGAIN}")
    start = mine.min(axis=0) - np.argwhere(new_refs).min(axis=0)
    stop = start + np.asarray(new.grid_shape)
    if (start < 0).any() or (stop > np.asarray(owner.shape)).any():
        raise IncompatibleError(f"{url}: array {path!r} has another chunk grid now; {_AGAIN}")
    region = tuple(slice(int(a), int(b)) for a, b in zip(start, stop, strict=True))
    outside = ((mine < start) | (mine >= stop)).any()
    inside = owner[region]
    if outside or ((inside != number) & (inside != -2)).any():
        raise IncompatibleError(f"{url}: array {path!r} moved in the chunk grid; {_AGAIN}")
    return region


class _Splice:
    """A manifest being rebuilt with the chunk grids of new scans put into regions of it."""

    def __init__(self, old: ChunkManifest) -> None:
        self.old = old
        self.ids = np.array(old.path_id, dtype=np.int64)
        self.offsets, self.lengths = np.array(old.offset), np.array(old.length)
        self.table = list(old.paths)
        self.known = {url: k for k, url in enumerate(self.table)}
        self.covered = np.zeros(self.ids.shape, dtype=bool)
        self.inlined: dict[tuple[int, ...], bytes] = {}

    def put(self, new: ChunkManifest, region: tuple[slice, ...]) -> None:
        """``new``'s chunks (its grid is the region's shape) in place of ``region``'s."""
        for url in new.paths:
            if url not in self.known:
                self.known[url] = len(self.table)
                self.table.append(url)
        remap = np.asarray([self.known[u] for u in new.paths] or [0], dtype=np.int64)
        new_ids = np.asarray(new.path_id, dtype=np.int64)
        self.ids[region] = np.where(new_ids >= 0, remap[np.clip(new_ids, 0, None)], new_ids)
        self.offsets[region], self.lengths[region] = new.offset, new.length
        self.covered[region] = True
        corner = tuple(s.start for s in region)
        for index, data in new.inlined.items():
            self.inlined[tuple(i + c for i, c in zip(index, corner, strict=True))] = data

    def result(self) -> ChunkManifest:
        kept = {k: v for k, v in self.old.inlined.items() if not self.covered[k]}
        return _compacted(self.table, self.ids, self.offsets, self.lengths, kept | self.inlined)


def _compacted(
    table: list[str], ids: Any, offsets: Any, lengths: Any, inlined: dict[tuple[int, ...], bytes]
) -> ChunkManifest:
    """A manifest whose URL table holds only the URLs still referenced."""
    used = np.unique(ids[ids >= 0])
    position = np.full(len(table) or 1, -1, dtype=np.int64)
    position[used] = np.arange(len(used))
    compact = np.where(ids >= 0, position[np.clip(ids, 0, None)], ids)
    compact[ids == INLINED] = INLINED
    paths = [table[int(k)] for k in used]
    return ChunkManifest.from_arrays(paths, compact, offsets, lengths, inlined)
