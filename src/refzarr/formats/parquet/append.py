"""Appending to a Parquet reference set: only the record files that change are written.

When the append dimension leads the chunk grid of every array along it, new chunks follow
the existing ones in C order: an array's new entries go to the end of its last record file
and into new ones (fsspec's layout puts chunk ``i`` in ``refs.<i // record_size>.parq``).
`plan_append` checks the new data against the existing set's metadata and coordinate as
`refzarr.combine` would, without reading the existing manifests; then a directory beside
the set is filled with hard links to every record file that does not change (no data
copied), the rewritten last record file of each growing array (its existing rows copied as
Arrow data, `refzarr.formats.parquet.extend`), the new record files, the coordinate along
the dimension and ``.zmetadata``; and it is exchanged with the old directory in one step,
as every Parquet write is (`refzarr.formats.atomic`). Readers see the old set or the new
one; a failure or a kill at any step leaves the old set untouched. The directory is the one
the previous append left (the set it replaced, `atomic_path(recycle=True)`) when there is
one: only the names that differ are unlinked and linked, no directory is made or deleted.

Everything else (a set on an object store, a dimension that does not lead, a result with an
irregular grid, a set fsspec or kerchunk wrote, a refused append) combines the whole
existing set with the new data and rewrites it, as before. Which path ran, and why, is
logged (logger ``refzarr.formats.parquet.append``, level DEBUG) and returned.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from refzarr.errors import RefzarrError, SourceNotFoundError
from refzarr.formats.api import DEFAULT_RECORD_SIZE, read
from refzarr.formats.atomic import atomic_path, clean_leftovers, flush_tree, set_version, step
from refzarr.formats.parquet.append_plan import AppendedSource, AppendPlan, NotFast, plan_append
from refzarr.formats.parquet.extend import extended_record
from refzarr.formats.parquet.read import ZMetadata, load_zmetadata, read_parquet
from refzarr.formats.parquet.source import record_file_name
from refzarr.formats.parquet.sources_file import SOURCES_FILE
from refzarr.formats.parquet.tables import EntrySlice, record_table
from refzarr.formats.parquet.write import encode_record, set_documents, write_parquet, write_records
from refzarr.formats.source import Location
from refzarr.formats.target_lock import target_lock
from refzarr.formats.written import WriteResult, written_result
from refzarr.model.group import RefGroup
from refzarr.model.hierarchy import is_metadata_key, require_regular_grids

__all__ = ["AppendOutcome", "append_parquet"]

LOG = logging.getLogger(__name__)

_RECORD = re.compile(r"refs\.(\d+)\.parq")
_THREADS = 4
_NO_LINKS = {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.EOPNOTSUPP, errno.ENOSYS}


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    """What an append to a Parquet set did.

    Parameters
    ----------
    fast
        Only the changed record files were written (else the whole set was rewritten).
    result
        What was written (`refzarr.write` returns it).
    reason
        Why the whole set was rewritten ("" when it was not).
    written
        Record files written.
    linked
        Files of the old set hard-linked (or copied) into the new one unchanged.
    """

    fast: bool
    result: WriteResult
    reason: str = ""
    written: int = 0
    linked: int = 0


def append_parquet(
    group: RefGroup,
    location: Location,
    *,
    target: str,
    append_dim: str,
    record_size: int | None,
    storage_options: Mapping[str, Any] | None,
    fast: bool = True,
    durable: bool = False,
) -> AppendOutcome:
    """Append ``group`` along ``append_dim`` to the Parquet set at ``location``.

    Parameters
    ----------
    group
        The new data.
    location
        The set's directory.
    target
        The set as the caller named it (error messages say ``<target> (existing set)``).
    append_dim
        The dimension to append along.
    record_size
        References per record file; None keeps the existing set's (a different one rewrites
        the whole set).
    storage_options
        fsspec options for the referenced files (coordinate values, identity checks).
    fast
        False always rewrites the whole set (benchmarks compare the two).
    durable
        Flush every file and directory of the new set to disk before the exchange, and the
        exchange after it (``fsync``): the append survives a power cut. Without it nothing
        is flushed: a kill at any moment still leaves the old set or the new one.

    Returns
    -------
    AppendOutcome
        Which path ran and why (also logged at DEBUG level).
    """
    # other local writers of the set wait until this one is done (a set a dead writer
    # moved aside is put back first); on object stores a set replaced meanwhile is refused
    with target_lock(location, restore=clean_leftovers):
        seen = None if location.is_local else set_version(location, directory=True)
        return _append_locked(
            group,
            location,
            target,
            (append_dim, record_size, storage_options, seen),
            fast=fast,
            durable=durable,
        )


def _append_locked(
    group: RefGroup,
    location: Location,
    target: str,
    how: tuple[str, int | None, Mapping[str, Any] | None, object],
    *,
    fast: bool,
    durable: bool,
) -> AppendOutcome:
    """`append_parquet` with the target's lock held (``how``: the dimension, the record
    size, the storage options, the set's version seen before reading it)."""
    append_dim, record_size, storage_options, seen = how
    urls = [f"{target} (existing set)", "the appended data"]
    zmeta, reason = _existing_layout(location, record_size, fast)
    if zmeta is not None:
        try:
            plan = plan_append(
                read_parquet(location, target=None, zmeta=zmeta),
                group,
                append_dim,
                record_size=zmeta.record_size,
                urls=urls,
                storage_options=storage_options,
            )
        except NotFast as exc:
            reason = str(exc)
        except (RefzarrError, ValueError) as exc:  # combine's exact error comes from below
            reason = f"the checks refused the append ({type(exc).__name__})"
        else:
            written, linked = _write_fast(plan, location, zmeta.record_size, durable)
            LOG.debug(
                "%s: appended along %r: %d record files written, %d files linked",
                location.shown,
                append_dim,
                written,
                linked,
            )
            result = written_result(
                group, target, "parquet", written=plan.group, append_dim=append_dim, appended=True
            )
            return AppendOutcome(True, result, "", written, linked)
    LOG.debug("%s: whole set rewritten to append along %r: %s", location.shown, append_dim, reason)
    return _rewrite(
        group,
        location,
        target,
        (urls, append_dim, record_size, storage_options),
        reason,
        durable,
        seen,
    )


