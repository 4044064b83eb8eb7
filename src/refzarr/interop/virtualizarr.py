"""Moving reference sets between refzarr and VirtualiZarr: virtual datasets both ways, and a
parser that makes every format refzarr scans available to ``virtualizarr.open_virtual_dataset``.

VirtualiZarr holds each array as a ``ManifestArray`` (Zarr v3 metadata + a chunk manifest of
path/offset/length). Its manifests hold no inlined chunk before VirtualiZarr 2.6.1, so arrays
refzarr keeps inline travel as loaded numpy variables (as ``open_virtual_dataset`` gives
coordinates), and the parser serves their bytes from an in-memory object store (2.5) or as
VirtualiZarr's own inlined chunks (2.6.1 and later). VirtualiZarr is imported only when called.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from refzarr.errors import MissingDependencyError, RefFormatError, UnsupportedFeatureError
from refzarr.interop.vz_masking import mark, unmark
from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup
from refzarr.model.attr_types import LAYOUT_ATTR, TYPES_ATTR
from refzarr.model.hierarchy import ARRAY_RECORDS_ATTR, refuse_empty_array
from refzarr.model.manifest import WHOLE_FILE

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "RefzarrParser",
    "from_virtual_dataset",
    "to_manifest_group",
    "to_virtual_dataset",
    "to_virtual_datatree",
]

_INSTALL = "pip install 'refzarr[virtualizarr]'"
_INLINED_PATH = "__inlined__"
"""VirtualiZarr's path of an inlined chunk (``INLINED_CHUNK_PATH``, 2.6.1+)."""
_FILE = "file://"


def _virtualizarr() -> Any:
    """``virtualizarr.manifests``, or MissingDependencyError naming the extra."""
    try:
        import virtualizarr.manifests as manifests
    except ImportError as exc:
        raise MissingDependencyError(
            f"moving reference sets to or from VirtualiZarr needs 'virtualizarr', which is not "
            f"installed: {_INSTALL}"
        ) from exc
    return manifests


def _holds_inlined(manifests: Any) -> bool:
    """Whether the installed VirtualiZarr's ChunkManifest holds inlined chunks (2.6.1+)."""
    return "inlined" in inspect.signature(manifests.ChunkManifest.from_arrays).parameters


# -- refzarr -> VirtualiZarr ------------------------------------------------------------------


def to_virtual_dataset(
    group: RefGroup,
    *,
    group_path: str | None = None,
    decode_times: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
    round_trip: bool = True,
) -> xr.Dataset:
    """The arrays of one group as the ``xarray.Dataset`` of ``ManifestArray`` VirtualiZarr uses.

    Parameters
    ----------
    group
        The reference set (from `refzarr.scan`, `refzarr.read`, `refzarr.combine`, ...).
    group_path
        The subgroup to convert (``"a/b"``); None: the root. Its subgroups are left out.
    decode_times
        Passed to xarray's CF decoding of the loaded variables (as ``open_virtual_dataset``).
    storage_options
        fsspec options to read inlined arrays' chunks that are references, and the size of
        whole-file references (VirtualiZarr needs every length).
    round_trip
        Note in each variable's attribute-types record (``_nczarr_attr``, which refzarr's
        reader hides) what Zarr v3 cannot hold (an undefined fill value) and what was added
        to say refzarr's masking rule in v3 terms, so that `from_virtual_dataset` gives back
        exactly this group. False: only the v3 attributes, as VirtualiZarr's parsers give.

    Returns
    -------
    xarray.Dataset
        Arrays with references only become ``ManifestArray`` variables (attributes as
        VirtualiZarr keeps them: ``_FillValue`` encoded as xarray's Zarr v3 backend expects);
        arrays with an inlined chunk become loaded numpy variables, CF-decoded as
        ``open_virtual_dataset`` decodes its loaded coordinates.

    Raises
    ------
    UnsupportedFeatureError
        For an array VirtualiZarr cannot hold (irregular chunk grid, Fortran order, a dtype
        Zarr v3 has no name for), naming it.
    """
    import xarray as xr

    context = _Context(_virtualizarr(), storage_options, None, round_trip, decode_times)
    node = _subgroup(group, group_path)
    virtual: dict[str, xr.Variable] = {}
    loaded: dict[str, xr.Variable] = {}
    records: dict[str, Any] = {}
    for name, array in node.members.items():
        if not isinstance(array, RefArray):
            continue
        if _has_inlined(array):
            loaded[name] = _loaded_variable(context, name, array, records)
        else:
            refuse_empty_array(name, array, "VirtualiZarr refuses it (2.8+)")
            marr = _manifest_array(context, name, array, records, name)
            virtual[name] = marr.to_virtual_variable()
    attributes = _with_records(_thaw(node.attributes), records)
    dataset: xr.Dataset = _assemble(xr, virtual, loaded, attributes)
    return dataset


