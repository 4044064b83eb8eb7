"""The HDF5 / netCDF4 scanner: every dataset of a file as a `RefArray`, every group a `RefGroup`.

`Hdf5Scanner` is a configured callable (options in the constructor, no state between calls,
picklable), so scanning many files is ``executor.map(Hdf5Scanner(...), urls)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any, TypeVar

import h5py
from h5py import h5i, h5l, h5o, h5t

from refzarr.codecs.hdf5.filters import filters_to_codecs
from refzarr.errors import RefzarrError, ScanError, UnsupportedFeatureError
from refzarr.model import ArrayMeta, RefArray, RefGroup
from refzarr.model.attr_types import with_types
from refzarr.scan.base import ScanOptions
from refzarr.scan.coordinates import load_coordinate
from refzarr.scan.hdf5.array_type import unfold_array_type
from refzarr.scan.hdf5.attrs import INTERNAL_ATTRS, AttributeTable, read_attributes
from refzarr.scan.hdf5.contiguous import check_chunk_bytes
from refzarr.scan.hdf5.dataset import ScannedDataset
from refzarr.scan.hdf5.dims import (
    NetcdfDimensionIds,
    PhonyDimensions,
    dimension_names,
    is_dimension_only,
    variable_name,
)
from refzarr.scan.hdf5.global_heap import (
    Collections,
    HeapFile,
    attribute_heap_refusals,
    check_global_heaps,
    heap_file,
    heap_strings,
)
from refzarr.scan.hdf5.group_links import EXTERNAL, HARD, Link
from refzarr.scan.hdf5.headers import ObjectHeaders
from refzarr.scan.hdf5.layout import dataset_filters, manifest_for
from refzarr.scan.hdf5.links import follow_external_link
from refzarr.scan.hdf5.names import NotText, not_text, shown
from refzarr.scan.hdf5.nofill import lengthen_unfilled, written_without_fill
from refzarr.scan.hdf5.ohdr import header_address
from refzarr.scan.hdf5.scale_names import ScaleNames
from refzarr.scan.hdf5.source import OpenSource, open_source
from refzarr.scan.hdf5.types import creation_plist, fill_value, storage_dtype, type_attributes
from refzarr.scan.hdf5.unlimited import NetcdfExtents, extend_to
from refzarr.scan.hdf5.vlen import decoded_array, needs_decoding
from refzarr.scan.result import ScannedGroup, Skipped, build_or_skip

__all__ = ["Hdf5Scanner"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Hdf5Scanner(ScanOptions):
    """Scan HDF5 and netCDF4 files into reference groups.

    Takes the options every scanner takes (`ScanOptions`: ``storage_options``,
    ``inline_threshold``, ``on_unsupported``, ``inline_coordinates``) and:

    Parameters
    ----------
    contiguous_chunk_bytes
        None (default): a contiguous (unchunked) dataset is one chunk. An int: it is cut into
        chunks of at most about this many bytes (whole rows of its leading axes, sizes that
        divide the axis where possible), so that reading a slice fetches only what it needs.
        External raw data files are cut the same way.

    Notes
    -----
    ``inline_threshold`` 0 still holds compact datasets (they have no byte range of their
    own) in the reference set.

    Examples
    --------
    >>> scanner = Hdf5Scanner(on_unsupported="skip")  # doctest: +SKIP
    >>> groups = list(executor.map(scanner, urls))  # doctest: +SKIP
    """

    contiguous_chunk_bytes: int | None = None

    def __post_init__(self) -> None:
        ScanOptions.__post_init__(self)
        check_chunk_bytes(self.contiguous_chunk_bytes)

    def __call__(self, url: str) -> ScannedGroup:
        """Scan one file (a local path or an fsspec URL).

        Returns
        -------
        ScannedGroup
            The root group; ``skipped`` lists what ``on_unsupported="skip"`` left out.
        """
        with open_source(str(url), self.storage_options) as source:
            walk = _Walk(self, source)
            try:
                root = walk.group(source.h5, frozenset())
            except RefzarrError:
                raise
            except OSError as exc:  # h5py reading a damaged object header, B-tree, ...
                raise ScanError(f"{source.url}: reading the HDF5 structure failed: {exc}") from exc
            except (RuntimeError, TypeError, KeyError, IndexError, ValueError) as exc:
                # HDF5 on damaged structures (B-tree signatures, heap free lists, link cycles)
                raise ScanError(
                    f"{source.url}: reading the HDF5 structure failed ({type(exc).__name__}: "
                    f"{exc}); the file is damaged, or refzarr met something it does not expect"
                ) from exc
        return ScannedGroup(root.attributes, root.members, tuple(walk.skipped))


@dataclass
class _Walk:
    """The state of one scan: what was skipped, arrays seen (hard links), phony dimensions."""

    options: Hdf5Scanner
    source: OpenSource
    skipped: list[Skipped] = field(default_factory=list)
    arrays: dict[int, RefArray] = field(default_factory=dict)
    datasets: dict[int, RefArray | None] = field(default_factory=dict)
    """What each dataset reached through a link became (None: a netCDF dimension), by header
    address."""
    groups: dict[int, RefGroup] = field(default_factory=dict)
    """Each group built once for all the links that name it (`linked_group`), by header
    address."""
    phony: PhonyDimensions = field(default_factory=PhonyDimensions)
    dimids: NetcdfDimensionIds = field(default_factory=NetcdfDimensionIds)
    netcdf: NetcdfExtents = field(default_factory=NetcdfExtents)
    walked: Collections = field(default_factory=dict)
    """Global heap collections checked so far (`global_heap`), by position."""
    unlimited_only: set[str] = field(default_factory=set)
    """Paths of the netCDF dimensions without a variable that are unlimited."""
    headers: ObjectHeaders = field(init=False)
    scale_names: ScaleNames = field(init=False)

    def __post_init__(self) -> None:
        source = self.source
        self.headers = ObjectHeaders(source.h5, source.read_range, source.size, source.url)
        self.netcdf.headers = self.headers
        self.scale_names = self.netcdf.scale_names = ScaleNames(self.headers)

    @cached_property
    def heap(self) -> HeapFile:
        """What reading global heap descriptors takes from the file (`heap_file`), when first
        needed."""
        return heap_file(self.source.h5, self.headers.superblock())

    def where(self, path: str, kind: str = "dataset") -> str:
        return f"{self.source.url}: {kind} {path!r}"

    def guarded(self, path: str, build: Callable[[], T]) -> T | None:
        """``build()``, or None after recording the skip when unsupported and skipping."""
        return build_or_skip(build, path, self.options.on_unsupported, self.skipped)

    def skip_attribute(self, path: str) -> Callable[[str, str], None] | None:
        if self.options.on_unsupported == "raise":
            return None
        return lambda name, reason: self.skipped.append(Skipped(f"{path}@{name}", reason))

    def group(
        self, group: h5py.Group, ancestors: frozenset[Any], address: int | None = None
    ) -> RefGroup:
        """A group and everything below it (``address``: its header's, when known)."""
        inside = ancestors | {group.id}
        members: dict[str, RefArray | RefGroup] = {}
        group_path = group.name  # asked once: h5py asks HDF5 each time
        address = header_address(group.id) if address is None else address
        for name, target, link in self.links(group, address):
            path = _join(group_path, shown(name))
            if isinstance(name, bytes):  # not UTF-8: no key, no variable name for it
                self.guarded(path, partial(_refuse, self.where(group_path, "group"), name))
                continue
            build = partial(self.member, group, name, inside, path, target, link)
            member = self.guarded(path, build)
            if member is not None:
                members[variable_name(name, group)] = member
        header = self.headers.attributes(group.id, address)
        table = AttributeTable(group, header=header)
        self.check_attribute_heaps(group, table, address, self.where(group_path, "group"))
        attrs = read_attributes(
            group, self.where(group_path, "group"), self.skip_attribute(group_path), table
        )
        with_types(attrs, {}, mark=False, unlimited=self.unused_unlimited(group_path, members))
        return RefGroup(attrs, members)

    def unused_unlimited(
        self, group_path: str, members: dict[str, RefArray | RefGroup]
    ) -> list[str]:
        """The unlimited netCDF dimensions of the group at ``group_path`` that no array of it
        uses (each array records its own): netCDF4-python lists them all as unlimited."""
        if not self.unlimited_only:
            return []
        prefix = group_path.rstrip("/") + "/"
        names = [
            path[len(prefix) :]
            for path in sorted(self.unlimited_only)
            if path.startswith(prefix) and "/" not in path[len(prefix) :]
        ]
        used = {
            dim
            for member in members.values()
            if isinstance(member, RefArray)
            for dim in member.meta.dimension_names or ()
        }
        return [name for name in names if name not in used]

    def links(self, group: h5py.Group, address: int) -> list[tuple[Any, int | None, Link | None]]:
        """(name, header address of the object a hard link names, the link when read from
        the file) of each link of ``group`` (its header at ``address``), in h5py's order:
        read from the file for groups with a link info message, else listed by h5py."""
        links = self.headers.links(group.id, address)
        if links is None:  # a symbol table: h5py lists it
            names = list(group)
            addresses = self.scale_names.add_group(group, names)
            return [(name, addresses.get(name), None) for name in names]
        self.scale_names.add_links(group, links)
        return [(link.name, _hard_address(link), link) for link in links]

    def check_attribute_heaps(
        self, obj: h5py.HLObject, table: AttributeTable, address: int | None, where: str
    ) -> None:
        """ScanError when a variable-length attribute of ``obj`` points into a damaged global
        heap collection, checked before h5py reads it (only the values left to h5py: those
        read from the header are never variable-length); those that cannot be checked are
        refused in ``table`` (the whole object when HDF5 reads them for refzarr)."""
        pending = [name for name in table.names if not table.is_read(name)]
        if not pending:
            return
        data = self.headers.attribute_data(obj.id, address)
        read, size = self.source.read_range, self.source.size
        refused = attribute_heap_refusals(
            obj, self.heap, pending, data, read, size, where, self.walked
        )
        for name, reason in refused.items():
            message = f"{where}: attribute {name!r}: {reason}"
            if name in INTERNAL_ATTRS or name in ("CLASS", "NAME"):
                raise UnsupportedFeatureError(message)
            table.refuse(name, message)  # type: ignore[arg-type]
        if data:
            strings = self.headers.vlen_strings(obj.id, address)
            wanted = _heap_string_data(pending, refused, data, strings)
            for name, value in heap_strings(self.heap, wanted, read, self.walked).items():
                table.settle(name, value)

    def member(
        self,
        group: h5py.Group,
        name: str,
        ancestors: frozenset[Any],
        path: str,
        address: int | None = None,
        link: Link | None = None,
    ) -> RefArray | RefGroup | None:
        """One link of a group (at ``path``): a subgroup, an array, or None (named
        datatypes, dimensions); ``address``: the header address of the object a hard link
        names, when known; ``link``: the link as read from the file, when it was."""
        if _is_external(group, name) if link is None else link.kind == EXTERNAL:
            return self.external_member(group, name, ancestors, path, link)
        if address is not None and address in self.datasets:  # a dataset scanned already
            return self.dataset_member(self.datasets[address], group, name, path)
        item = self.opened(group, name, path, address)
        if item.id.fileno != group.id.fileno:  # a soft link through an external link
            raise UnsupportedFeatureError(
                f"{self.where(path, 'link')}: soft link into another file through an external "
                "link; link to the object with an external link instead"
            )
        if isinstance(item, h5py.Group):
            if item.id in ancestors:
                raise UnsupportedFeatureError(
                    f"{self.where(path, 'group')}: links back to its parent"
                )
            return self.linked_group(item, ancestors, address)
        if not isinstance(item, h5py.Dataset):
            return None
        return self.dataset_member(self.linked_dataset(item, path), group, name, path)

    def external_member(
        self,
        group: h5py.Group,
        name: str,
        ancestors: frozenset[Any],
        path: str,
        link: Link | None,
    ) -> RefArray | RefGroup | None:
        """The object the external link ``name`` of ``group`` names, scanned in its file."""
        if link is None or not isinstance(link.value, tuple):
            target = group.get(name, getlink=True)
        else:
            target = h5py.ExternalLink(*link.value)
        return follow_external_link(
            target,
            path,
            ancestors,
            self.source,
            lambda source: _Walk(self.options, source, phony=self.phony),
            self.skipped,
        )

    def opened(self, group: h5py.Group, name: str, path: str, address: int | None) -> h5py.HLObject:
        """The object the hard or soft link ``name`` of ``group`` names, opened."""
        try:
            item = _open_member(group, name, address)
        except _LinkCycleError:
            raise UnsupportedFeatureError(
                f"{self.where(path, 'link')}: soft links that lead round in a circle (HDF5: "
                "too many links); nothing to reference there"
            ) from None
        except _ChecksumError as exc:
            raise ScanError(
                f"{self.where(path, 'object')}: its object header fails its checksum (HDF5: "
                f"{exc}); the file is corrupt (checksum mismatch: rewrite it, or restore it "
                "from a good copy)"
            ) from None
        except _DamagedHeaderError as exc:
            raise ScanError(
                f"{self.where(path, 'object')}: its object header cannot be read (HDF5: {exc}); "
                "the file is damaged (restore it from a good copy)"
            ) from None
        except _DamagedTargetError as exc:
            raise ScanError(
                f"{self.where(path, 'link')}: soft link to {exc.target!r}: the object it "
                f"names is there but cannot be read (HDF5: {exc}); the file is damaged "
                "(restore it from a good copy)"
            ) from None
        if item is None:
            raise UnsupportedFeatureError(f"{self.where(path, 'link')}: dangling soft link")
        return item

    def linked_group(
        self, item: h5py.Group, ancestors: frozenset[Any], address: int | None
    ) -> RefGroup:
        """The group a link names (``address``: its header's, when known), built once
        however many hard or soft links name it.

        What a group holds depends on where it is only through the checks of links (soft,
        hard or external) that lead back to a group above them, which leave such a link out
        (``skipped`` names it) or raise: a build that left nothing out holds the same
        wherever it is. A group on a cycle of links is never kept: its first build walks
        the cycle.
        """
        key = header_address(item.id) if address is None else address
        found = self.groups.get(key)
        if found is not None:
            return found
        skipped = len(self.skipped)
        group = self.group(item, ancestors, key)
        if len(self.skipped) == skipped:  # nothing left out: the same wherever it is
            self.groups[key] = group
        return group

    def dataset_member(
        self, array: RefArray | None, group: h5py.Group, name: str, path: str
    ) -> RefArray | None:
        """What the link ``name`` of ``group`` to a dataset that became ``array`` (None: a
        netCDF dimension) is: the array, its values loaded when a small coordinate."""
        limit = self.options.inline_coordinates
        if array is None or not limit:
            return array
        key = variable_name(name, group)
        return load_coordinate(
            array, key, self.source.url, self.source.read_range, limit, self.where(path)
        )

    def linked_dataset(self, ds: h5py.Dataset, path: str) -> RefArray | None:
        """The array a dataset reached through a link (at ``path``) is, or None for a netCDF
        dimension; each object (by header address) is scanned once, whatever links name it."""
        key = ds.header_address if isinstance(ds, ScannedDataset) else header_address(ds.id)
        if key in self.datasets:  # another hard or soft link to the same object
            return self.datasets[key]
        header = self.headers.attributes(ds.id, key)
        attrs = AttributeTable(ds, creation_plist(ds), header)
        self.check_attribute_heaps(ds, attrs, key, self.where(path))
        array = None if is_dimension_only(ds, attrs) else self.array(ds, path, attrs)
        if array is None and self.netcdf.unlimited_axes(ds):
            self.unlimited_only.add(path)
        self.datasets[key] = array
        return array

    def array(self, ds: h5py.Dataset, path: str, attrs: AttributeTable | None = None) -> RefArray:
        """A dataset as an array; one seen before under another name is not scanned again."""
        # one object, one header address (what h5py's ObjectID hash is built from, in a file)
        key = ds.header_address if isinstance(ds, ScannedDataset) else header_address(ds.id)
        seen = self.arrays.get(key)
        if seen is None:
            try:
                seen = self.build_array(ds, path, AttributeTable(ds) if attrs is None else attrs)
            except RefzarrError:
                raise
            except NotText as exc:  # the name of a dimension scale
                raise not_text(self.where(path), exc.what, exc.name) from None
            except (OSError, RuntimeError) as exc:  # h5py reading damaged metadata
                raise ScanError(
                    f"{self.where(path)}: reading its HDF5 metadata failed (damaged file?): {exc}"
                ) from exc
            # chunks of one HDF5 chunk index never share bytes; cut contiguous data may
            contiguous = ds.chunks is None
            self.source.check_within_file(seen.manifest, self.where(path), overlaps=contiguous)
            self.arrays[key] = seen
        return seen

    def build_array(self, ds: h5py.Dataset, path: str, table: AttributeTable) -> RefArray:
        where = self.where(path)
        if ds.shape is None:
            raise UnsupportedFeatureError(
                f"{where}: datasets with a null dataspace are not supported"
            )
        tid = ds.id.get_type()
        if needs_decoding(ds, tid):  # vlen strings, object references: decoded and inlined
            attrs = self.array_attributes(ds, path, where, table, tid)
            dims = dimension_names(ds, self.phony, table, self.scale_names, self.dimids)
            if _in_global_heap(ds, tid):  # before h5py reads the heap
                address = getattr(ds, "header_address", None)
                check_global_heaps(
                    ds,
                    self.heap,
                    self.source.read_range,
                    self.source.size,
                    where,
                    partial(self.headers.compact_data, ds.id, address),
                    self.walked,
                )
            unlimited = [dims[axis] for axis in self.netcdf.unlimited_axes(ds)]
            with_types(attrs, {}, mark=False, unlimited=unlimited)
            return decoded_array(ds, where, attrs, dims, self.netcdf.shape(ds, table))
        dtype = storage_dtype(ds, where, tid)
        # codecs before the chunk index: an unsupported filter fails before any chunk is read
        filters = dataset_filters(ds)
        codecs = filters_to_codecs(  # szip sizes: manifest_for checks them chunk by chunk
            filters, dtype, where=where, type_id=tid, szip_sizes_checked=True
        )
        chunks, manifest, codecs = manifest_for(  # a virtual dataset has its sources' codecs
            ds,
            dtype,
            url=self.source.url,
            read_range=self.source.read_range,
            inline_threshold=self.options.inline_threshold,
            where=where,
            codecs=codecs,
            contiguous_chunk_bytes=self.options.contiguous_chunk_bytes,
            fs=getattr(self.source.raw, "fs", None),
            filters=filters,
        )
        if dtype.subdtype is not None:  # an HDF5 array type: its axes become trailing axes
            attrs = self.array_attributes(ds, path, where, table, tid)
            dims = dimension_names(ds, self.phony, table, self.scale_names, self.dimids)
            return unfold_array_type(
                ds,
                dtype,
                codecs,
                chunks,
                manifest,
                attributes=attrs,
                dimension_names=dims,
                phony=self.phony,
                where=where,
            )
        shape = self.netcdf.shape(ds, table)  # unlimited dimensions at their netCDF length
        if shape != tuple(ds.shape) and written_without_fill(ds):  # NC_NOFILL, lengthened
            manifest, fill = lengthen_unfilled(
                ds, dtype, shape, chunks, manifest, codecs, table, where
            )
        else:
            manifest = extend_to(ds, shape, chunks, manifest, where)
            complete = manifest.count_written() == manifest.nchunks
            fill = fill_value(ds, dtype, all_chunks_written=complete, attrs=table)
        attributes = self.array_attributes(ds, path, where, table, tid)
        dims = dimension_names(ds, self.phony, table, self.scale_names, self.dimids)
        with_types(
            attributes,
            {},
            # a fill value that is no _FillValue (netCDF's default fill) reads, masks nothing
            mark=fill is not None and "_FillValue" not in attributes,
            unlimited=[dims[axis] for axis in self.netcdf.unlimited_axes(ds)],
        )
        meta = ArrayMeta(
            shape=shape,
            chunks=chunks,
            dtype=dtype,
            fill_value=fill,
            codecs=codecs,
            attributes=attributes,
            dimension_names=dims,
        )
        return RefArray(meta, manifest)

    def array_attributes(
        self,
        ds: h5py.Dataset,
        path: str,
        where: str,
        table: AttributeTable,
        tid: h5py.h5t.TypeID | None = None,
    ) -> dict[str, Any]:
        attrs = read_attributes(ds, where, self.skip_attribute(path), table)
        attrs.update(type_attributes(ds, tid))  # enum mapping, opaque tag
        return attrs


def _refuse(where: str, name: bytes) -> None:
    """`UnsupportedFeatureError` for the link ``name`` (not UTF-8) of the group at ``where``."""
    raise not_text(where, "link", name)


def _is_external(group: h5py.Group, name: str) -> bool:
    """Whether the link ``name`` of ``group`` is an external link."""
    return bool(group.id.links.get_info(_encode(name)).type == h5l.TYPE_EXTERNAL)


def _is_hard(group: h5py.Group, name: str) -> bool:
    """Whether the link ``name`` of ``group`` is a hard link."""
    return bool(group.id.links.get_info(_encode(name)).type == h5l.TYPE_HARD)


def _open_member(group: h5py.Group, name: str, address: int | None) -> h5py.HLObject | None:
    """``group.get(name)`` for a hard or soft link (None when dangling), opened directly
    (``address``: the header address of the object a hard link names, when known)."""
    try:
        oid = h5o.open(group.id, _encode(name))
    except KeyError as exc:
        reason = str(exc.args[0]) if exc.args else str(exc)
        if "checksum" in str(exc):  # HDF5 verified the object's header: not a dangling link
            raise _ChecksumError(reason) from exc
        if _is_hard(group, name):  # a hard link names an object: its header is damaged
            raise _DamagedHeaderError(reason) from exc
        target = _damaged_target(group, _encode(name))
        if target is not None:  # a soft link to an object that is there
            raise _DamagedTargetError(reason, target) from exc
        return None
    except RuntimeError as exc:  # soft links that lead round in a circle
        if "too many links" not in str(exc):
            raise
        raise _LinkCycleError(name) from exc
    kind = h5i.get_type(oid)
    if kind == h5i.DATASET:
        ds = ScannedDataset(oid, readonly=True)  # scanned files are always opened read-only
        if address is not None:
            ds.header_address = address
        return ds
    if kind == h5i.GROUP:
        return h5py.Group(oid)
    return group.get(name)  # a named datatype: h5py's own object


def _damaged_target(group: h5py.Group, name: bytes) -> str | None:
    """The path the soft link ``name`` of ``group`` holds when HDF5 could not open what it
    names although it is there (its header, or that of a group on the way, damaged); None
    when it names nothing (dangling), or is no soft link."""
    links = group.id.links
    if links.get_info(name).type != h5l.TYPE_SOFT:
        return None
    target: bytes = links.get_val(name)
    text = target.decode("utf8", "replace")
    try:
        if h5o.exists_by_name(group.id, name):  # HDF5 finds it without reading its header
            return text
    except (KeyError, RuntimeError):  # a group on the way is absent or cannot be read
        pass
    parts = [part for part in target.split(b"/") if part]
    prefix = b"/" if target.startswith(b"/") else b""
    for part in parts[:-1]:
        prefix += part
        try:
            h5o.open(group.id, prefix)
        except KeyError:
            return text if _exists(group, prefix) else None
        prefix += b"/"
    return None


def _exists(group: h5py.Group, path: bytes) -> bool:
    """Whether ``path`` (from ``group``) names an object (without reading its header)."""
    try:
        return bool(h5o.exists_by_name(group.id, path))
    except (KeyError, RuntimeError):
        return False


def _hard_address(link: Link) -> int | None:
    """The header address of the object ``link`` names when it is a hard link."""
    return link.value if link.kind == HARD and isinstance(link.value, int) else None


def _in_global_heap(ds: h5py.Dataset, tid: h5t.TypeID) -> bool:
    """Whether the values of a dataset that `needs_decoding` point into the global heap:
    variable-length strings and sequences, region references (object references are
    addresses)."""
    if tid.get_class() in (h5t.STRING, h5t.VLEN):
        return True
    return h5py.check_ref_dtype(ds.dtype) is h5py.RegionReference


def _heap_string_data(
    names: list[str],
    refused: Mapping[str | bytes, str],
    data: Mapping[bytes, tuple[int | None, bytes]],
    strings: Mapping[bytes, tuple[int, ...]],
) -> dict[str, tuple[bytes, tuple[int, ...]]]:
    """The stored descriptors and dimensions of the plain variable-length strings among
    attributes ``names`` (those checked, not ``refused``), by name, for `heap_strings`."""
    out = {}
    for name in names:
        key = _encode(name)
        if name not in refused and key in strings and key in data:
            out[name] = (data[key][1], strings[key])
    return out


class _LinkCycleError(Exception):
    """Soft links that lead round in a circle (HDF5 gives up: "too many links")."""


class _ChecksumError(Exception):
    """An object whose header HDF5 found failing its checksum."""


class _DamagedHeaderError(Exception):
    """An object a hard link names whose header HDF5 cannot read (signature, version, ...)."""


class _DamagedTargetError(Exception):
    """An object a soft link names, there but not opened by HDF5 (its header, or that of a
    group on the way, damaged)."""

    def __init__(self, reason: str, target: str) -> None:
        super().__init__(reason)
        self.target = target


def _encode(name: str | bytes) -> bytes:
    """A link name as HDF5 takes it (h5py's names are UTF-8 text, or bytes when not)."""
    return name if isinstance(name, bytes) else name.encode("utf8")


def _join(group: str, name: str) -> str:
    return f"{group.rstrip('/')}/{name}"