def _existing_layout(
    location: Location, record_size: int | None, fast: bool
) -> tuple[ZMetadata | None, str]:
    """The existing set's ``.zmetadata`` when only its changed files can be written, else
    None and why not."""
    if not fast:
        return None, "asked for"
    if not location.is_local:
        return None, "the set is not on the local disk (object stores: whole set rewritten)"
    try:
        zmeta = load_zmetadata(location)
    except (RefzarrError, OSError):
        return None, "no Parquet reference set at the target"
    if not zmeta.every_record_written:
        return None, "the set was not written by refzarr (record files may be absent)"
    if any(not is_metadata_key(key) for key in zmeta.metadata):
        return None, "the set holds chunks in .zmetadata"
    if record_size is not None and record_size != zmeta.record_size:
        return None, f"record_size changes from {zmeta.record_size} to {record_size}"
    return zmeta, ""


# -- the fast path --------------------------------------------------------------------------


def _write_fast(
    plan: AppendPlan, location: Location, record_size: int, durable: bool
) -> tuple[int, int]:
    """A new directory of links and changed files, exchanged with the old one; the files
    written and linked."""
    with atomic_path(location, directory=True, recycle=True, sync=durable) as temporary:
        linked = _link_unchanged(location.path, temporary, plan)
        step("linked")
        written = _write_changed(plan, location.path, temporary, record_size)
        step("appended")
        for name, document in set_documents(plan.group, record_size).items():
            _create(os.path.join(temporary, name), document)
        if durable:
            flush_tree(temporary)
    return written, linked


def _link_unchanged(source: str, destination: str, plan: AppendPlan) -> int:
    """Hard-link every file of the old set that the append leaves as it is into
    ``destination``, which may be a recycled directory (see `atomic_path`): of what it holds,
    only links to those very files are kept, everything else is removed."""
    return _link_folder(source, destination, "", plan)


def _link_folder(source: str, destination: str, relative: str, plan: AppendPlan) -> int:
    unchanged: dict[str, os.DirEntry[str]] = {}
    folders: list[str] = []
    with os.scandir(source) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.name)
            elif not _changes(plan, relative, entry.name):
                unchanged[entry.name] = entry
    kept = _emptied((source, destination), unchanged, set(folders))
    for name, entry in unchanged.items():
        if name not in kept:
            _link(entry.path, os.path.join(destination, name))
    count = len(unchanged)
    for name in folders:
        inner = f"{relative}/{name}" if relative else name
        into = os.path.join(destination, name)
        count += _link_folder(os.path.join(source, name), into, inner, plan)
    return count


def _emptied(
    folders: tuple[str, str], unchanged: Mapping[str, os.DirEntry[str]], inner: set[str]
) -> set[str]:
    """Create ``destination`` (of ``folders``: the source folder and it) or remove from it
    every name but the links to ``unchanged`` files and the ``inner`` folders (the names kept
    are returned). Links are told by inode number, which listing a folder gives without a
    system call per file, within one filesystem (checked once per folder)."""
    source, destination = folders
    try:
        entries = list(os.scandir(destination))
    except FileNotFoundError:
        os.mkdir(destination)
        return set()
    device = os.stat(source).st_dev == os.stat(destination).st_dev
    kept = set()
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if entry.name not in inner:
                shutil.rmtree(entry.path)
            continue
        linked = unchanged.get(entry.name)
        if device and linked is not None and entry.inode() == linked.inode():
            kept.add(entry.name)
        else:
            os.unlink(entry.path)
    return kept