def to_virtual_datatree(
    group: RefGroup,
    *,
    decode_times: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
    round_trip: bool = True,
) -> xr.DataTree:
    """The whole hierarchy as an ``xarray.DataTree`` of virtual datasets, one node per group
    (each as `to_virtual_dataset` makes it; same parameters)."""
    import xarray as xr

    nodes = {
        f"/{path}": to_virtual_dataset(
            group,
            group_path=path or None,
            decode_times=decode_times,
            storage_options=storage_options,
            round_trip=round_trip,
        )
        for path, _ in group.groups()
    }
    return xr.DataTree.from_dict(nodes)


def _subgroup(group: RefGroup, path: str | None) -> RefGroup:
    node = group if not path else group[path]
    if not isinstance(node, RefGroup):
        raise RefFormatError(f"{path!r} is an array, not a group")
    return node


def _has_inlined(array: RefArray) -> bool:
    return any(block.inlined for block in array.manifest.iter_blocks())


def _assemble(
    xr: Any, virtual: dict[str, Any], loaded: dict[str, Any], attrs: dict[str, Any]
) -> Any:
    """A Dataset as VirtualiZarr builds one: no index over a virtual coordinate."""
    named = {c for v in (*virtual.values(), *loaded.values()) for c in _coordinate_names(v)}
    named |= set(str(attrs.pop("coordinates", "")).split())

    def is_coord(name: str, var: Any) -> bool:
        return name in named or var.dims == (name,)

    coords = xr.Coordinates({n: v for n, v in virtual.items() if is_coord(n, v)}, indexes={})
    data_vars = {n: v for n, v in virtual.items() if not is_coord(n, v)}
    data_vars |= {n: v for n, v in loaded.items() if not is_coord(n, v)}
    ds = xr.Dataset(data_vars, coords=coords, attrs=attrs)
    return ds.assign_coords({n: v for n, v in loaded.items() if is_coord(n, v)})


def _coordinate_names(var: Any) -> list[str]:
    text = var.attrs.get("coordinates", var.encoding.get("coordinates", ""))
    return str(text).split() if isinstance(text, str) else []


def to_manifest_group(
    group: RefGroup,
    *,
    registry: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    round_trip: bool = False,
    skip_unsupported: bool = False,
) -> Any:
    """The whole hierarchy as a VirtualiZarr ``ManifestGroup`` (what a parser returns).

    Inlined chunks become VirtualiZarr inlined chunks where the installed VirtualiZarr has them
    (2.6.1+); before, they are put in an obstore ``MemoryStore`` that is registered in
    ``registry`` under a fresh ``memory://refzarr-inline-<id>`` prefix (needed then).
    ``round_trip`` as in `to_virtual_dataset`; ``skip_unsupported``: leave out the arrays
    VirtualiZarr cannot hold instead of raising `UnsupportedFeatureError`.
    """
    manifests = _virtualizarr()
    sink = None if _holds_inlined(manifests) else _MemorySink(registry)
    context = _Context(manifests, storage_options, sink, round_trip, None, skip_unsupported)
    return _manifest_group(context, group, "")


@dataclass(frozen=True, slots=True)
class _Context:
    """What every array of one conversion to VirtualiZarr shares."""

    manifests: Any
    storage_options: Mapping[str, Any] | None
    sink: _MemorySink | None
    round_trip: bool
    decode_times: bool | None
    skip_unsupported: bool = False


