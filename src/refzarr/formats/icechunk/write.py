"""`to_icechunk`: a reference group into a writable Icechunk session, as Zarr v3 arrays whose
chunks are virtual references to the sources (inlined chunks become native chunks).

Each array keeps its numcodecs pipeline unchanged (every stage as a ``refzarr.numcodecs`` Zarr
v3 codec after a ``bytes`` serializer), so its chunks decode exactly as through the kerchunk
outputs. The commit is the caller's: a failure leaves the session to be discarded.
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

import numpy as np

from refzarr.errors import UnsupportedFeatureError
from refzarr.formats.written import ArrayShape, WriteResult, written_result
from refzarr.model import WHOLE_FILE, ChunkManifest, RefArray, RefGroup
from refzarr.model.attr_types import LAYOUT_ATTR, TYPES_ATTR
from refzarr.model.frozen import thaw_json
from refzarr.model.hierarchy import empty_chunk_error, refuse_empty_chunks, require_regular_grids
from refzarr.sources.record import ScanRecord
from refzarr.sources.state import local_path

__all__ = ["to_icechunk"]

FILL_VALUE_ATTR = "_FillValue"


def to_icechunk(
    group: RefGroup,
    store: Any,
    *,
    path: str = "",
    append_dim: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> WriteResult:
    """Write ``group`` into the Icechunk store of a writable session (not committed).

    Parameters
    ----------
    group
        The reference group (a scan, a combination, a reference set read back).
    store
        ``session.store`` of a writable Icechunk session whose repository has a virtual chunk
        container (and, when reading, authorised credentials) for every URL prefix the group
        refers to.
    path
        Where in the store the group goes (default: its root).
    append_dim
        Append to the arrays already in the store along this dimension instead of replacing
        them: arrays with the dimension grow (their new chunks follow the stored ones), the
        others must be identical to the stored ones, coordinate values along it must be new;
        everything is checked before anything is written. Commit each append to keep every
        version readable. A store with no group at ``path`` (a new repository) gets
        ``group`` written as it is.
    storage_options
        fsspec options for the group's sources (read to compare values when appending).

    Returns
    -------
    WriteResult
        What was written (as `refzarr.write` says it; ``target`` is ``path``): the
        dimension lengths of ``group``'s arrays in the store after the write, the number of
        chunk references of ``group``, whether it was appended to a group in the store.

    Notes
    -----
    The group's record of its sources (``group.sources``) is stored in the root attribute
    ``_nc_refzarr_sources`` (hidden by xarray), with where each scan's chunks are
    (``_nc_refzarr_regions``); an append merges them. `refzarr.check_sources` and
    `refzarr.refresh` read them.

    Every virtual chunk carries its source file's checksum as the scan recorded it
    (``group.sources``): the object's ETag where the storage gave one, else its modification
    time rounded up to the second. Icechunk then refuses to read a chunk whose file changed
    since the scan (not merely since this write). A group without a record (read from a set
    written by another tool) is written without checksums.

    Raises
    ------
    UnsupportedFeatureError
        For an irregular chunk grid, a dtype Zarr v3 cannot hold, or a reference without a
        protocol Icechunk can follow; raised before anything is written for grids. When
        appending, for a stored array that ends inside a chunk along ``append_dim``.
        For a chunk of 0 bytes (a reference of length 0, an empty file referenced whole, or
        0 inlined bytes): it can only fail when read, and Icechunk 2.2+ refuses to store it;
        raised before anything is written (but for empty files referenced whole).
    IncompatibleError
        When appended data does not fit the store (names the array and what differs).
    """
    import zarr

    from refzarr.sources.record import read_record

    require_regular_grids(group)
    refuse_empty_chunks(group, ICECHUNK_REFUSES, path)
    scans = read_record(group)  # once: thousands of scans in a combined group
    checksums = scan_checksums(scans)
    if append_dim is not None and _holds_group(store, path):
        growths = _append(group, store, path, append_dim, storage_options, checksums, scans)
        return written_result(
            group,
            path,
            "icechunk",
            written=_grown_shapes(group, path, growths),
            append_dim=append_dim,
            appended=True,
        )
    from refzarr.formats.icechunk.append import flat_arrays
    from refzarr.formats.icechunk.record import record_attributes
    from refzarr.formats.icechunk.rootdoc import add_attributes

    attributes = _group_attributes(group, path or "/")
    record = record_attributes(group, flat_arrays(group, path), None, scans)
    zarr.create_group(store, path=path, attributes=attributes, overwrite=True)
    located: dict[str, str] = {}  # the arrays of a file share its location: found once
    for member_path, node in _walk(group, path):
        if isinstance(node, RefGroup):
            zarr.create_group(
                store, path=member_path, attributes=_group_attributes(node, member_path)
            )
        else:
            _write_array(store, member_path, node, checksums, located)
    if record:  # last: creating each member below the root reads the root's document
        add_attributes(store, path, record, path or "/")
    return written_result(group, path, "icechunk", append_dim=append_dim)


def _grown_shapes(group: RefGroup, path: str, growths: list[Any]) -> list[ArrayShape]:
    """The arrays of ``group`` (paths below ``path``) with their shapes after the append."""
    from refzarr.formats.icechunk.append import flat_arrays

    grown = {growth.path: growth.new_shape for growth in growths}
    return [
        (at, tuple(array.meta.dimension_names or ()), grown.get(at, array.meta.shape))
        for at, array in flat_arrays(group, path).items()
    ]


def _holds_group(store: Any, path: str) -> bool:
    """Whether the store holds a group at ``path`` (an append to nothing writes anew)."""
    import zarr

    from refzarr.formats.icechunk.rootdoc import holds_group

    if holds_group(store, path):  # the usual answer, without zarr reading the whole record
        return True
    try:
        zarr.open_group(store, path=path, mode="r")
    except FileNotFoundError:  # zarr's GroupNotFoundError
        return False
    return True


def _append(
    group: RefGroup,
    store: Any,
    path: str,
    append_dim: str,
    storage_options: Mapping[str, Any] | None,
    checksums: Checksums,
    scans: list[Any],
) -> list[Any]:
    """Append ``group`` to the group at ``path``; the arrays grown (`Growth`)."""
    import zarr

    from refzarr.formats.icechunk.append import flat_arrays, plan_append

    growths = plan_append(store, flat_arrays(group, path), append_dim, storage_options)
    located: dict[str, str] = {}
    for growth in growths:
        stored = zarr.open_array(store, path=growth.path, mode="r+")
        before = stored.shape[growth.axis]
        stored.resize(growth.new_shape)
        if growth.values is not None:  # a loaded coordinate: its new values, written natively
            where = [slice(None)] * stored.ndim
            where[growth.axis] = slice(before, None)
            stored[tuple(where)] = growth.values
            continue
        shift = [0] * growth.array.meta.ndim
        shift[growth.axis] = growth.chunk_offset
        manifest = growth.array.manifest
        write_chunks(store, growth.path, manifest, checksums, tuple(shift), located)
    _append_record(store, path, group, growths, scans)  # last, as `to_icechunk` writes it
    return growths


def _append_record(
    store: Any, path: str, group: RefGroup, growths: list[Any], scans: list[Any]
) -> None:
    """The appended scans' record merged into the root group's (the regions of the arrays
    that grow, moved to where their new chunks go)."""
    from refzarr.formats.icechunk.record import merged_attributes, record_attributes
    from refzarr.formats.icechunk.rootdoc import read_group, write_group

    grown = {g.path: g.array for g in growths if g.values is None}
    shifts = {
        g.path: [g.chunk_offset if k == g.axis else 0 for k in range(g.array.meta.ndim)]
        for g in growths
    }
    added = record_attributes(group, grown, shifts, scans)
    if not added:
        return
    where = path or "/"
    document = read_group(store, path, where)
    attributes = document["attributes"]
    attributes.update(merged_attributes(attributes, added, where))
    write_group(store, path, document)


def _walk(group: RefGroup, prefix: str) -> Iterator[tuple[str, RefArray | RefGroup]]:
    for name, member in group.members.items():
        member_path = f"{prefix}/{name}" if prefix else name
        yield member_path, member
        if isinstance(member, RefGroup):
            yield from _walk(member, member_path)


def _write_array(
    store: Any, path: str, array: RefArray, checksums: Checksums, located: dict[str, str]
) -> None:
    import zarr

    meta = array.meta
    if meta.dtype.kind in "SUVO" or meta.dtype.fields is not None:
        raise UnsupportedFeatureError(
            f"array {path!r}: dtype {meta.dtype} (strings, structured or object) has no stable "
            "Zarr v3 representation, which Icechunk needs; leave the array out, or write JSON "
            "or Parquet references"
        )
    attributes = _attributes(meta.attributes, meta.fill_value, meta.dtype, path)
    try:
        zarr.create_array(
            store,
            name=path,
            shape=meta.shape,
            chunks=meta.chunks,
            dtype=meta.dtype.newbyteorder("="),  # Zarr v3 keeps the byte order in `bytes`
            fill_value=zarr_fill(meta.fill_value, meta.dtype),
            filters=_transposes(meta.order, meta.ndim),
            serializer=_serializer(meta.dtype),
            compressors=_stages(meta.codecs),
            dimension_names=meta.dimension_names,
            attributes=attributes,
            zarr_format=3,
            overwrite=True,
        )
    except (TypeError, ValueError, RuntimeError) as exc:  # IcechunkError is a ValueError
        raise UnsupportedFeatureError(
            f"array {path!r}: Zarr v3 (Icechunk) cannot hold it as refzarr describes it "
            f"(dtype {meta.dtype}): {exc}"
        ) from exc
    write_chunks(store, path, array.manifest, checksums, (), located)


def _serializer(dtype: np.dtype[Any]) -> Any:
    from zarr.codecs import BytesCodec

    if dtype.itemsize <= 1 or dtype.byteorder == "|":
        return BytesCodec(endian=None)
    big = dtype.byteorder == ">" or (dtype.byteorder == "=" and np.little_endian is False)
    return BytesCodec(endian="big" if big else "little")


def _transposes(order: str, ndim: int) -> tuple[Any, ...]:
    from zarr.codecs import TransposeCodec

    if order == "C" or ndim < 2:
        return ()
    return (TransposeCodec(order=tuple(reversed(range(ndim)))),)


def _stages(codecs: Any) -> tuple[Any, ...]:
    from refzarr.codecs.zarr3 import NumcodecsStage

    return tuple(NumcodecsStage(codec=thaw_json(c)) for c in codecs)


def zarr_fill(fill_value: Any, dtype: np.dtype[Any]) -> Any:
    """Zarr v3 needs a fill value: an undefined one becomes the dtype's zero (what Zarr v2
    readers fill with), never an attribute that would mask data."""
    if fill_value is not None:
        return fill_value
    return np.zeros((), dtype)[()]


def _group_attributes(group: RefGroup, where: str) -> dict[str, Any]:
    attributes = {k: v for k, v in group.attributes.items() if k != TYPES_ATTR}
    return _finite(attributes, where)


def _finite(attributes: Any, where: str) -> dict[str, Any]:
    """``attributes`` as a dict, refused when a value holds NaN or an infinity: Icechunk
    accepts only strict JSON, and writing them as text would change their type unseen."""
    out: dict[str, Any] = thaw_json(attributes)
    for name, value in out.items():
        if not _all_finite(value):
            raise UnsupportedFeatureError(
                f"{where!r}: attribute {name!r} = {value!r} holds NaN or infinity, which "
                "Icechunk's strict JSON cannot hold; write JSON or Parquet references, or "
                "drop the attribute first"
            )
    return out


def _all_finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_all_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_all_finite(v) for v in value.values())
    return True


def _attributes(
    attributes: Any, fill_value: Any, dtype: np.dtype[Any], path: str
) -> dict[str, Any]:
    """The array's attributes, with ``_FillValue`` as xarray's Zarr v3 backend reads it.

    The Zarr v2 ``fill_value`` of the kerchunk outputs is xarray's ``_FillValue``, unless the
    scan marked the array as following netCDF's rule (`TYPES_ATTR`: only a ``_FillValue``
    attribute masks). refzarr's attribute-type and source-layout records themselves are left
    out: Zarr v3 readers would show them.
    """
    netcdf_rule = TYPES_ATTR in attributes
    out = thaw_json(attributes)
    out.pop(TYPES_ATTR, None)
    out.pop(LAYOUT_ATTR, None)
    value = out.pop(FILL_VALUE_ATTR, None if netcdf_rule else fill_value)
    out = _finite(out, path)
    if value is None:
        return out
    if dtype.kind == "f":  # xarray keeps float fill values bit-exact, base64 of a float64
        out[FILL_VALUE_ATTR] = base64.standard_b64encode(struct.pack("<d", float(value))).decode()
    else:
        out[FILL_VALUE_ATTR] = value.item() if isinstance(value, np.generic) else value
    return out


def write_chunks(
    store: Any,
    path: str,
    manifest: ChunkManifest,
    checksums: Checksums,
    shift: tuple[int, ...] = (),
    located: dict[str, str] | None = None,
) -> None:
    """Every chunk of ``manifest`` into the store, at its index plus ``shift``, each with its
    source's checksum when the scan recorded one (`write_parts` of one part)."""
    write_parts(store, path, [(manifest, shift)], checksums, located)


