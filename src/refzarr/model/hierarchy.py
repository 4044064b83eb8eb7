"""Zarr v2 hierarchy from reference-set keys: metadata keys -> groups and arrays, chunk keys.

Also the one builder of Zarr v2 metadata documents from the model (`group_metadata`,
`array_metadata`), which every kerchunk writer uses: an array whose chunk grid is irregular
(rectilinear) cannot be described there and raises `UnsupportedFeatureError` naming the array,
the dimension, the first irregular chunk and its files (`require_regular_grids` checks a whole
hierarchy before anything is written).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import RefFormatError, UnsupportedFeatureError
from refzarr.model.frozen import DeferredJSON, freeze_json, plain_json, thaw_json
from refzarr.model.grid import RectilinearAxis
from refzarr.model.group import Node, RefArray, RefGroup
from refzarr.model.manifest import ChunkManifest
from refzarr.model.meta import ArrayMeta

SOURCES_ATTR = "_nc_refzarr_sources"
"""The root attribute holding `RefGroup.sources` in written reference sets. Its ``_nc``
prefix makes xarray's Zarr backend hide it (as it hides NCZarr's keys); zarr-python and
fsspec show it as an attribute but never act on it."""

ARRAY_RECORDS_ATTR = "_nc_refzarr_arrays"
"""A group attribute holding, by array name, per-array records moved out of the arrays'
attributes (``{"v": {"_nczarr_attr": {...}}}``): the VirtualiZarr interop puts them there
because Zarr v3 readers show every array attribute, while xarray hides ``_nc`` group
attributes. Reading puts them back onto the arrays."""

__all__ = [
    "ARRAY_RECORDS_ATTR",
    "METADATA_NAMES",
    "SOURCES_ATTR",
    "Hierarchy",
    "array_metadata",
    "assemble_group",
    "chunk_key",
    "describe_irregular",
    "group_documents",
    "group_metadata",
    "hierarchy_metadata",
    "is_metadata_key",
    "metadata_documents",
    "parse_hierarchy",
    "parse_metadata_value",
    "require_regular_grids",
]

METADATA_NAMES = frozenset({".zarray", ".zgroup", ".zattrs", ".zmetadata"})


def is_metadata_key(key: str) -> bool:
    """True for Zarr v2 metadata keys (``.zarray``, ``.zgroup``, ``.zattrs``, ``.zmetadata``)."""
    return key.rpartition("/")[2] in METADATA_NAMES


def parse_metadata_value(key: str, value: Any, *, where: str = "") -> dict[str, Any]:
    """A metadata key's value (JSON text, bytes or an object) as a JSON object."""
    prefix = f"{where}: " if where else ""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RefFormatError(f"{prefix}key {key!r}: metadata is not UTF-8 text") from exc
    if not isinstance(value, str):
        raise RefFormatError(
            f"{prefix}key {key!r}: metadata must be JSON text or an object, got "
            f"{type(value).__name__}"
        )
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise RefFormatError(f"{prefix}key {key!r}: metadata is not valid JSON ({exc})") from exc
    if not isinstance(parsed, dict):
        raise RefFormatError(f"{prefix}key {key!r}: metadata must be a JSON object")
    return parsed


@dataclass(frozen=True)
class Hierarchy:
    """Groups (path -> attributes) and arrays (path -> metadata) described by metadata keys.

    The root group has path ``""``; other paths have no leading or trailing ``/``. ``order``
    lists member paths as the metadata keys first name them (a group's members keep that
    order; paths not in it come after, by name).
    """

    groups: dict[str, dict[str, Any]]
    arrays: dict[str, ArrayMeta]
    order: tuple[str, ...] = ()

    def split_chunk_key(self, key: str) -> tuple[str, tuple[int, ...]] | None:
        """``(array path, chunk index)`` of a chunk key, or None when no array owns it."""
        path, _, last = key.rpartition("/")
        meta = self.arrays.get(path)
        if meta is not None and meta.dimension_separator == ".":
            index = _parse_index(last, ".", meta.ndim)
            if index is not None:
                return path, index
        for array_path, meta in self.arrays.items():
            if meta.dimension_separator == "/" and key.startswith(
                f"{array_path}/" if array_path else ""
            ):
                rest = key[len(array_path) + 1 :] if array_path else key
                index = _parse_index(rest, "/", meta.ndim)
                if index is not None:
                    return array_path, index
        return None

    def locate_chunk(self, key: str, *, where: str = "") -> tuple[str, tuple[int, ...]]:
        """``(array path, chunk index)`` of a chunk key inside its array's chunk grid.

        Raises RefFormatError (naming ``where`` and the key) when no array owns the key or the
        chunk lies outside the grid.
        """
        owner = self.split_chunk_key(key)
        if owner is None:
            raise RefFormatError(
                f"{_where(where, key)}: not Zarr metadata and not a chunk key of any array; "
                "use refzarr.expand_references for reference sets that are not Zarr hierarchies"
            )
        path, index = owner
        grid = self.arrays[path].grid_shape
        if not all(i < s for i, s in zip(index, grid, strict=True)):
            raise RefFormatError(
                f"{_where(where, path)}: chunk {key.rpartition('/')[2]} lies outside the chunk "
                f"grid {grid}"
            )
        return path, index