def _changes(plan: AppendPlan, folder: str, name: str) -> bool:
    """Whether the append writes file ``name`` of array directory ``folder`` anew."""
    if not folder and name in (".zmetadata", SOURCES_FILE):
        return True
    record = _RECORD.fullmatch(name)
    if record is None:
        return False
    if folder in plan.rewritten:
        return True
    first = plan.grown.get(folder)
    return first is not None and int(record[1]) >= first


def _link(source: str, destination: str) -> None:
    """A hard link; a copy where the filesystem has none."""
    try:
        os.link(source, destination)
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        shutil.copy2(source, destination)


def _write_changed(plan: AppendPlan, source: str, root: str, record_size: int) -> int:
    """Write the changed and new record files into ``root`` (an append's few in this
    thread, where handing them to threads would cost more than it saves)."""
    arrays = [(path, plan.grown.get(path, 0)) for path in (*plan.rewritten, *plan.grown)]
    count = sum(_record_count(plan, path, first, record_size) for path, first in arrays)
    with contextlib.ExitStack() as stack:
        pool = None if count <= _THREADS else stack.enter_context(ThreadPoolExecutor(_THREADS))
        return sum(
            _write_array(plan, (source, root), path, first, record_size, pool)
            for path, first in arrays
        )


def _record_count(plan: AppendPlan, path: str, first: int, record_size: int) -> int:
    array = plan.group[path]
    assert not isinstance(array, RefGroup)
    return max(0, -(-array.manifest.nchunks // record_size) - first)


def _write_array(
    plan: AppendPlan,
    roots: tuple[str, str],
    path: str,
    first: int,
    record_size: int,
    pool: ThreadPoolExecutor | None,
) -> int:
    """Write ``path``'s record files from ``first`` on into the new set (``roots``: the old
    set's directory and the new one's)."""
    array = plan.group[path]
    assert not isinstance(array, RefGroup)
    if not array.manifest.nchunks:
        return 0
    old, new = (os.path.join(root, *path.split("/")) for root in roots)
    os.makedirs(new, exist_ok=True)
    extended = _extend_last(plan.appended.get(path), old, new, first, record_size)
    return extended + write_records(pool, _create, new, array, record_size, first + extended)


def _extend_last(
    appended: AppendedSource | None, old: str, new: str, first: int, record_size: int
) -> int:
    """Write the partial last record file ``first`` of a growing array as its existing
    rows, copied, and its new ones (1); 0 where the general path writes it."""
    if appended is None or not appended.old % record_size:
        return 0
    block = appended.new_rows(first)
    entries = EntrySlice(
        block.start, block.paths, block.path_id, block.offset, block.length, block.inlined
    )
    name = record_file_name(first)
    rows = appended.old - first * record_size
    table = extended_record(os.path.join(old, name), rows, record_table(entries))
    if table is None:
        return 0
    _create(os.path.join(new, name), encode_record(table))
    return 1


def _create(path: str, data: bytes) -> None:
    """Write a new file: never one linked from the old set (writing through the link would
    change the old set). Not flushed with fsync, like every record file `write_parquet`
    writes: a kill leaves the old set or the new one, a power cut may not."""
    with open(path, "xb") as file:
        file.write(data)


# -- the whole set ----------------------------------------------------------------------------


def _rewrite(
    group: RefGroup,
    location: Location,
    target: str,
    how: tuple[list[str], str, int | None, Mapping[str, Any] | None],
    reason: str,
    durable: bool,
    seen: object,
) -> AppendOutcome:
    """Combine the whole existing set with ``group`` and write the result over it (``how``:
    the URLs for messages, the dimension, the record size, the storage options; ``seen``:
    the set's version before it was read, off the local disk)."""
    from refzarr.combine import combine

    urls, append_dim, record_size, storage_options = how

    size = record_size
    appended = False
    try:
        existing = read(target, storage_options)
    except SourceNotFoundError:
        combined, reason = group, "no set at the target yet"
    else:
        appended = True
        combined = combine(
            [existing, group],
            concat_dims=[append_dim],
            urls=urls,
            storage_options=storage_options,
        )
        if size is None:
            size = _record_size_of(location)
    require_regular_grids(combined)  # before any output exists: no partial reference set
    size = size or DEFAULT_RECORD_SIZE
    with atomic_path(location, directory=True, version=seen) as temporary:
        write_parquet(combined, location.fs, temporary, record_size=size)
        if durable and location.is_local:
            flush_tree(temporary)
    result = written_result(
        group, target, "parquet", written=combined, append_dim=append_dim, appended=appended
    )
    return AppendOutcome(False, result, reason)


def _record_size_of(location: Location) -> int | None:
    """The existing set's record size (None when it is no Parquet set)."""
    try:
        return load_zmetadata(location).record_size
    except (RefzarrError, OSError):
        return None
