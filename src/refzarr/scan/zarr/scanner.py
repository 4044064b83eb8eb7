"""The Zarr store scanner: every array of a Zarr v2 or v3 store referenced where its chunks
are, with the store's hierarchy and names.

zarr-python parses all metadata (consolidated metadata where the store has it); one listing of
the store gives every chunk's key and size, so a scan costs that listing plus the metadata
reads, never a request per chunk. `ZarrScanner` is a configured callable (options in the
constructor, no state between calls, picklable).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import PurePosixPath
from typing import Any, Literal, TypeVar

import zarr
from zarr.buffer.cpu import Buffer
from zarr.errors import ZarrUserWarning
from zarr.storage import MemoryStore

from refzarr.errors import RefzarrError, ScanError
from refzarr.model import RefArray, RefGroup
from refzarr.scan.base import ScanOptions
from refzarr.scan.result import ScannedGroup, Skipped, build_or_skip
from refzarr.scan.zarr.arrays import inline_values, scan_array
from refzarr.scan.zarr.listing import StoreListing, list_store

__all__ = ["ZarrScanner"]

T = TypeVar("T")

_METADATA = ("zarr.json", ".zarray", ".zgroup")
"""The document that makes a directory a node, v3 first."""

_DOCUMENTS = (*_METADATA, ".zattrs", ".zmetadata")
"""Every metadata document name (a chunk key is never one of these)."""


@dataclass(frozen=True, slots=True)
class ZarrScanner(ScanOptions):
    """Scan Zarr v2 and v3 stores (local directories or fsspec URLs) into reference groups.

    Takes the options every scanner takes (`ScanOptions`: ``storage_options``,
    ``inline_threshold``, ``on_unsupported``, ``inline_coordinates``).

    Notes
    -----
    A store whose root is an array gives a root group holding that array, named after the
    store's folder without its extension (``sst.zarr`` -> ``sst``).

    Examples
    --------
    >>> group = ZarrScanner()("s3://bucket/store.zarr")  # doctest: +SKIP
    """

    def __call__(self, url: str) -> ScannedGroup:
        """Scan one store.

        Returns
        -------
        ScannedGroup
            The root group; ``skipped`` lists what ``on_unsupported="skip"`` left out.
        """
        listing = list_store(str(url), self.storage_options)
        walk = _Walk(self, listing, metadata_store(listing))
        root = walk.root()
        return ScannedGroup(root.attributes, root.members, tuple(walk.skipped))


def metadata_store(listing: StoreListing) -> MemoryStore:
    """The store's metadata documents, in memory, for zarr-python to parse: each fetched
    once, concurrently (zarr-python itself would probe every possible document of every node
    with a request or two each). When the root holds consolidated metadata, only the root's
    documents are fetched: zarr-python then reads nothing else."""
    root = [k for k in _DOCUMENTS if k in listing]
    documents = dict(zip(root, listing.read(root), strict=True))
    if not _consolidated(documents):
        rest = [k for k in listing.keys if "/" in k and k.rsplit("/", 1)[1] in _DOCUMENTS]
        documents.update(zip(rest, listing.read(rest), strict=True))
    buffers: dict[str, Any] = {k: Buffer.from_bytes(v) for k, v in documents.items()}
    return MemoryStore(buffers, read_only=True)


def _consolidated(documents: Mapping[str, bytes]) -> bool:
    """Whether the root's documents hold consolidated metadata (v2 ``.zmetadata``, or a v3
    root ``zarr.json`` whose ``consolidated_metadata`` is set)."""
    if ".zmetadata" in documents:
        return True
    try:
        document = json.loads(documents.get("zarr.json", b"{}"))
    except ValueError:
        return False  # zarr-python will say what is wrong with it
    return isinstance(document, dict) and document.get("consolidated_metadata") is not None


@contextmanager
def _quiet() -> Iterator[None]:
    """zarr-python warns on parsing ``numcodecs.*`` codecs (outside the v3 specification);
    reading a store that has them is no reason to warn."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ZarrUserWarning, message="Numcodecs codecs")
        yield