def _manifest_group(context: _Context, group: RefGroup, prefix: str) -> Any:
    arrays, groups = {}, {}
    records: dict[str, Any] = {}
    for name, member in group.members.items():
        path = f"{prefix}{name}"
        if isinstance(member, RefArray):
            try:
                arrays[name] = _manifest_array(context, path, member, records, name)
            except UnsupportedFeatureError:
                if not context.skip_unsupported:
                    raise
        else:
            groups[name] = _manifest_group(context, member, f"{path}/")
    attributes = _with_records(_thaw(group.attributes), records)
    return context.manifests.ManifestGroup(arrays=arrays, groups=groups, attributes=attributes)


class _MemorySink:
    """Inlined chunks as objects of an in-memory store registered in a registry (VirtualiZarr
    before 2.6.1, whose manifests hold references only)."""

    def __init__(self, registry: Any) -> None:
        from obstore.store import MemoryStore

        if registry is None:
            raise RefFormatError("inlined chunks need the ObjectStoreRegistry to serve them from")
        self.prefix = f"memory://refzarr-inline-{uuid.uuid4().hex}"
        self.store = MemoryStore()
        registry.register(self.prefix, self.store)

    def put(self, key: str, data: bytes) -> str:
        self.store.put(key, data)
        return f"{self.prefix}/{key}"


def _manifest_array(
    context: _Context, name: str, array: RefArray, records: dict[str, Any], key: str
) -> Any:
    from refzarr.interop.vz_metadata import v3_metadata

    manifest = array.manifest
    missing = manifest.count_written() < manifest.nchunks
    attributes = _hide_records(_vz_attributes(array.meta, context.round_trip), records, key)
    metadata = v3_metadata(name, array.meta, attributes, missing_chunks=missing)
    manifest = _vz_manifest(context, name, array)
    return context.manifests.ManifestArray(metadata=metadata, chunkmanifest=manifest)


def _vz_attributes(meta: ArrayMeta, notes: bool) -> dict[str, Any]:
    """Attributes as VirtualiZarr keeps them: ``_FillValue`` encoded as xarray's Zarr backend
    expects it in Zarr v3 (base64 for floats); everything else as it is. An undefined fill
    value (which Zarr v3 cannot say: the dtype's default stands in) and refzarr's masking rule
    are carried as `vz_masking.mark` says, so `from_virtual_dataset` restores them."""
    from xarray.backends.zarr import FillValueCoder

    attrs = mark(meta, _thaw(meta.attributes), notes=notes)
    fill = attrs.get("_FillValue")
    if meta.dtype.kind in "biufc" and isinstance(fill, int | float) and not isinstance(fill, bool):
        attrs["_FillValue"] = FillValueCoder.encode(fill, meta.dtype)
    return attrs


def _vz_manifest(context: _Context, name: str, array: RefArray) -> Any:
    source = array.manifest
    ids, offsets, lengths = source.path_id, source.offset.copy(), source.length.copy()
    normal = _normalized_paths(context.manifests, name, source.paths)
    table = np.array([*normal, ""], dtype=np.dtypes.StringDType())
    paths = table[np.where(ids >= 0, ids, len(normal)).ravel()].reshape(ids.shape)
    _whole_files(source.paths, ids, lengths, context.storage_options)
    inlined, sink = source.inlined, context.sink
    kwargs: dict[str, Any] = {}
    if sink is None and inlined:  # VirtualiZarr 2.6.1+: its own sentinel path marks them
        kwargs["inlined"] = inlined
        for index, data in inlined.items():
            paths[index], offsets[index], lengths[index] = _INLINED_PATH, 0, len(data)
    elif inlined:
        assert sink is not None
        for index, data in inlined.items():
            key = f"{name}/{'.'.join(map(str, index)) or '0'}"
            paths[index], offsets[index], lengths[index] = sink.put(key, data), 0, len(data)
    return context.manifests.ChunkManifest.from_arrays(
        paths=paths, offsets=offsets, lengths=lengths, validate_paths=False, **kwargs
    )