ChunkPart = tuple[ChunkManifest, tuple[int, ...]]
"""A manifest, and where its chunk grid starts in the array's (``()``: at the origin)."""


def write_parts(
    store: Any,
    path: str,
    parts: Sequence[ChunkPart],
    checksums: Checksums,
    located: dict[str, str] | None = None,
) -> None:
    """The chunks of every part (regions that do not overlap) into the array at ``path``,
    each with its source's checksum when the scan recorded one: through Icechunk 2.x's
    ``set_virtual_refs_arr`` where the installed Icechunk has it and the chunks come in boxes
    (`refzarr.formats.icechunk.columns.arr_calls`), else in one ``set_virtual_refs`` call;
    inlined chunks as native chunks. ``located``: source URL -> Icechunk location, filled and
    reused across the caller's arrays."""
    from refzarr.formats.icechunk.columns import arr_calls

    grid, columns, sources, inlined = gathered_columns(parts, path, located)
    sums = [checksums.get(source, _NO_CHECKSUM) for source in sources]
    calls = None
    if getattr(store, "set_virtual_refs_arr", None) is not None:
        by_location = {
            url: etag if etag is not None else modified
            for url, (etag, modified) in zip(columns.urls, sums, strict=True)
        }
        calls = arr_calls(grid, columns, by_location)
    if calls is None or not _write_calls(store, path, calls):
        _write_specs(store, path, grid, columns, sums)
    for index, data in inlined.items():
        _set_native(store, path, index, data)


