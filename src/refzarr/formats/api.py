"""The public reading and writing entry points: `read`, `expand_references`, `write`."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Literal

from refzarr.errors import RefFormatError, RefzarrError, SourceNotFoundError
from refzarr.formats.atomic import atomic_path, flush_tree, set_version, write_atomic
from refzarr.formats.source import (
    Compression,
    Location,
    compression_from_suffix,
    decompress,
    detect_format,
    locate,
    looks_like_json,
)
from refzarr.formats.target_lock import DEFAULT_LOCK_TIMEOUT, target_lock
from refzarr.formats.target_lock import lock_timeout as _lock_timeout
from refzarr.formats.written import WriteResult, written_result
from refzarr.model.group import RefGroup
from refzarr.model.hierarchy import require_regular_grids
from refzarr.model.kerchunk import expand_dict, group_from_kerchunk

if TYPE_CHECKING:
    from refzarr.scan.base import Probe

__all__ = [
    "DEFAULT_RECORD_SIZE",
    "WriteResult",
    "expand_references",
    "format_from_suffix",
    "read",
    "source_given_error",
    "write",
]

DEFAULT_RECORD_SIZE = 100_000
"""References per Parquet record file (fsspec's default is 10,000; larger files mean fewer
requests and smaller metadata while one file stays a few megabytes)."""

Source = str | os.PathLike[str] | Mapping[str, Any]


def read(
    source: Source,
    storage_options: Mapping[str, Any] | None = None,
    *,
    target: str | None = None,
) -> RefGroup:
    """Read a reference set (kerchunk JSON v0/v1, compressed JSON, Parquet, or a dict).

    Parameters
    ----------
    source
        A path or fsspec URL of a JSON file (optionally zstd/gzip-compressed) or a Parquet
        reference directory, or an in-memory reference dict.
    storage_options
        fsspec options for the filesystem ``source`` lives on.
    target
        URL for references whose URL is null (``[null, offset, length]``).

    Returns
    -------
    RefGroup
        The Zarr hierarchy the references describe. Parquet manifests load lazily, one record
        file at a time.

    Raises
    ------
    RefFormatError
        The reference set is malformed or does not describe a Zarr hierarchy.
    SourceNotFoundError
        ``source`` does not exist.
    """
    # format modules are loaded on first use, each only for its format (the Parquet one
    # imports pyarrow.parquet), so `import refzarr` stays light
    if isinstance(source, Mapping):
        with _named_failures("references"):
            return group_from_kerchunk(source, target=target)
    location = locate(source, storage_options)
    with _stores_named(location), _named_failures(location.shown):
        return _read_located(location, target)


def _read_located(location: Location, target: str | None) -> RefGroup:
    found, data = detect_format(location)
    if found == "parquet":
        from refzarr.formats.parquet import read as parquet_read

        zmeta = parquet_read.load_zmetadata(location, data)  # read once (HTTP: to tell)
        return parquet_read.read_parquet(location, target=target, zmeta=zmeta)
    from refzarr.formats.kerchunk_json import read as json_read

    data = decompress(_reference_bytes(location, data), shown=location.shown)
    return json_read.group_from_json(data, target=target, where=location.shown)


def _reference_bytes(location: Location, data: bytes) -> bytes:
    """``data``, unless it is plainly a file refzarr scans (a netCDF, TIFF, GRIB, ... given
    where a reference set was expected): then `source_given_error` says so."""
    if looks_like_json(data):
        return data
    from refzarr.scan.base import HEAD_BYTES, Probe

    head = data[: 8 * HEAD_BYTES]
    error = source_given_error(Probe(location.shown, head, lambda at, n: head[at : at + n]))
    if error is not None:
        raise _SourceFileGiven(str(error))
    return data


class _SourceFileGiven(RefFormatError):
    """`source_given_error` for a file whose first bytes were read: `_stores_named` need not
    ask whether it is a directory (over S3 a listing)."""


_STORE_KEYS = frozenset({".zgroup", ".zarray", "zarr.json"})
"""A Zarr store's own metadata files: a Parquet reference set has ``.zmetadata`` only."""