def _normalized_paths(manifests: Any, name: str, paths: tuple[str, ...]) -> list[str]:
    """Each URL in VirtualiZarr's form (absolute local paths as ``file://`` URIs), as
    VirtualiZarr's own validation gives it, once per unique URL (validating every chunk's path
    costs ~30 s per million chunks)."""
    if not paths:
        return []
    column = np.array(paths, dtype=np.dtypes.StringDType())
    zeros = np.zeros(len(paths), dtype=np.uint64)
    ones = np.ones(len(paths), dtype=np.uint64)  # 2.8 refuses zero-length references
    try:
        probe = manifests.ChunkManifest.from_arrays(
            paths=column, offsets=zeros, lengths=ones, validate_paths=True
        )
    except ValueError as exc:
        raise RefFormatError(
            f"array {name!r}: VirtualiZarr needs absolute paths or URLs in references: {exc}"
        ) from exc
    entries = probe.dict()
    return [str(entries[str(k)]["path"]) for k in range(len(paths))]


def _whole_files(
    paths: tuple[str, ...],
    ids: np.ndarray[Any, Any],
    lengths: np.ndarray[Any, Any],
    storage_options: Mapping[str, Any] | None,
) -> None:
    """Replace WHOLE_FILE lengths by the files' sizes (VirtualiZarr has no whole-file form)."""
    whole = (lengths == WHOLE_FILE) & (ids >= 0)
    if not whole.any():
        return
    import fsspec

    for pid in np.unique(ids[whole]):
        fs, path = fsspec.core.url_to_fs(paths[pid], **dict(storage_options or {}))
        lengths[whole & (ids == pid)] = int(fs.size(path))


def _loaded_variable(
    context: _Context, name: str, array: RefArray, records: dict[str, Any]
) -> xr.Variable:
    """An inlined array's values, CF-decoded as xarray's Zarr backend decodes them."""
    import xarray as xr

    from refzarr.io import RangeReader
    from refzarr.reader.array import ArrayReader

    meta = array.meta
    if meta.dimension_names is None and meta.ndim:
        raise RefFormatError(f"array {name!r} has no dimension names; xarray needs them")
    reader = ArrayReader(array, name, RangeReader(storage_options=context.storage_options))
    attrs = mark(meta, _thaw(meta.attributes), loaded=True, notes=context.round_trip)
    raw_attrs = _hide_records(attrs, records, name)
    raw = xr.Variable(meta.dimension_names or (), reader.read(), raw_attrs)
    times = context.decode_times
    kwargs = {} if times is None else {"decode_times": times}
    return xr.conventions.decode_cf_variable(name, raw, **kwargs)


# -- VirtualiZarr -> refzarr ------------------------------------------------------------------


def from_virtual_dataset(vds: xr.Dataset | xr.DataTree) -> RefGroup:
    """A VirtualiZarr virtual dataset (or DataTree) as a `RefGroup`, ready for `refzarr.write`.

    ``ManifestArray`` variables become referenced arrays (their chunk manifests, codecs as
    numcodecs configs, fill values, attributes with ``_FillValue`` decoded, dimension names);
    loaded variables are CF-encoded back (as xarray writes them) and become inlined arrays of
    one chunk.

    Raises
    ------
    UnsupportedFeatureError
        For what refzarr cannot hold: a Zarr v3 codec with no numcodecs equivalent (sharding,
        ...), an array of variable-length strings or objects; the variable is named.
    """
    import xarray as xr

    _virtualizarr()
    if isinstance(vds, xr.DataTree):
        own = vds.to_dataset(inherit=False)  # a parent's coordinates stay with the parent
        members: dict[str, Any] = dict(from_virtual_dataset(own).members)
        for name, child in vds.children.items():
            members[str(name)] = from_virtual_dataset(child)
        attributes = _jsonable(dict(vds.attrs))
        attributes.pop(ARRAY_RECORDS_ATTR, None)  # its own arrays' (taken in `own`)
        return RefGroup(attributes=attributes, members=members)
    variables, attrs = xr.conventions.encode_dataset_coordinates(vds)
    attrs = _jsonable(dict(attrs))
    records = attrs.pop(ARRAY_RECORDS_ATTR, None)
    records = records if isinstance(records, dict) else {}
    members = {
        str(n): _from_variable(str(n), v, records.get(str(n)) or {}) for n, v in variables.items()
    }
    return RefGroup(attributes=attrs, members=members)