def gathered_columns(
    parts: Sequence[ChunkPart], path: str, located: dict[str, str] | None = None
) -> tuple[tuple[int, ...], Any, list[str], dict[tuple[int, ...], bytes]]:
    """The referenced chunks of every part as one `Columns` over a chunk grid holding each
    part where it goes (Icechunk locations, whole-file lengths resolved), the source URL of
    each location, and the inlined chunks by their index in that grid. numpy columns
    throughout: no Python work per chunk."""
    from refzarr.formats.icechunk.columns import Columns

    grid = _enclosing_grid(parts)
    sources: list[str] = []
    place: dict[str, int] = {}
    numbers, url_ids, offsets, lengths = [], [], [], []
    inlined: dict[tuple[int, ...], bytes] = {}
    for manifest, shift in parts:
        written = manifest.written_entries()
        ids = np.asarray(written.path_id)
        rows = np.flatnonzero(ids >= 0)
        for source in written.paths:
            if source not in place:
                place[source] = len(sources)
                sources.append(source)
        table = np.asarray([place[s] for s in written.paths] or [0], dtype=np.int64)
        chunk_numbers = np.asarray(written.numbers, dtype=np.int64)[rows]
        numbers.append(_moved(chunk_numbers, manifest.grid_shape, shift, grid))
        url_ids.append(table[ids[rows]])
        offsets.append(np.asarray(written.offset)[rows].astype(np.uint64))
        lengths.append(np.asarray(written.length)[rows].astype(np.uint64))
        inlined.update((_shifted(k, shift), data) for k, data in manifest.inlined.items())
    ids_all = np.concatenate(url_ids)
    located = {} if located is None else located
    for source in sources:
        if source not in located:
            located[source] = location(source, path)
    columns = Columns(
        np.concatenate(numbers),
        ids_all,
        [located[source] for source in sources],
        np.concatenate(offsets),
        _sized(np.concatenate(lengths), ids_all, sources, path),
    )
    return grid, columns, sources, inlined