def source_given_error(probe: Probe) -> RefFormatError | None:
    """When ``probe`` (a file's first bytes or a directory's entries) is a source refzarr
    scans (a netCDF, TIFF, GRIB, ... file or a Zarr store) given where a reference set was
    expected: the `RefFormatError` naming its format and the scan to run; else None.

    Only the scanners' detectors are consulted (no scanner is imported). A directory holding
    ``.zmetadata`` but no other Zarr metadata is a Parquet reference set's shape: None.
    """
    from refzarr.errors import ScanError
    from refzarr.scan.detect import detect_probe

    if probe.is_directory and _STORE_KEYS.isdisjoint(probe.listing):
        return None
    try:
        found = detect_probe(probe)
    except (ScanError, SourceNotFoundError):
        return None
    shown, kind = probe.url, "store" if probe.is_directory else "file"
    title = found.title.removesuffix(" store")
    return RefFormatError(
        f"{shown} is not a reference set but a {title} {kind}: scan it first "
        f"(group = refzarr.scan({shown!r}); refzarr.open_dataset(group) reads it, "
        f"refzarr.write(group, 'refs.json') keeps its references; or `refzarr scan "
        f"{shown} -o refs.json`)"
    )


@contextmanager
def _stores_named(location: Location) -> Iterator[None]:
    """A `RefFormatError` raised reading the directory at ``location`` becomes
    `source_given_error`'s when the directory is a Zarr store (given by mistake)."""
    try:
        yield
    except _SourceFileGiven:
        raise
    except RefFormatError as exc:
        error = _store_given(location)
        if error is None:
            raise
        raise error from exc


def _store_given(location: Location) -> RefFormatError | None:
    from refzarr.scan.detect import directory_probe

    try:
        if not location.ask("is it a directory", lambda: location.fs.isdir(location.path)):
            return None
        probe = location.ask(
            "list it", lambda: directory_probe(location.fs, location.path, location.shown)
        )
    except (RefzarrError, OSError):
        return None
    return source_given_error(probe)


def expand_references(
    source: Source,
    storage_options: Mapping[str, Any] | None = None,
    *,
    target: str | None = None,
) -> dict[str, Any]:
    """Any reference set in its Version 0 form, whether or not it describes Zarr.

    Templates are rendered and ``gen`` generated; ``base64:`` values become bytes, other text
    values stay str, JSON-object values stay dicts; references are ``[url]`` or
    ``[url, offset, length]`` lists (null URLs replaced by ``target`` when given).
    """
    # format modules import pyarrow: loaded on first use, so `import refzarr` stays light
    from refzarr.formats.kerchunk_json import read as json_read
    from refzarr.formats.parquet import read as parquet_read

    if isinstance(source, Mapping):
        where = "references"
        with _named_failures(where):
            refs = expand_dict(source)
    else:
        location = locate(source, storage_options)
        where = location.shown
        with _stores_named(location), _named_failures(where):
            found, data = detect_format(location)
            if found == "parquet":
                refs = parquet_read.expand_parquet(location, data)
            else:
                data = decompress(_reference_bytes(location, data), shown=where)
                refs = expand_dict(json_read.load_json(data, where=where))
    with _named_failures(where):
        return json_read.normalise_v0(refs, target=target, where=where)


@contextmanager
def _named_failures(where: str) -> Iterator[None]:
    """Errors that are not refzarr's (a JSON nested too deep, an integer of 5,000 digits)
    become a `RefFormatError` naming the reference set."""
    try:
        yield
    except RefzarrError:
        raise
    except RecursionError as exc:
        raise RefFormatError(f"{where}: nested too deeply to be a reference set") from exc
    except (ValueError, OverflowError, MemoryError) as exc:
        raise RefFormatError(
            f"{where}: not a valid reference set: {type(exc).__name__}: {exc}"
        ) from exc