def _parse_index(text: str, separator: str, ndim: int) -> tuple[int, ...] | None:
    parts = text.split(separator)
    if ndim == 0:  # "0"; or "", the key VirtualiZarr (2.5 to 2.8) writes a scalar's chunk under
        return () if parts in (["0"], [""]) else None
    if len(parts) != ndim or not all(p.isdigit() and p.isascii() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def chunk_key(path: str, index: tuple[int, ...], separator: str = ".") -> str:
    """The Zarr v2 key of chunk ``index`` of the array at ``path``."""
    name = separator.join(str(i) for i in index) if index else "0"
    return f"{path}/{name}" if path else name


def parse_hierarchy(metadata: Mapping[str, Any], *, where: str = "") -> Hierarchy:
    """Groups and arrays from the metadata keys of a reference set.

    ``metadata`` maps keys such as ``"a/.zarray"`` to JSON text or objects. Groups implied by
    a deeper member but lacking ``.zgroup`` are created with no attributes. ``.zmetadata``
    (consolidated metadata) is ignored: it repeats the other keys.
    """
    arrays: dict[str, ArrayMeta] = {}
    groups: dict[str, dict[str, Any]] = {"": {}}
    docs = {k: v for k, v in metadata.items() if not k.endswith(".zmetadata")}
    for key in docs:
        path, _, name = key.rpartition("/")
        if name == ".zarray":
            zattrs = _attrs(docs, path, where)
            zarray = parse_metadata_value(key, docs[key], where=where)
            arrays[path] = ArrayMeta.from_zarr_v2(zarray, zattrs, where=_where(where, key))
    for key in docs:
        path, _, name = key.rpartition("/")
        if name == ".zgroup":
            parse_metadata_value(key, docs[key], where=where)
            if path in arrays:
                raise RefFormatError(f"{_where(where, key)}: {path!r} is both a group and an array")
        if name in (".zgroup", ".zattrs") and path not in arrays:
            groups[path] = _attrs(docs, path, where)
    if "" in arrays:
        raise RefFormatError(
            f"{_where(where, '.zarray')}: the root of the reference set is an array; refzarr "
            "models a hierarchy rooted at a group (kerchunk's tiff_to_zarr writes single-image "
            "TIFFs this way); scan the source file with `refzarr scan`, or move the array's keys "
            "under a name (`x/.zarray`, `x/0.0`, ...)"
        )
    for path in list(arrays) + list(groups):
        parent = path.rpartition("/")[0]
        while path:
            if parent in arrays:
                raise RefFormatError(
                    f"{_where(where, parent)}: array {parent!r} has a member {path!r}"
                )
            groups.setdefault(parent, {})
            path, parent = parent, parent.rpartition("/")[0]
    clash = set(arrays) & set(groups)
    if clash:
        name = sorted(clash)[0]
        raise RefFormatError(f"{_where(where, name)}: {name!r} is both a group and an array")
    return Hierarchy(groups=groups, arrays=arrays, order=_first_named(docs))


def _first_named(docs: Mapping[str, Any]) -> tuple[str, ...]:
    """Member paths in the order metadata keys first name them (a group implied by a deeper
    key where that key is)."""
    seen: dict[str, None] = {}
    for key in docs:
        path = key.rpartition("/")[0]
        parts = path.split("/") if path else []
        for depth in range(1, len(parts) + 1):
            seen.setdefault("/".join(parts[:depth]))
    return tuple(seen)


def _where(where: str, key: str) -> str:
    return f"{where}: key {key!r}" if where else f"key {key!r}"


def _attrs(docs: Mapping[str, Any], path: str, where: str) -> dict[str, Any]:
    key = f"{path}/.zattrs" if path else ".zattrs"
    if key not in docs:
        return {}
    value = docs[key]
    attrs = parse_metadata_value(key, value, where=where)
    record = attrs.get(SOURCES_ATTR) if not path else None
    if type(record) is dict and isinstance(value, str | bytes):
        # parsed here, so owned here: frozen when first used (thousands of entries in a
        # combined set, which only source checks and refreshes read)
        attrs[SOURCES_ATTR] = DeferredJSON(document=record)
    return attrs


def assemble_group(
    hierarchy: Hierarchy, manifests: Mapping[str, ChunkManifest], *, where: str = ""
) -> RefGroup:
    """The `RefGroup` of a hierarchy; arrays absent from ``manifests`` have no chunks written."""
    children: dict[str, dict[str, Node]] = {path: {} for path in hierarchy.groups}
    rank = {path: k for k, path in enumerate(hierarchy.order)}
    for path, meta in hierarchy.arrays.items():
        manifest = manifests.get(path) or ChunkManifest.missing(meta.grid_shape)
        try:
            array = RefArray(meta, manifest)
        except RefFormatError as exc:
            raise RefFormatError(f"{_where(where, path)}: {exc}") from exc
        children[path.rpartition("/")[0]][path.rpartition("/")[2]] = array
    for path in sorted(hierarchy.groups, key=lambda p: -p.count("/") if p else 1):
        if not path:
            continue
        group = _make_group(hierarchy.groups[path], children[path], where, path, rank)
        children[path.rpartition("/")[0]][path.rpartition("/")[2]] = group
    return _make_group(hierarchy.groups[""], children[""], where, "", rank)


def _make_group(
    attrs: dict[str, Any],
    members: dict[str, Node],
    where: str,
    path: str,
    rank: Mapping[str, int],
) -> RefGroup:
    prefix = f"{path}/" if path else ""
    last = len(rank)

    def position(name: str) -> tuple[int, str]:
        return rank.get(prefix + name, last), name

    if ARRAY_RECORDS_ATTR in attrs:
        attrs = dict(attrs)
        members = _with_array_records(members, attrs.pop(ARRAY_RECORDS_ATTR), where, path)
    sources = None
    if not path and SOURCES_ATTR in attrs:
        attrs = dict(attrs)
        sources = attrs.pop(SOURCES_ATTR)
    if sources is not None and not isinstance(sources, Mapping):
        raise RefFormatError(f"{_where(where, '/')}: attribute {SOURCES_ATTR!r} is no object")
    try:
        ordered = {name: members[name] for name in sorted(members, key=position)}
        return RefGroup(attributes=freeze_json(attrs), members=ordered, sources=sources)
    except (RefFormatError, TypeError) as exc:
        raise RefFormatError(f"{_where(where, path or '/')}: {exc}") from exc


def _with_array_records(
    members: dict[str, Node], records: Any, where: str, path: str
) -> dict[str, Node]:
    """``members`` with each array's records (`ARRAY_RECORDS_ATTR`) back in its attributes."""
    if not isinstance(records, Mapping):
        raise RefFormatError(f"{_where(where, path or '/')}: {ARRAY_RECORDS_ATTR!r} is no object")
    out = dict(members)
    for name, record in records.items():
        array = out.get(name)
        if isinstance(array, RefArray) and isinstance(record, Mapping):
            attributes = {**array.meta.attributes, **record}
            out[name] = RefArray(array.meta.replace(attributes=attributes), array.manifest)
    return out


def hierarchy_metadata(group: RefGroup) -> Iterator[tuple[str, RefGroup | RefArray]]:
    """``(path, node)`` of every group and array, depth first in member order: each group
    right before its members, so that a group's children are listed together (zarr-python
    3.1 misreads consolidated metadata listing all groups before all arrays when two groups
    have children of the same name, zarr-python issue 4226)."""
    yield from _walk(group, "")


def _walk(group: RefGroup, path: str) -> Iterator[tuple[str, RefGroup | RefArray]]:
    yield path, group
    for name, member in group.members.items():
        child = f"{path}/{name}" if path else name
        if isinstance(member, RefGroup):
            yield from _walk(member, child)
        else:
            yield child, member


def metadata_documents(
    group: RefGroup, *, with_sources: bool = True
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(key, document)`` of every group and array (`hierarchy_metadata`'s order);
    ``with_sources``: the root's record of sources as its `SOURCES_ATTR` attribute.

    Raises
    ------
    UnsupportedFeatureError
        On reaching an array whose chunk grid is irregular.
    """
    for path, node in hierarchy_metadata(group):
        if isinstance(node, RefGroup):
            yield from group_documents(path, node, with_sources=with_sources)
        else:
            yield from array_metadata(path, node)


def group_documents(
    path: str, group: RefGroup, *, with_sources: bool = False
) -> tuple[tuple[str, dict[str, Any]], ...]:
    """``(key, document)`` of one group's ``.zgroup`` and ``.zattrs`` (``path``: its path);
    ``with_sources``: the root's ``sources`` record as the `SOURCES_ATTR` attribute (what
    reference set writers store)."""
    prefix = f"{path}/" if path else ""
    attributes = thaw_json(group.attributes)
    if with_sources and not path and group.sources is not None:
        attributes[SOURCES_ATTR] = plain_json(group.sources)  # serialised, never changed
    return (f"{prefix}.zgroup", {"zarr_format": 2}), (f"{prefix}.zattrs", attributes)


def group_metadata(group: RefGroup) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(key, document)`` of every group's ``.zgroup`` and ``.zattrs`` (the inverse of
    `parse_hierarchy` for groups), root first."""
    for path, sub in group.groups():
        yield from group_documents(path, sub)


def array_metadata(path: str, array: RefArray) -> tuple[tuple[str, dict[str, Any]], ...]:
    """``(key, document)`` of an array's ``.zarray`` and ``.zattrs``.

    Raises
    ------
    UnsupportedFeatureError
        When the array's chunk grid is irregular: Zarr v2 has one chunk length per axis.
    """
    if not array.meta.is_regular:
        raise _irregular_error(path, array)
    zarray, zattrs = array.meta.to_zarr_v2()
    return (f"{path}/.zarray", zarray), (f"{path}/.zattrs", zattrs)


def require_regular_grids(group: RefGroup) -> None:
    """Check that every array of ``group`` can be written as kerchunk references.

    Writers call this before writing anything, so a failure leaves no partial output.

    Raises
    ------
    UnsupportedFeatureError
        For the first array whose chunk grid is irregular (see `describe_irregular`).
    """
    for path, array in group.arrays():
        if not array.meta.is_regular:
            raise _irregular_error(path, array)


def refuse_empty_chunks(group: RefGroup, refused_by: str, prefix: str = "") -> None:
    """UnsupportedFeatureError naming the first chunk of 0 bytes of ``group`` (its array,
    index, file and offset): a reference of length 0, or 0 inlined bytes.

    No chunk decodes from 0 bytes (each has its chunk's shape), so such a chunk fails when
    read through any reader (refzarr, fsspec + zarr on JSON and Parquet, Icechunk 1.x);
    Icechunk 2.2+ and VirtualiZarr 2.8+ refuse it (``refused_by`` says which, for the
    message). Writing it as missing would read as fill values: other data than the other
    outputs give.
    """
    for path, array in group.arrays():
        refuse_empty_array(f"{prefix}/{path}" if prefix else path, array, refused_by)


def refuse_empty_array(path: str, array: RefArray, refused_by: str) -> None:
    """`refuse_empty_chunks` for one array (``path`` names it)."""
    manifest = array.manifest
    grid = manifest.grid_shape
    for block in manifest.iter_written_blocks():
        empty = np.flatnonzero((block.path_id >= 0) & (block.length == 0))
        inlined = sorted(number for number, data in block.inlined.items() if not data)
        if not empty.size and not inlined:
            continue
        count = int(empty.size) + len(inlined)
        if empty.size:
            k = int(empty[0])
            number, where = block.start + k, f"{block.paths[int(block.path_id[k])]} at byte "
            where += f"{int(block.offset[k])}"
        else:
            number, where = inlined[0], "inlined"
        index = tuple(int(i) for i in np.unravel_index(number, grid)) if grid else ()
        raise empty_chunk_error(path, f"chunk {index}", where, count, refused_by)


def empty_chunk_error(
    path: str, chunk: str, where: str, count: int, refused_by: str
) -> UnsupportedFeatureError:
    """The error `refuse_empty_chunks` raises (also for an empty file referenced whole)."""
    return UnsupportedFeatureError(
        f"array {path!r}: {chunk} is 0 bytes long ({where}; {count} such chunk(s)): no "
        f"chunk decodes from 0 bytes, so it fails when read through every reader, and "
        f"{refused_by}; check or rescan the source (damaged or partly written?), or leave "
        "the array out"
    )


def _irregular_error(path: str, array: RefArray) -> UnsupportedFeatureError:
    _, dim, chunk = _first_irregular_axis(array)
    return UnsupportedFeatureError(
        f"{describe_irregular(path, array)}. Kerchunk references (JSON, Parquet) and Zarr v2 "
        f"metadata need chunks of one length along each axis, so nothing was written. To write "
        f"them, combine only files whose length along {dim} is a multiple of the chunk length "
        f"({chunk}) and whose chunk lengths agree, or rechunk the files first; or keep the "
        "RefGroup (pickle it) and read it with refzarr.open_dataset, which reads irregular chunk "
        "grids. (A Zarr v3 / Icechunk writer with rectilinear chunk grids could express it; "
        "refzarr has none yet.)"
    )


def describe_irregular(path: str, array: RefArray) -> str:
    """The first chunk of an irregular array that breaks a regular grid, and its files, in words.

    Names the array, the axis and its dimension, the chunk, how it differs and the URLs of
    it and of its neighbouring chunk (the two files whose boundary breaks the grid).
    """
    axis, dim, _ = _first_irregular_axis(array)
    rectilinear = array.meta.rectilinear
    assert rectilinear is not None
    rect = rectilinear[axis]
    assert rect is not None
    k, neighbour, why = _first_irregular_chunk(rect)
    files = _chunk_urls(array, axis, k, neighbour)
    return (
        f"array {path!r}: its chunks along axis {axis} (dimension {dim}) differ in length: "
        f"{why} ({files})"
    )


def _first_irregular_axis(array: RefArray) -> tuple[int, str, int]:
    """The first irregular axis, its dimension (quoted name or ``axis k``), its chunk length."""
    meta = array.meta
    assert meta.rectilinear is not None
    axis = next(k for k, rect in enumerate(meta.rectilinear) if rect is not None)
    rect = meta.rectilinear[axis]
    assert rect is not None
    names = meta.dimension_names
    dim = repr(names[axis]) if names is not None else f"axis {axis}"
    return axis, dim, rect.stored[0]


def _first_irregular_chunk(rect: RectilinearAxis) -> tuple[int, int, str]:
    """``(chunk, neighbour, why)``: the first chunk that differs from chunk 0's length, or
    that holds fewer positions than its length while not last (a file ending inside it)."""
    first, last = rect.stored[0], len(rect.sizes) - 1
    for k, (size, stored) in enumerate(zip(rect.sizes, rect.stored, strict=True)):
        if stored != first:
            return k, k - 1, f"chunk {k} is {stored} long where chunk {k - 1} is {first} long"
        if size != stored and k != last:
            return (
                k,
                k + 1,
                f"chunk {k} holds {size} of its {stored} positions but is not the last chunk: "
                "a file ends inside it and the next one starts a new chunk",
            )
    return 0, 0, "the chunk lengths are not all alike"  # not reached for a validated axis


def _chunk_urls(array: RefArray, axis: int, chunk: int, neighbour: int) -> str:
    """Where chunks ``chunk`` and ``neighbour`` along ``axis`` are stored, in words."""
    manifest = array.manifest
    ids, paths = manifest.path_id, manifest.paths

    def url(k: int) -> str:
        slab = np.take(ids, k, axis=axis).ravel()
        stored = slab[slab >= 0]
        if stored.size:
            return paths[int(stored[0])]
        return "no file: inlined or never written"

    here, there = url(chunk), url(neighbour)
    if chunk == neighbour:
        return f"chunk {chunk} is in {here}"
    return f"chunk {chunk} is in {here}; chunk {neighbour} is in {there}"