def _from_variable(name: str, var: xr.Variable, records: dict[str, Any]) -> RefArray:
    from virtualizarr.manifests import ManifestArray

    if isinstance(var.data, ManifestArray):
        return _from_manifest_array(name, var, records)
    return _from_loaded(name, var, records)


def _from_manifest_array(name: str, var: xr.Variable, records: dict[str, Any]) -> RefArray:
    from refzarr.interop.vz_metadata import meta_from_v3

    marr = var.data
    attrs = _jsonable(dict(var.attrs)) | records
    meta = meta_from_v3(name, marr.metadata, tuple(map(str, var.dims)), attrs)
    return RefArray(meta, _from_vz_manifest(name, marr.manifest, meta.grid_shape))


def _from_vz_manifest(name: str, manifest: Any, grid: tuple[int, ...]) -> ChunkManifest:
    """A refzarr manifest from VirtualiZarr's public ``dict()`` form (inlined ``data`` too)."""
    if 0 in grid:  # an empty array has no chunk (and VirtualiZarr 2.5's dict() fails on it)
        return ChunkManifest.missing(grid)
    entries = manifest.dict()
    keys, values = list(entries), list(entries.values())
    inlined = {
        _index(key): bytes(entry["data"])
        for key, entry in zip(keys, values, strict=True)
        if entry.get("data") is not None
    }
    if inlined:
        kept = [k for k, e in zip(keys, values, strict=True) if e.get("data") is None]
        keys, values = kept, [entries[k] for k in kept]
    column = np.array([e["path"] for e in values], dtype=np.dtypes.StringDType())
    urls, url_ids = np.unique(column, return_inverse=True)
    return ChunkManifest.from_entries(
        grid,
        _indices(keys, len(grid)),
        [_local(str(u)) for u in urls],
        url_ids.ravel(),
        np.fromiter((e["offset"] for e in values), dtype=np.uint64, count=len(values)),
        np.fromiter((e["length"] for e in values), dtype=np.uint64, count=len(values)),
        inlined,
        where=f"variable {name!r}",
    )


def _index(key: str) -> tuple[int, ...]:
    return () if key in ("", "c") else tuple(int(k) for k in key.split("."))