def _enclosing_grid(parts: Sequence[ChunkPart]) -> tuple[int, ...]:
    """The smallest chunk grid holding every part's grid moved by its shift."""
    grids = [_shifted(m.grid_shape, shift) if shift else m.grid_shape for m, shift in parts]
    return tuple(max(sizes) for sizes in zip(*grids, strict=True))


def _moved(
    numbers: np.ndarray[Any, Any],
    grid: tuple[int, ...],
    shift: tuple[int, ...],
    to: tuple[int, ...],
) -> np.ndarray[Any, Any]:
    """Flat chunk ``numbers`` of ``grid``, as numbers of the grid ``to`` once moved by
    ``shift``."""
    if (not shift or not any(shift)) and grid == to:
        return numbers
    coords = np.unravel_index(numbers, grid)
    moved = tuple(c + s for c, s in zip(coords, shift or [0] * len(grid), strict=True))
    return np.asarray(np.ravel_multi_index(moved, to), dtype=np.int64)


def _sized(
    lengths: np.ndarray[Any, Any], ids: np.ndarray[Any, Any], sources: list[str], path: str
) -> np.ndarray[Any, Any]:
    """``lengths`` with each whole-file length replaced by its file's size (asked once per
    file)."""
    whole = lengths == np.uint64(int(WHOLE_FILE))
    if whole.any():
        sizes = {k: _size(sources[k], path) for k in np.unique(ids[whole]).tolist()}
        lengths[whole] = [sizes[k] for k in ids[whole].tolist()]
    return lengths


