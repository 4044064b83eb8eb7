"""`RefArray` (metadata + chunk manifest) and `RefGroup` (attributes + named members)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from refzarr.errors import RefFormatError
from refzarr.model.frozen import FrozenDict, freeze_json
from refzarr.model.manifest import ChunkManifest
from refzarr.model.meta import ArrayMeta
from refzarr.model.pickling import tuple_state

__all__ = ["Node", "RefArray", "RefGroup"]


@tuple_state
@dataclass(frozen=True, slots=True, eq=False)
class RefArray:
    """One virtual array: its metadata and where each of its chunks lives."""

    meta: ArrayMeta
    manifest: ChunkManifest

    def __post_init__(self) -> None:
        if not isinstance(self.meta, ArrayMeta):
            raise TypeError(f"meta must be an ArrayMeta, got {type(self.meta).__name__}")
        if not isinstance(self.manifest, ChunkManifest):
            raise TypeError(f"manifest must be a ChunkManifest, got {type(self.manifest).__name__}")
        if self.manifest.grid_shape != self.meta.grid_shape:
            raise RefFormatError(
                f"manifest grid {self.manifest.grid_shape} does not match the chunk grid "
                f"{self.meta.grid_shape} of shape {self.meta.shape} with chunks {self.meta.chunks}"
            )

    @property
    def shape(self) -> tuple[int, ...]:
        """Array shape."""
        return self.meta.shape

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RefArray):
            return NotImplemented
        return self.meta == other.meta and self.manifest == other.manifest

    __hash__ = None  # type: ignore[assignment]


Node = Union[RefArray, "RefGroup"]


@tuple_state
@dataclass(frozen=True, slots=True, eq=False)
class RefGroup:
    """A group of a virtual Zarr hierarchy: attributes and named members (arrays or groups).

    Member names are non-empty and hold no ``/``; use ``group["a/b"]`` to reach nested members.
    """

    attributes: Mapping[str, Any] = field(default_factory=FrozenDict)
    members: Mapping[str, Node] = field(default_factory=dict)
    sources: Mapping[str, Any] | None = field(default=None, kw_only=True)
    """What the sources were like when scanned (`refzarr.sources`): a JSON document written
    as a hidden root attribute, not part of the hierarchy (equality ignores it)."""
    _token: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        members = dict(self.members)
        for name, member in members.items():
            if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
                raise RefFormatError(f"member name must be a non-empty str without '/': {name!r}")
            if name.startswith(".z") or name == "zarr.json":
                raise RefFormatError(f"member name {name!r} collides with Zarr metadata keys")
            if not isinstance(member, RefArray | RefGroup):
                raise TypeError(f"member {name!r} must be a RefArray or RefGroup")
        object.__setattr__(self, "members", FrozenDict(members))
        object.__setattr__(self, "attributes", freeze_json(self.attributes, where="attributes"))
        if self.sources is not None:
            object.__setattr__(self, "sources", freeze_json(self.sources, where="sources"))

    def __dask_tokenize__(self) -> tuple[str, str]:
        """dask's token of the group (xarray's ``open_dataset(group, chunks=...)`` asks it):
        drawn at random once per group and kept (a group never changes). dask's own way
        pickled the whole group twice and unpickled it (the source record of every file:
        about 0.7 s per 1,000 files at every open) and still drew at random for a group
        whose manifests are read lazily."""
        token = getattr(self, "_token", None)  # unset in a copy made without __init__
        if token is None:
            token = uuid.uuid4().hex
            object.__setattr__(self, "_token", token)
        return "refzarr.RefGroup", token

    def __getitem__(self, path: str) -> Node:
        """The member at ``path`` (``"a/b"`` reaches into subgroups)."""
        node: Node = self
        for part in path.strip("/").split("/"):
            if not isinstance(node, RefGroup) or part not in node.members:
                raise KeyError(path)
            node = node.members[part]
        return node

    def array_at(self, path: str) -> RefArray | None:
        """The array at ``path``; None when nothing, or a group, is there."""
        try:
            node = self[path]
        except KeyError:
            return None
        return node if isinstance(node, RefArray) else None

    def __contains__(self, path: object) -> bool:
        try:
            self[str(path)]
        except KeyError:
            return False
        return True

    def arrays(self, prefix: str = "") -> Iterator[tuple[str, RefArray]]:
        """Every array of the hierarchy with its path, depth first, in member order."""
        for name, member in self.members.items():
            path = f"{prefix}{name}"
            if isinstance(member, RefArray):
                yield path, member
            else:
                yield from member.arrays(prefix=f"{path}/")

    def groups(self, prefix: str = "") -> Iterator[tuple[str, RefGroup]]:
        """This group (path ``""``) and every subgroup with its path."""
        yield prefix.rstrip("/"), self
        for name, member in self.members.items():
            if isinstance(member, RefGroup):
                yield from member.groups(prefix=f"{prefix}{name}/")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RefGroup):
            return NotImplemented
        return self.attributes == other.attributes and dict(self.members) == dict(other.members)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        """A short summary, like xarray's: counts, then one line per member (at most 12)."""
        arrays = sum(1 for _ in self.arrays())
        groups = sum(1 for _ in self.groups()) - 1
        head = f"<{type(self).__name__}: {arrays} arrays, {groups} groups>"
        lines = [head, *(_member_line(n, m) for n, m in list(self.members.items())[:_SHOWN])]
        if len(self.members) > _SHOWN:
            lines.append(f"    ... and {len(self.members) - _SHOWN} more members")
        if self.attributes:
            names = ", ".join(list(self.attributes)[:8])
            more = ", ..." if len(self.attributes) > 8 else ""
            lines.append(f"  attributes ({len(self.attributes)}): {names}{more}")
        return "\n".join(lines)


_SHOWN = 12
"""Members a group's repr lists."""


def _member_line(name: str, member: Node) -> str:
    if isinstance(member, RefGroup):
        return f"    {name}/  ({len(member.members)} members)"
    meta = member.meta
    dims = meta.dimension_names or tuple(f"dim_{k}" for k in range(meta.ndim))
    shape = ", ".join(f"{d}: {n}" for d, n in zip(dims, meta.shape, strict=True))
    codecs = "+".join(str(c.get("id")) for c in meta.codecs) or "raw"
    return f"    {name}  ({shape})  {meta.dtype}  chunks={meta.chunks}  {codecs}"