def _indices(keys: list[str], ndim: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Chunk keys (``"i.j.k"``) as an (n, ndim) array of indices, parsed in one go."""
    if not keys or ndim == 0:
        return np.zeros((len(keys), ndim), dtype=np.int64)
    return np.array(".".join(keys).split("."), dtype=np.int64).reshape(len(keys), ndim)


def _local(url: str) -> str:
    """refzarr keeps local files as plain paths: ``file:///a/b`` -> ``/a/b``."""
    return url.removeprefix(_FILE) if url.startswith(_FILE + "/") else url


def _from_loaded(name: str, var: xr.Variable, records: dict[str, Any]) -> RefArray:
    """A loaded variable, CF-encoded back to what is stored, as one inlined chunk."""
    import xarray as xr

    encoded = xr.conventions.encode_cf_variable(var, name=name)
    values = np.ascontiguousarray(np.asarray(encoded.values))
    if values.dtype.kind == "O":
        raise UnsupportedFeatureError(
            f"variable {name!r} holds Python objects (variable-length strings?); refzarr inlines "
            "fixed-size values only: cast it to a fixed-width dtype ('S' or 'U') first"
        )
    attrs = _jsonable(dict(encoded.attrs)) | records
    fill = attrs.get("_FillValue")
    numeric = isinstance(fill, int | float) and values.dtype.kind in "iufc"
    attrs, fill = unmark(attrs, fill if numeric else None, values.dtype)
    meta = ArrayMeta(
        shape=values.shape,
        chunks=tuple(max(s, 1) for s in values.shape),
        dtype=values.dtype,
        fill_value=fill,
        attributes=attrs,
        dimension_names=tuple(map(str, var.dims)) if var.ndim else None,
    )
    if values.size == 0:
        return RefArray(meta, ChunkManifest.missing(meta.grid_shape))
    return RefArray(meta, ChunkManifest.one_inlined(values.tobytes(), values.ndim))


# -- the parser -------------------------------------------------------------------------------


class RefzarrParser:
    """A VirtualiZarr parser: ``open_virtual_dataset(url, registry=..., parser=RefzarrParser())``
    scans ``url`` with `refzarr.scan` (any format refzarr scans) and gives VirtualiZarr the
    ``ManifestStore`` of the result.

    Parameters
    ----------
    format
        The format's name (``"netcdf3"``, ``"tiff"``, ``"grib"``, ...); None: recognised.
    group
        The subgroup to make the store's root (``"a/b"``); None: the file's root.
    skip_variables
        Arrays of that group to leave out.
    round_trip
        As in `to_virtual_dataset`; False (default): only the Zarr v3 attributes, as
        VirtualiZarr's own parsers give them.
    **scan_options
        Options of `refzarr.scan` (``storage_options`` for fsspec, ``inline_threshold``, ...).
        The registry VirtualiZarr passes is used to read chunks, not to scan.
        ``on_unsupported="skip"`` also leaves out the arrays VirtualiZarr cannot hold.

    Notes
    -----
    Arrays refzarr keeps inline (coordinates it computes, small arrays) have no file bytes to
    reference: with VirtualiZarr 2.6.1+ they are inlined chunks of the manifest; before, they
    are served from an obstore ``MemoryStore`` registered in the registry under a fresh
    ``memory://refzarr-inline-<id>`` prefix (load them, e.g. as coordinates, before writing
    references elsewhere).
    """

    def __init__(
        self,
        format: str | None = None,
        *,
        group: str | None = None,
        skip_variables: Iterable[str] | None = None,
        round_trip: bool = False,
        **scan_options: Any,
    ) -> None:
        self.format = format
        self.group = group
        self.skip_variables = frozenset(skip_variables or ())
        self.round_trip = round_trip
        self.scan_options = scan_options

    def __call__(self, url: str, registry: Any) -> Any:
        """Scan ``url`` and return VirtualiZarr's ``ManifestStore`` of it."""
        from refzarr.scan import scan

        manifests = _virtualizarr()
        scanned = scan(url, format=self.format, **self.scan_options)
        node = _subgroup(scanned, self.group)
        kept = {n: m for n, m in node.members.items() if n not in self.skip_variables}
        node = RefGroup(attributes=node.attributes, members=kept)
        options = self.scan_options.get("storage_options")
        root = to_manifest_group(
            node,
            registry=registry,
            storage_options=options,
            round_trip=self.round_trip,
            skip_unsupported=self.scan_options.get("on_unsupported") == "skip",
        )
        return manifests.ManifestStore(group=root, registry=registry)

    def __repr__(self) -> str:
        return f"RefzarrParser(format={self.format!r}, group={self.group!r})"


# -- helpers ----------------------------------------------------------------------------------


_RECORDS = (TYPES_ATTR, LAYOUT_ATTR)
"""refzarr's per-array records (attribute types with `vz_masking` notes, a loaded
coordinate's source layout): Zarr v2 readers hide them, Zarr v3 readers show them."""


def _hide_records(attrs: dict[str, Any], records: dict[str, Any], key: str) -> dict[str, Any]:
    """``attrs`` without refzarr's per-array records, which go to ``records[key]`` (then into
    the group's hidden `ARRAY_RECORDS_ATTR`: xarray shows no ``_nc`` group attribute)."""
    found = {k: attrs.pop(k) for k in _RECORDS if k in attrs}
    if found:
        records[key] = found
    return attrs


def _with_records(attributes: dict[str, Any], records: dict[str, Any]) -> dict[str, Any]:
    if records:
        attributes[ARRAY_RECORDS_ATTR] = records
    return attributes


def _thaw(value: Any) -> Any:
    from refzarr.model.frozen import thaw_json

    return thaw_json(value)


def _jsonable(value: Any) -> Any:
    """Attributes as JSON values (numpy scalars and arrays to Python numbers and lists)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value