def _write_calls(store: Any, path: str, calls: Sequence[Any]) -> bool:
    """``calls`` through ``set_virtual_refs_arr``; False (nothing to undo: the chunk specs
    written next replace every chunk) when this Icechunk refuses the empty locations of a box
    with gaps (releases before 2.0's fix did)."""
    for call in calls:
        try:
            failed = store.set_virtual_refs_arr(
                path,
                list(call.chunk_grid_shape),
                call.locations,
                call.offsets,
                call.lengths,
                validate_containers=True,
                arr_offset=list(call.arr_offset) if call.arr_offset else None,
                checksum=call.checksum,
            )
        except ValueError:
            if call.has_gaps:
                return False
            raise
        if failed:
            corner = np.asarray(call.arr_offset or [0] * len(failed[0]), dtype=np.int64)
            at = np.asarray(failed[0], dtype=np.int64) - corner
            flat = int(np.ravel_multi_index(tuple(at), call.chunk_grid_shape)) if at.size else 0
            _no_container(path, call.locations[flat], len(failed))
    return True


def _write_specs(
    store: Any,
    path: str,
    grid: tuple[int, ...],
    columns: Any,
    sums: Sequence[tuple[str | None, datetime | None]],
) -> None:
    """``columns`` as `VirtualChunkSpec` objects in one ``set_virtual_refs`` call (Icechunk
    1.x's only way; 2.x's for chunks too scattered for boxes)."""
    from icechunk import VirtualChunkSpec

    count = int(columns.numbers.size)
    if not count:
        return
    if grid:
        indices = np.stack(np.unravel_index(columns.numbers, grid), axis=1).tolist()
    else:
        indices = [[] for _ in range(count)]
    urls, etags = columns.urls, [etag for etag, _ in sums]
    times = [modified for _, modified in sums]
    specs = [
        VirtualChunkSpec(
            index,
            urls[k],
            offset,
            length,
            etag_checksum=etags[k],
            last_updated_at_checksum=times[k],
        )
        for index, k, offset, length in zip(
            indices,
            columns.url_ids.tolist(),
            columns.offsets.tolist(),
            columns.lengths.tolist(),
            strict=True,
        )
    ]
    failed = store.set_virtual_refs(path, specs, validate_containers=True)
    if failed:
        _no_container(path, _location_of(specs, failed[0]), len(failed))


