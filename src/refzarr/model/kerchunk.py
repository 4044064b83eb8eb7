"""Kerchunk reference dicts (Version 0, or Version 1) to and from `RefGroup`.

This is the general, per-key path, for references already in memory as Python dicts. The
JSON and Parquet readers in `refzarr.formats` build groups column-wise instead.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refzarr.errors import RefFormatError
from refzarr.model.group import RefArray, RefGroup
from refzarr.model.hierarchy import (
    array_metadata,
    assemble_group,
    chunk_key,
    group_documents,
    hierarchy_metadata,
    is_metadata_key,
    parse_hierarchy,
    require_regular_grids,
)
from refzarr.model.manifest import INLINED, MAX_OFFSET, WHOLE_FILE, ChunkManifest
from refzarr.model.templates import expand_v1

__all__ = [
    "decode_inline",
    "encode_inline",
    "expand_dict",
    "from_kerchunk",
    "group_from_kerchunk",
    "group_to_kerchunk",
    "metadata_text",
    "parse_reference",
    "to_kerchunk",
]


def metadata_text(document: Any) -> str:
    """Compact JSON text of a metadata document, byte for byte as kerchunk writes it.

    kerchunk minifies metadata with ``ujson.dumps``, which differs from the standard library's
    compact output in three ways: ``/`` is escaped as ``\\/``, DEL (U+007F) is left as is, and
    exponents are not zero-padded (``1e-5``, not ``1e-05``). Writing the same bytes makes every
    metadata key of a kerchunk reference set read back identical after a refzarr round trip.
    """
    if isinstance(document, str):
        parts = (json.dumps(part)[1:-1].replace("/", "\\/") for part in document.split("\x7f"))
        return '"' + "\x7f".join(parts) + '"'
    if isinstance(document, float) and math.isfinite(document):
        return _EXPONENT_PADDING.sub(r"e\1\2", float.__repr__(document))
    if isinstance(document, Mapping):
        items = (f"{metadata_text(k)}:{metadata_text(v)}" for k, v in document.items())
        return "{" + ",".join(items) + "}"
    if isinstance(document, list | tuple):
        return "[" + ",".join(metadata_text(item) for item in document) + "]"
    return json.dumps(document)


_EXPONENT_PADDING = re.compile(r"e([+-])0(\d)$")


def encode_inline(data: bytes) -> str:
    """A Version 0 text value for inline bytes: the text itself when ASCII, else base64."""
    if not data.startswith(b"base64:"):
        try:
            return data.decode("ascii")
        except UnicodeDecodeError:
            pass
    return "base64:" + base64.standard_b64encode(data).decode("ascii")


def decode_inline(key: str, value: Any, *, where: str = "") -> bytes:
    """The bytes of an inline value: ``base64:`` decoded, other text UTF-8, objects as JSON.

    Like fsspec, a ``base64:`` prefix is decoded on bytes values (in-memory dicts) too.
    """
    if isinstance(value, bytes):
        if not value.startswith(b"base64:"):
            return value
        value = value.decode("ascii", "replace")
    if isinstance(value, str):
        if value.startswith("base64:"):
            try:
                return base64.b64decode(value[7:], validate=True)
            except binascii.Error as exc:
                raise RefFormatError(f"{_at(where, key)}: invalid base64 data ({exc})") from exc
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RefFormatError(
                f"{_at(where, key)}: inline text is not valid Unicode ({exc.reason}); "
                "store binary data with a 'base64:' prefix"
            ) from exc
    if isinstance(value, Mapping | list):
        return json.dumps(value).encode("utf-8")
    raise RefFormatError(f"{_at(where, key)}: unsupported value type {type(value).__name__}")


def _at(where: str, key: str) -> str:
    return f"{where}: key {key!r}" if where else f"key {key!r}"


def parse_reference(
    key: str, value: Sequence[Any], *, target: str | None, where: str = ""
) -> tuple[str, int, int | None]:
    """Validate a ``[url]`` or ``[url, offset, length]`` reference (length None: whole file)."""
    if len(value) not in (1, 3):
        raise RefFormatError(
            f"{_at(where, key)}: a reference must be [url] or [url, offset, length], got "
            f"{len(value)} elements"
        )
    url = value[0]
    if url is None:
        if target is None:
            raise RefFormatError(
                f"{_at(where, key)}: the reference has no URL and no default target was given "
                "(pass target=...)"
            )
        url = target
    if not isinstance(url, str) or not url:
        raise RefFormatError(f"{_at(where, key)}: the URL must be a non-empty string, got {url!r}")
    if len(value) == 1:
        return url, 0, None
    offset, length = value[1], value[2]
    for name, number in (("offset", offset), ("length", length)):
        if isinstance(number, bool) or not isinstance(number, int):
            raise RefFormatError(
                f"{_at(where, key)}: the {name} must be an integer, got {number!r}"
            )
        if not 0 <= number <= MAX_OFFSET:
            raise RefFormatError(
                f"{_at(where, key)}: the {name} must lie in [0, {MAX_OFFSET}], got {number}"
            )
    return url, offset, length


def expand_dict(refs: Mapping[str, Any]) -> dict[str, Any]:
    """A reference dict in Version 0 form (a Version 1 dict is expanded)."""
    if not isinstance(refs, Mapping):
        raise RefFormatError(f"a reference set must be a JSON object, got {type(refs).__name__}")
    if "version" in refs:
        return expand_v1(refs)
    return dict(refs)


def group_from_kerchunk(
    refs: Mapping[str, Any], *, target: str | None = None, where: str = ""
) -> RefGroup:
    """The `RefGroup` a kerchunk reference dict describes (see `from_kerchunk`)."""
    flat = expand_dict(refs)
    metadata = {k: v for k, v in flat.items() if is_metadata_key(k)}
    hierarchy = parse_hierarchy(metadata, where=where)
    urls: dict[str, int] = {}
    entries = {path: _Entries() for path in hierarchy.arrays}
    for key, value in flat.items():
        if key in metadata:
            continue
        path, index = hierarchy.locate_chunk(key, where=where)
        found = entries[path]
        if isinstance(value, list | tuple):  # in-memory dicts may hold tuples, as fsspec allows
            url, offset, length = parse_reference(key, value, target=target, where=where)
            found.coords.append(index)
            found.url_ids.append(urls.setdefault(url, len(urls)))
            found.offsets.append(offset)
            found.lengths.append(int(WHOLE_FILE) if length is None else length)
        else:
            if index in found.inlined:
                raise RefFormatError(f"{_at(where, key)}: chunk given more than once")
            found.inlined[index] = decode_inline(key, value, where=where)
    url_table = list(urls)
    manifests = {}
    for path, found in entries.items():
        meta = hierarchy.arrays[path]
        manifests[path] = ChunkManifest.from_entries(
            meta.grid_shape,
            np.asarray(found.coords, dtype=np.int64).reshape(len(found.coords), meta.ndim),
            url_table,
            np.asarray(found.url_ids, dtype=np.int64),
            np.asarray(found.offsets, dtype=np.uint64),
            np.asarray(found.lengths, dtype=np.uint64),
            found.inlined,
            where=_at(where, path),
        )
    return assemble_group(hierarchy, manifests, where=where)


def group_to_kerchunk(group: RefGroup) -> dict[str, Any]:
    """A Version 0 dict: metadata as compact JSON text, refs as lists, inline data as text.

    Raises UnsupportedFeatureError (naming the array, dimension and files) when an array's
    chunk grid is irregular: Version 0 references carry Zarr v2 metadata.
    """
    require_regular_grids(group)
    out: dict[str, Any] = {}
    for path, node in hierarchy_metadata(group):  # each group's members right after it
        if isinstance(node, RefGroup):
            out.update((key, metadata_text(doc)) for key, doc in group_documents(path, node))
            continue
        array = node
        out.update((key, metadata_text(doc)) for key, doc in array_metadata(path, array))
        out.update(_chunk_refs(path, array))
    return out


def _chunk_refs(path: str, array: RefArray) -> Iterator[tuple[str, Any]]:
    """The references of an array's written chunks, in C order (a sparse manifest's only:
    nothing is built for its unwritten chunks)."""
    manifest, sep = array.manifest, array.meta.dimension_separator
    grid = manifest.grid_shape
    written = manifest.written_entries()
    inlined = manifest.inlined
    columns = zip(
        written.numbers.tolist(),
        written.path_id.tolist(),
        written.offset.tolist(),
        written.length.tolist(),
        strict=True,
    )
    for number, pid, offset, length in columns:
        index = tuple(int(i) for i in np.unravel_index(number, grid)) if grid else ()
        key = chunk_key(path, index, sep)
        if pid == INLINED:
            yield key, encode_inline(inlined[index])
        elif length == WHOLE_FILE:
            yield key, [written.paths[pid]]
        else:
            yield key, [written.paths[pid], offset, length]


@dataclass
class _Entries:
    """Chunk entries of one array, collected key by key."""

    coords: list[tuple[int, ...]] = field(default_factory=list)
    url_ids: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    inlined: dict[tuple[int, ...], bytes] = field(default_factory=dict)


def from_kerchunk(refs: Mapping[str, Any], *, target: str | None = None) -> RefGroup:
    """Build a group from a kerchunk reference dict (Version 0, or Version 1 with refs).

    Parameters
    ----------
    refs
        ``{key: value}`` (Version 0) or ``{"version": 1, "refs": ..., ...}``.
    target
        URL used for references whose URL is null.

    Raises
    ------
    RefFormatError
        When the dict is no valid reference set (names the key).
    """
    return group_from_kerchunk(refs, target=target)


def to_kerchunk(group: RefGroup) -> dict[str, Any]:
    """A Version 0 reference dict with Zarr v2 metadata (text values, lists for refs).

    The group's record of its sources (``group.sources``) is left out: `refzarr.write`
    stores it.

    Raises
    ------
    UnsupportedFeatureError
        When an array's chunk grid is irregular (kerchunk needs regular grids).
    """
    return group_to_kerchunk(group)
