"""Zarr v2 hierarchy from reference-set keys: metadata keys -> groups and arrays, chunk keys."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from refzarr.errors import RefFormatError
from refzarr.model.frozen import freeze_json, thaw_json
from refzarr.model.group import Node, RefArray, RefGroup
from refzarr.model.manifest import ChunkManifest
from refzarr.model.meta import ArrayMeta

__all__ = [
    "METADATA_NAMES",
    "Hierarchy",
    "array_metadata",
    "assemble_group",
    "chunk_key",
    "group_metadata",
    "is_metadata_key",
    "parse_hierarchy",
    "parse_metadata_value",
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

    The root group has path ``""``; other paths have no leading or trailing ``/``.
    """

    groups: dict[str, dict[str, Any]]
    arrays: dict[str, ArrayMeta]

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
    if ndim == 0:
        return () if parts == ["0"] else None
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
            "models a hierarchy rooted at a group"
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
    return Hierarchy(groups=groups, arrays=arrays)


def _where(where: str, key: str) -> str:
    return f"{where}: key {key!r}" if where else f"key {key!r}"


def _attrs(docs: Mapping[str, Any], path: str, where: str) -> dict[str, Any]:
    key = f"{path}/.zattrs" if path else ".zattrs"
    return parse_metadata_value(key, docs[key], where=where) if key in docs else {}


def assemble_group(
    hierarchy: Hierarchy, manifests: Mapping[str, ChunkManifest], *, where: str = ""
) -> RefGroup:
    """The `RefGroup` of a hierarchy; arrays absent from ``manifests`` have no chunks written."""
    children: dict[str, dict[str, Node]] = {path: {} for path in hierarchy.groups}
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
        group = _make_group(hierarchy.groups[path], children[path], where, path)
        children[path.rpartition("/")[0]][path.rpartition("/")[2]] = group
    return _make_group(hierarchy.groups[""], children[""], where, "")


def _make_group(attrs: dict[str, Any], members: dict[str, Node], where: str, path: str) -> RefGroup:
    try:
        return RefGroup(attributes=freeze_json(attrs), members=dict(sorted(members.items())))
    except (RefFormatError, TypeError) as exc:
        raise RefFormatError(f"{_where(where, path or '/')}: {exc}") from exc


def group_metadata(group: RefGroup) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(key, document)`` of every group's ``.zgroup`` and ``.zattrs`` (the inverse of
    `parse_hierarchy` for groups), root first."""
    for path, sub in group.groups():
        prefix = f"{path}/" if path else ""
        yield f"{prefix}.zgroup", {"zarr_format": 2}
        yield f"{prefix}.zattrs", thaw_json(sub.attributes)


def array_metadata(path: str, array: RefArray) -> tuple[tuple[str, dict[str, Any]], ...]:
    """``(key, document)`` of an array's ``.zarray`` and ``.zattrs``."""
    zarray, zattrs = array.meta.to_zarr_v2()
    return (f"{path}/.zarray", zarray), (f"{path}/.zattrs", zattrs)