def write(
    group: RefGroup,
    target: str | os.PathLike[str],
    *,
    format: Literal["json", "parquet"] | None = None,
    compression: Compression | Literal["infer"] = "infer",
    version: Literal[0, 1] = 0,
    record_size: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    append_dim: str | None = None,
    durable: bool = False,
    lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
) -> WriteResult:
    """Write a reference set atomically (temporary name, then rename).

    Parameters
    ----------
    group
        What to write.
    target
        Path or fsspec URL. The format follows the suffix: ``.json`` (``.json.zst``,
        ``.json.gz`` compressed) or ``.parq`` / ``.parquet`` (a directory), unless ``format``
        is given.
    format
        ``"json"`` (kerchunk JSON) or ``"parquet"`` (fsspec's Parquet reference layout).
    compression
        JSON only: ``"zstd"``, ``"gzip"`` or None; ``"infer"`` follows the suffix.
    version
        JSON only: 0 (default, every reader understands it) or 1 (URL prefixes factored into
        ``templates``).
    record_size
        Parquet only: references per record file; None (default) keeps the existing set's
        when appending, else `DEFAULT_RECORD_SIZE`.
    storage_options
        fsspec options for the target filesystem (and, when appending, its sources).
    append_dim
        Append ``group`` to the reference set already at ``target`` along this dimension:
        the two are combined exactly as `refzarr.combine` combines files (dtypes, codecs,
        chunking, coordinates, scale factors, duplicate coordinate values are checked) and
        the result replaces the old set atomically; on any failure the old set is left as it
        was. A JSON set is rewritten whole. A local Parquet set whose arrays along
        ``append_dim`` all have it as their leading dimension gets only its changed record
        files written (each growing array's last one and new ones, the coordinate,
        ``.zmetadata``): the cost grows with the new data, not with the existing set;
        otherwise it is rewritten whole (see docs/formats.md, "Appending"). A target that
        does not exist yet is written as a new set.
    durable
        Local Parquet sets: flush (``fsync``) every file and directory of the new set to
        disk before it replaces the old one, so that it survives a power cut. Without it
        the files are left to the operating system (a kill at any moment still leaves the
        old set or the new one) and an append does not flush the rename either: after a
        power cut the target may hold the old set. JSON files are always flushed.
    lock_timeout
        Local targets: seconds to wait at most while another writer of the same set (an
        append, a refresh, a write's exchange) holds its lock (default an hour; None: no
        limit). See docs/formats.md, "Writers at the same time".

    Returns
    -------
    WriteResult
        What was written: the target, the format, the set's dimension lengths after the
        write (an append's new length along ``append_dim``), the number of chunk references
        of ``group``, and whether it was appended to an existing set. Computed from what
        was written (nothing is read back).

    Raises
    ------
    UnsupportedFeatureError
        When an array's chunk grid is irregular (kerchunk formats need chunks of one length
        along each axis); raised before anything is written. Read such a group with
        `refzarr.open_dataset` instead.
    IncompatibleError
        When appending data that does not fit the existing set (names what differs).
    ConcurrentWriteError
        When another writer held the set's lock longer than ``lock_timeout`` (nothing
        written), or replaced a set on an object store while this append read it.
    """
    with _lock_timeout(lock_timeout):
        return _write(
            group,
            target,
            format=format,
            compression=compression,
            version=version,
            record_size=record_size,
            storage_options=storage_options,
            append_dim=append_dim,
            durable=durable,
        )


def replace_read_set(
    group: RefGroup,
    target: str | os.PathLike[str],
    seen: object,
    *,
    lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT,
    **how: Any,
) -> WriteResult:
    """`write` (``how``: its arguments) of a whole set made from the set read at ``target``:
    on a filesystem that locks nothing, `ConcurrentWriteError` instead of replacing it when
    it is no longer the version ``seen`` (`set_version`, taken before reading it). Local
    writers hold the target's lock from before reading it instead (``seen`` None)."""
    with _lock_timeout(lock_timeout):
        return _write(group, target, **how, seen=seen)