@dataclass
class _Walk:
    """The state of one scan: the store, and what was skipped."""

    options: ZarrScanner
    listing: StoreListing
    store: MemoryStore
    skipped: list[Skipped] = field(default_factory=list)

    def where(self, path: str, kind: str = "array") -> str:
        return f"{self.listing.url}: {kind} {path or '/'!r}"

    def root(self) -> RefGroup:
        node = self.open_node("")
        if isinstance(node, zarr.Group):
            return self.group(node, "")
        name = _store_name(self.listing.url)
        array = self.guarded(name, lambda: self.array(node, "", name))
        return RefGroup({}, {} if array is None else {name: array})

    def open_node(
        self, path: str, fmt: Literal[2, 3] | None = None
    ) -> zarr.Array[Any] | zarr.Group:
        """The node at ``path`` opened by zarr-python (consolidated metadata where present;
        ``fmt``: only as a Zarr v2 or v3 node)."""
        try:
            with _quiet():
                node: zarr.Array[Any] | zarr.Group = zarr.open(
                    store=self.store, path=path, mode="r", zarr_format=fmt
                )
        except RefzarrError:
            raise
        except Exception as exc:  # zarr-python refusing the metadata, whatever its reason
            raise ScanError(
                f"{self.listing.url}: {self.metadata_keys(path)}: zarr-python cannot parse the "
                f"metadata: {type(exc).__name__}: {exc}"
            ) from exc
        return node

    def metadata_keys(self, path: str) -> str:
        """The metadata documents of the node at ``path``, for messages."""
        names = [_join(path, n) for n in (*_METADATA, ".zmetadata", ".zattrs")]
        found = [n for n in names if n in self.listing]
        if not found:
            return f"no metadata at {path or '/'!r} (no zarr.json, .zarray or .zgroup)"
        return ", ".join(repr(n) for n in found)

    def guarded(self, path: str, build: Callable[[], T]) -> T | None:
        """``build()``, or None after recording the skip when unsupported and skipping."""
        return build_or_skip(build, f"/{path}", self.options.on_unsupported, self.skipped)

    def group(self, group: zarr.Group, path: str) -> RefGroup:
        """A group and everything below it, members sorted by name."""
        members: dict[str, RefArray | RefGroup] = {}
        for name, child in self.children(group, path):
            child_path = _join(path, name)
            self.check_listed(child, child_path)
            if isinstance(child, zarr.Group):
                members[name] = self.group(child, child_path)
                continue
            array = self.guarded(child_path, partial(self.array, child, child_path, child_path))
            if array is not None:
                members[name] = array
        return RefGroup(dict(group.attrs.asdict()), members)

    def children(self, group: zarr.Group, path: str) -> list[tuple[str, Any]]:
        """The group's members, sorted by name.

        zarr-python leaves out a child whose metadata it cannot parse; so without
        consolidated metadata, each child folder holding metadata of the group's format that
        zarr did not list is opened alone, which raises the `ScanError` naming it.
        """
        fmt = group.metadata.zarr_format
        try:
            with _quiet():
                found = dict(group.members(max_depth=0))
        except Exception as exc:
            self.open_unlisted(path, set(), fmt)
            raise ScanError(
                f"{self.where(path, 'group')}: zarr-python cannot list its members: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if group.metadata.consolidated_metadata is None:
            self.open_unlisted(path, set(found), fmt)
        return sorted(found.items(), key=lambda item: item[0])

    def open_unlisted(self, path: str, listed: set[str], fmt: Literal[2, 3]) -> None:
        """Open each child folder of ``path`` with metadata of format ``fmt`` not in
        ``listed``: zarr-python raising is a `ScanError` naming the child's metadata."""
        documents = ("zarr.json",) if fmt == 3 else (".zarray", ".zgroup")
        names, _ = self.listing.under(path)
        for name in sorted({n.split("/", 1)[0] for n in names if "/" in n} - listed):
            child = _join(path, name)
            if any(_join(child, d) in self.listing for d in documents):
                self.open_node(child, fmt)

    def check_listed(self, node: Any, path: str) -> None:
        """A node that consolidated metadata names must exist in the store."""
        if node.metadata.zarr_format == 3:
            key = "zarr.json"
        else:
            key = ".zarray" if isinstance(node, zarr.Array) else ".zgroup"
        if _join(path, key) not in self.listing:
            kind = "array" if isinstance(node, zarr.Array) else "group"
            raise ScanError(
                f"{self.where(path, kind)}: named by the store's consolidated metadata, but "
                f"the store has no {_join(path, key)!r}: the consolidated metadata points "
                "nowhere (stale?); consolidate the store again (zarr.consolidate_metadata)"
            )

    def array(self, array: zarr.Array[Any], path: str, name: str) -> RefArray:
        where = self.where(name)
        ref = scan_array(array, path, self.listing, self.options.inline_threshold, where)
        meta = ref.meta
        limit = self.options.inline_coordinates
        short = name.rsplit("/", 1)[-1]
        if (
            limit
            and meta.ndim == 1
            and meta.dimension_names == (short,)
            and meta.dtype.kind not in "OV"
            and 0 < meta.shape[0] * meta.dtype.itemsize <= limit
        ):
            return inline_values(ref, self.listing, where)
        return ref


def _store_name(url: str) -> str:
    """A root array's name: the store's folder without its extension (``a.zarr`` -> ``a``)."""
    folder = PurePosixPath(url.rstrip("/").rsplit("://", 1)[-1]).name
    stem = folder.rsplit(".", 1)[0] if "." in folder.lstrip(".") else folder
    return stem or folder or "data"


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name
