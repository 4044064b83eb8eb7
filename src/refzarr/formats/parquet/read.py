"""fsspec's Parquet reference layout (``.zmetadata`` + ``<array>/refs.<i>.parq``) -> `RefGroup`.

``.zmetadata`` holds ``{"metadata": {key: JSON object or text}, "record_size": int}``; opening
a reference set reads only that file (its record of sources, a file of its own:
`refzarr.formats.parquet.sources_file`, is read when first used). Each array's manifest
loads lazily, one record file per block, when a chunk reference is first asked for. Chunk
keys stored in ``metadata`` (the spec reserves that for small arrays) are inline data: the
JSON text of the value, as fsspec reads it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import RefFormatError, SourceNotFoundError
from refzarr.formats.parquet.records import RecordColumns
from refzarr.formats.parquet.source import (
    COMPLETE_KEY,
    ParquetManifestSource,
    check_record,
    whole_file,
)
from refzarr.formats.parquet.sources_file import SOURCES_KEY, deferred_sources, parse_entry
from refzarr.formats.source import Location
from refzarr.model.frozen import DeferredJSON
from refzarr.model.group import RefGroup
from refzarr.model.hierarchy import (
    SOURCES_ATTR,
    Hierarchy,
    assemble_group,
    chunk_key,
    is_metadata_key,
    parse_hierarchy,
    parse_metadata_value,
)
from refzarr.model.kerchunk import metadata_text
from refzarr.model.manifest import ChunkManifest

__all__ = ["ZMetadata", "expand_parquet", "load_zmetadata", "read_parquet"]


@dataclass(frozen=True, slots=True)
class ZMetadata:
    """The parsed ``.zmetadata`` of a Parquet reference set."""

    metadata: dict[str, Any]
    record_size: int
    where: str
    every_record_written: bool = False
    sources_digest: str | None = None
    """The digest of the record of sources in `SOURCES_FILE` (None: the record, if any, is
    the root attribute ``_nc_refzarr_sources``, as in sets written before that file)."""


def read_parquet(
    location: Location, *, target: str | None, zmeta: ZMetadata | None = None
) -> RefGroup:
    """The `RefGroup` of a Parquet reference set; manifests load one record file at a time.

    Parameters
    ----------
    location
        The reference set's directory.
    target
        URL for rows with a null path but a byte range.
    zmeta
        ``.zmetadata`` when already loaded (`load_zmetadata`).

    Returns
    -------
    RefGroup
        The hierarchy ``.zmetadata`` describes; reading it touches no record file.

    Raises
    ------
    RefFormatError
        ``.zmetadata`` is malformed (record files are checked when loaded).
    SourceNotFoundError
        ``location`` does not exist.
    """
    zmeta = zmeta or load_zmetadata(location)
    docs = {k: v for k, v in zmeta.metadata.items() if is_metadata_key(k)}
    _defer_sources(location, zmeta, docs)
    hierarchy = parse_hierarchy(docs, where=zmeta.where)
    overrides = _chunks_in_metadata(zmeta, hierarchy)
    manifests = {}
    for path, meta in hierarchy.arrays.items():
        source = _source(location, path, zmeta, meta.grid_shape, target, overrides.get(path))
        manifests[path] = ChunkManifest.lazy(meta.grid_shape, source)
    return assemble_group(hierarchy, manifests, where=zmeta.where)


def _defer_sources(location: Location, zmeta: ZMetadata, docs: dict[str, Any]) -> None:
    """The root's record of sources in ``docs`` (its ``.zattrs``, parsed) as a `DeferredJSON`:
    read from `SOURCES_FILE` when first used, or, in sets written before that file, frozen
    when first used (``.zmetadata`` was parsed here: its objects are this reader's)."""
    digest = zmeta.sources_digest
    value = docs.get(".zattrs")
    if digest is None and not isinstance(value, dict):
        return  # no record, or the text a writer other than refzarr stored
    attrs = {} if value is None else parse_metadata_value(".zattrs", value, where=zmeta.where)
    if digest is not None:
        attrs[SOURCES_ATTR] = deferred_sources(location, digest)
    elif type(attrs.get(SOURCES_ATTR)) is dict:
        attrs[SOURCES_ATTR] = DeferredJSON(document=attrs[SOURCES_ATTR])
    else:
        return
    docs[".zattrs"] = attrs


def expand_parquet(location: Location, zmetadata: bytes = b"") -> dict[str, Any]:
    """Every key of a Parquet reference set in Version 0 form (loads every record file).

    Parameters
    ----------
    location
        The reference set's directory.
    zmetadata
        The bytes of its ``.zmetadata`` when already read (`load_zmetadata`), else b"".

    Returns
    -------
    dict
        Metadata keys -> their values as stored (JSON objects or text); chunk keys (``.``- or
        ``/``-separated as the array's ``.zarray`` says) -> ``[url]`` or
        ``[url, offset, length]`` (``url`` None for a null path with a byte range) or inline
        bytes. Chunks never written have no key.

    Raises
    ------
    RefFormatError
        ``.zmetadata`` or a record file is malformed.
    """
    zmeta = load_zmetadata(location, zmetadata)
    out: dict[str, Any] = {
        key: value if is_metadata_key(key) else metadata_text(value).encode("utf-8")
        for key, value in zmeta.metadata.items()
    }
    if zmeta.sources_digest is not None:  # back where sets without SOURCES_FILE hold it
        attrs = parse_metadata_value(".zattrs", out.get(".zattrs", {}), where=zmeta.where)
        record = deferred_sources(location, zmeta.sources_digest)
        out[".zattrs"] = {**attrs, SOURCES_ATTR: dict(record.raw())}
    for key, value in zmeta.metadata.items():
        path, _, name = key.rpartition("/")
        if name != ".zarray" or not path:
            continue
        zarray = parse_metadata_value(key, value, where=zmeta.where)
        grid, separator = _grid(zarray, f"{zmeta.where}: key {key!r}")
        for chunk, entry in _expand_array(location, path, zmeta, grid, separator).items():
            out.setdefault(chunk, entry)
    return out


def load_zmetadata(location: Location, data: bytes = b"") -> ZMetadata:
    """Read and check ``.zmetadata``.

    Parameters
    ----------
    location
        The reference set's directory.
    data
        The bytes of its ``.zmetadata`` when already read (`detect_format`), else b"".

    Returns
    -------
    ZMetadata
        The ``metadata`` mapping (values not yet parsed) and ``record_size``.

    Raises
    ------
    RefFormatError
        The file is not JSON, or lacks a ``metadata`` object or a positive ``record_size``;
        or ``location`` is a directory without ``.zmetadata``.
    SourceNotFoundError
        ``location`` does not exist.
    """
    where = f"{location.shown.rstrip('/')}/.zmetadata"
    data = data or _zmetadata_bytes(location, where)
    try:
        document = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RefFormatError(f"{where}: not valid JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise RefFormatError(f"{where}: must be a JSON object with 'metadata' and 'record_size'")
    metadata, record_size = document.get("metadata"), document.get("record_size")
    if not isinstance(metadata, dict):
        raise RefFormatError(f"{where}: 'metadata' must be a JSON object, got {metadata!r:.80}")
    if isinstance(record_size, bool) or not isinstance(record_size, int) or record_size < 1:
        raise RefFormatError(
            f"{where}: 'record_size' must be a positive integer, got {record_size!r}"
        )
    complete = document.get(COMPLETE_KEY) is True
    digest = parse_entry(document.get(SOURCES_KEY), where)
    return ZMetadata(
        metadata, record_size, where, every_record_written=complete, sources_digest=digest
    )


def _zmetadata_bytes(location: Location, where: str) -> bytes:
    """The bytes of ``.zmetadata``; its absence named (asking whether the set's directory
    exists is left out over HTTP, which has no directories: it would download a listing)."""
    try:
        data: bytes = location.ask(
            "reading .zmetadata", lambda: whole_file(location.fs, location.join(".zmetadata"))
        )
    except FileNotFoundError:
        if location.is_http:
            raise SourceNotFoundError(
                f"{location.shown}: no such reference set ({where} not found)"
            ) from None
        if location.ask("listing it", lambda: location.fs.isdir(location.path)):
            raise RefFormatError(
                f"{location.shown}: a directory without .zmetadata is not a Parquet reference set"
            ) from None
        raise SourceNotFoundError(f"{location.shown}: no such reference set") from None
    return data


def _source(
    location: Location,
    path: str,
    zmeta: ZMetadata,
    grid: tuple[int, ...],
    target: str | None,
    overrides: Mapping[int, bytes] | None,
) -> ParquetManifestSource:
    return ParquetManifestSource(
        location.fs,
        location.join(path),
        f"{location.shown.rstrip('/')}/{path}",
        array=path,
        record_size=zmeta.record_size,
        nchunks=math.prod(grid),
        target=target,
        overrides=overrides,
        every_record_written=zmeta.every_record_written,
    )


def _chunks_in_metadata(zmeta: ZMetadata, hierarchy: Hierarchy) -> dict[str, dict[int, bytes]]:
    """Array path -> chunk number -> inline bytes, for chunk keys stored in ``metadata``."""
    found: dict[str, dict[int, bytes]] = {}
    for key, value in zmeta.metadata.items():
        if is_metadata_key(key):
            continue
        path, index = hierarchy.locate_chunk(key, where=zmeta.where)
        grid = hierarchy.arrays[path].grid_shape
        number = int(np.ravel_multi_index(index, grid)) if grid else 0
        found.setdefault(path, {})[number] = metadata_text(value).encode("utf-8")
    return found


def _grid(zarray: Mapping[str, Any], where: str) -> tuple[tuple[int, ...], str]:
    """Chunk grid and key separator of a ``.zarray`` document, checked only as far as needed."""
    shape, chunks = _int_list(zarray.get("shape")), _int_list(zarray.get("chunks"))
    if shape is None or chunks is None or len(shape) != len(chunks) or 0 in chunks:
        raise RefFormatError(
            f"{where}: shape and chunks must be lists of non-negative integers of one length "
            f"(chunks positive), got {zarray.get('shape')!r} and {zarray.get('chunks')!r}"
        )
    separator = zarray.get("dimension_separator") or "."
    return tuple(-(-s // c) for s, c in zip(shape, chunks, strict=True)), str(separator)


def _int_list(value: Any) -> list[int] | None:
    if not isinstance(value, list):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        return None
    return value


def _expand_array(
    location: Location,
    path: str,
    zmeta: ZMetadata,
    grid: tuple[int, ...],
    separator: str,
) -> dict[str, Any]:
    source = _source(location, path, zmeta, grid, None, None)
    nchunks, size = math.prod(grid), zmeta.record_size
    out: dict[str, Any] = {}
    for number in range(-(-nchunks // size)):
        record = source.load_record(number)
        if record is None:
            break
        start = number * size
        entries = _expand_record(record, min(size, nchunks - start), source.where(number))
        for row, entry in entries.items():
            index = np.unravel_index(start + row, grid) if grid else ()
            out[chunk_key(path, tuple(int(i) for i in index), separator)] = entry
    return out


def _expand_record(record: RecordColumns, expected: int, where: str) -> dict[int, Any]:
    """Row -> Version 0 value for every non-empty row of a record file."""
    check_record(record, expected, where)
    n = min(record.rows, expected)
    pid, offset, size = record.path_id[:n], record.offset[:n], record.size[:n]
    out: dict[int, Any] = {}
    for row in np.flatnonzero((pid >= 0) | (offset != 0) | (size != 0)).tolist():
        url = record.paths[pid[row]] if pid[row] >= 0 else None
        if url is not None and offset[row] == 0 and size[row] == 0:
            out[row] = [url]
        else:
            out[row] = [url, int(offset[row]), int(size[row])]
    out.update((row, data) for row, data in record.raw.items() if row < n)
    return out