def _write(
    group: RefGroup,
    target: str | os.PathLike[str],
    *,
    format: Literal["json", "parquet"] | None = None,
    compression: Compression | Literal["infer"] = "infer",
    version: Literal[0, 1] = 0,
    record_size: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    append_dim: str | None = None,
    durable: bool = False,
    seen: object = None,
) -> WriteResult:
    """`write` with the lock timeout set (``seen``: `replace_read_set`)."""
    # format modules import pyarrow: loaded on first use, so `import refzarr` stays light
    from refzarr.formats.kerchunk_json import write as json_write

    if not isinstance(group, RefGroup):
        raise TypeError(f"write() takes a RefGroup, got {type(group).__name__}")
    if record_size is not None and record_size < 1:
        raise ValueError(f"record_size must be positive, got {record_size}")
    location = locate(target, storage_options)
    chosen = format or format_from_suffix(location.path)
    if append_dim is not None:
        _check_append_dim(append_dim)
    if append_dim is not None and chosen == "parquet":
        from refzarr.formats.parquet.append import append_parquet

        outcome = append_parquet(
            group,
            location,
            target=os.fspath(target),
            append_dim=append_dim,
            record_size=record_size,
            storage_options=storage_options,
            durable=durable,
        )
        return outcome.result
    if chosen == "parquet":
        _write_parquet(group, location, record_size or DEFAULT_RECORD_SIZE, durable, seen)
        return written_result(group, os.fspath(target), "parquet")
    if chosen != "json":
        raise ValueError(f"format must be 'json' or 'parquet', got {chosen!r}")
    if version not in (0, 1):
        raise ValueError(f"version must be 0 or 1, got {version!r}")
    # an append reads the set and replaces it: other local writers of it wait meanwhile
    whole, appended = group, False
    with target_lock(location) if append_dim is not None else nullcontext():
        if append_dim is not None:
            seen = None if location.is_local else set_version(location, directory=False)
            whole, appended = _appended(group, os.fspath(target), append_dim, storage_options)
        require_regular_grids(whole)  # before any output exists: no partial reference set
        codec = _json_compression(location.path, compression)
        parts = json_write.render_parts(whole, version=version)
        write_atomic(location, json_write.compress_parts(parts, codec), version=seen)
    return written_result(
        group,
        os.fspath(target),
        "json",
        written=whole,
        append_dim=append_dim,
        appended=appended,
    )


def _write_parquet(
    group: RefGroup, location: Location, record_size: int, durable: bool, seen: object = None
) -> None:
    """Write ``group`` as a whole Parquet set at ``location`` (``seen``: `replace_read_set`)."""
    from refzarr.formats.parquet import write as parquet_write

    require_regular_grids(group)  # before any output exists: no partial reference set
    with atomic_path(location, directory=True, version=seen) as temporary:
        parquet_write.write_parquet(group, location.fs, temporary, record_size=record_size)
        if durable and location.is_local:
            flush_tree(temporary)


def _appended(
    group: RefGroup,
    target: str,
    append_dim: str,
    storage_options: Mapping[str, Any] | None,
) -> tuple[RefGroup, bool]:
    """The existing set at ``target`` with ``group`` appended along ``append_dim`` and True
    (only ``group`` and False when nothing exists there yet)."""
    from refzarr.combine import combine

    try:
        existing = read(target, storage_options)
    except SourceNotFoundError:
        return group, False
    combined = combine(
        [existing, group],
        concat_dims=[append_dim],
        urls=[f"{target} (existing set)", "the appended data"],
        storage_options=storage_options,
    )
    return combined, True


def _check_append_dim(append_dim: object) -> None:
    if not isinstance(append_dim, str) or not append_dim:
        raise TypeError(f"append_dim must be a dimension name, got {append_dim!r}")


def _json_compression(path: str, compression: object) -> Compression:
    if compression == "infer":
        return compression_from_suffix(path)
    if compression in ("zstd", "gzip", None):
        return compression
    raise ValueError(f"compression must be 'zstd', 'gzip', None or 'infer', got {compression!r}")


def format_from_suffix(path: str) -> Literal["json", "parquet"]:
    """The reference format a target's suffix names; RefFormatError when it names none."""
    lowered = path.lower().rstrip("/")
    if lowered.endswith((".parq", ".parquet")):
        return "parquet"
    if lowered.endswith((".json", ".json.zst", ".json.zstd", ".json.gz")):
        return "json"
    raise RefFormatError(
        f"{path}: cannot tell the reference format from the suffix; use .json, .json.zst, "
        ".json.gz, .parq or .parquet, or pass format='json' / format='parquet'"
    )