ICECHUNK_REFUSES = "Icechunk refuses it (2.2+)"


def _no_container(path: str, location: str, count: int) -> None:
    raise UnsupportedFeatureError(
        f"array {path!r}: the Icechunk repository has no virtual chunk container for "
        f"{location} ({count} chunks): add one for its URL prefix "
        "(icechunk.VirtualChunkContainer) and save the config"
    )


Checksums = Mapping[str, tuple[str | None, datetime | None]]
"""Source URL -> (ETag, last-modified time) to give Icechunk with each of its chunks."""

_NO_CHECKSUM: tuple[str | None, datetime | None] = (None, None)


def source_checksums(group: RefGroup) -> dict[str, tuple[str | None, datetime | None]]:
    """The checksum of every source file the group's record holds (`scan_checksums`)."""
    from refzarr.sources.record import read_record

    return scan_checksums(read_record(group))


def scan_checksums(scans: Iterable[ScanRecord]) -> dict[str, tuple[str | None, datetime | None]]:
    """The checksum of every file of ``scans``: its ETag where the storage gave one, else its
    modification time as the scan found it, rounded up to the second (Icechunk compares whole
    seconds: it refuses chunks of a file modified after it)."""
    out: dict[str, tuple[str | None, datetime | None]] = {}
    for scan in scans:
        for url, state in scan.files.items():
            modified = state.modified_at()
            if state.etag is not None:
                out[url] = (state.etag, None)
            elif modified is not None:
                whole = modified.replace(microsecond=0)
                out[url] = (None, whole + timedelta(seconds=1) if whole != modified else whole)
    return out


def _location_of(specs: list[Any], index: Any) -> str:
    wanted = list(index)
    return next((str(s.location) for s in specs if list(s.index) == wanted), "a source")


def _shifted(index: Any, shift: tuple[int, ...]) -> tuple[int, ...]:
    if not shift:
        return tuple(int(i) for i in index)
    return tuple(int(i) + s for i, s in zip(index, shift, strict=True))


def _set_native(store: Any, path: str, index: tuple[int, ...], data: bytes) -> None:
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    key = f"{path}/c/" + "/".join(str(i) for i in index) if index else f"{path}/c"
    sync(store.set(key, default_buffer_prototype().buffer.from_bytes(data)))


def absolute_url(url: str, path: str) -> str:
    """An absolute URL with a protocol, in fsspec's form; a local path (plain or ``file://``)
    names the file the system opens (`refzarr.sources.state.local_path`: ``link/..`` goes up
    from the link's target, as scanners reference it)."""
    if "://" in url and not url.startswith("file://"):
        return url
    if "://" not in url and ":" in url.split("/", 1)[0]:
        raise UnsupportedFeatureError(f"array {path!r}: reference URL {url!r} has no protocol")
    return "file://" + local_path(url)


def location(url: str, path: str) -> str:
    """The location Icechunk stores for a chunk of ``url``: its absolute URL with the file path
    or object key percent-encoded (Icechunk parses locations as URLs: a raw ``#``, ``?``,
    ``%``, space or non-ASCII letter would name another file or none). HTTP(S) URLs, already
    in URL form, are kept as they are."""
    absolute = absolute_url(url, path)
    protocol, _, rest = absolute.partition("://")
    if protocol in ("http", "https"):
        return absolute
    if protocol == "file":
        return "file://" + quote(rest, safe="/")
    host, slash, key = rest.partition("/")
    return f"{protocol}://{host}{slash}{quote(key, safe='/')}"


def _size(url: str, path: str) -> int:
    """The size of ``url``, referenced whole by chunks of ``path``; an empty file is refused
    (`refuse_empty_chunks`)."""
    import fsspec

    fs, file_path = fsspec.core.url_to_fs(absolute_url(url, path))
    size = int(fs.size(file_path))
    if size == 0:
        raise empty_chunk_error(
            path, "a chunk", f"the whole of {url}, an empty file", 1, ICECHUNK_REFUSES
        )
    return size
