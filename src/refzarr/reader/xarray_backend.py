"""The xarray backend ``engine="refzarr"`` and `open_dataset`: lazy variables read by `ArrayReader`.

Variables, dimensions and attributes come from the model the way xarray's zarr backend presents
Zarr v2 (``_ARRAY_DIMENSIONS``, the Zarr fill value as ``_FillValue``), and CF decoding is
xarray's own, so a dataset opened here equals the same references opened with ``engine="zarr"``,
only read faster: every indexing request becomes one batched fetch and a parallel decode. Arrays
with irregular chunk grids (which Zarr v2 cannot describe) open here too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.backends.common import AbstractDataStore
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing

from refzarr.errors import RefFormatError, SourceNotFoundError
from refzarr.formats.api import read
from refzarr.io import RangeReader
from refzarr.model import ArrayMeta, RefArray, RefGroup
from refzarr.model.attr_types import (
    netcdf_family,
    netcdf_masking,
    source_layout,
    typed_attributes,
    unlimited_dimensions,
)
from refzarr.model.frozen import thaw_json
from refzarr.reader.array import ArrayReader, read_many
from refzarr.reader.netcdf_view import (
    as_stored,
    netcdf_encoding,
    presented_dtype,
    single_source,
)
from refzarr.reader.shared import SetOrigin, set_origin, shared_reader
from refzarr.sources.guard import CheckSources, SourceGuard, source_guard

__all__ = ["RefzarrBackendEntrypoint", "open_dataset", "open_datatree", "open_groups"]

_SUFFIXES = (".json", ".json.zst", ".json.gz", ".parq", ".parquet")

_INDEX_PRELOAD_BYTES = 64 * 2**20
"""Index coordinates up to this many bytes in all are read at open, in one batch."""


class RefzarrBackendArray(BackendArray):
    """A referenced array as xarray's lazy backend array (basic indexing, batched reads).

    With an ``origin`` (the set was opened from a path or URL) it pickles as that origin, its
    path and metadata, not its manifest: a dask worker process reads the set once and shares
    it between its tasks (`refzarr.reader.shared`).
    """

    def __init__(
        self,
        reader: ArrayReader,
        dtype: np.dtype[Any] | None = None,
        origin: SetOrigin | None = None,
    ) -> None:
        self.reader = reader
        self.shape = reader.shape
        self.dtype = native_order(reader.dtype if dtype is None else dtype)
        self.origin = origin

    def __reduce__(self) -> tuple[Any, ...]:
        if self.origin is None:
            return (RefzarrBackendArray, (self.reader, self.dtype))
        meta = self.reader.array.meta
        return (_shared_array, (self.origin, self.reader.name, meta, self.dtype))

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray[Any, Any]:
        return indexing.explicit_indexing_adapter(  # type: ignore[no-any-return]
            key, self.shape, indexing.IndexingSupport.BASIC, self._read
        )

    def _read(self, key: Any) -> np.ndarray[Any, Any]:
        values = self.reader.read(key)
        if values.dtype != self.dtype and (self.dtype.names or values.dtype.kind in "biufc"):
            return values.astype(self.dtype)
        return values


def _shared_array(
    origin: SetOrigin, path: str, meta: ArrayMeta, dtype: np.dtype[Any]
) -> RefzarrBackendArray:
    """A pickled `RefzarrBackendArray` of a set opened by path, in the process unpickling it."""
    return RefzarrBackendArray(shared_reader(origin, path, meta), dtype, origin)


def native_order(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """``dtype`` in native byte order: numbers, and structured dtypes field by field (sub-array
    fields too); others as given. The values are unchanged; ``encoding["dtype"]`` keeps the
    stored order (but for netCDF3 sources, which netCDF4-python names native too).

    xarray makes big-endian variables native by their kind and size, which turns a record
    type into raw void (``|V1556``) that its own reading then cannot cast to. And xarray's
    ``_Unsigned`` decoding views the ``_FillValue`` in the variable's dtype as unsigned
    native bytes, so a big-endian variable (every netCDF3 one) would mask a byte-swapped
    fill value (1 as 256): netCDF4-python hands netCDF3 data to xarray native.
    """
    if dtype.names or (dtype.kind in "biufc" and not dtype.isnative):
        return dtype.newbyteorder("=")
    return dtype


class RefzarrDataStore(AbstractDataStore):
    """One group of a reference set, presented to xarray's CF decoding."""

    def __init__(
        self,
        group: RefGroup,
        path: str,
        reader: RangeReader,
        *,
        use_zarr_fill_value_as_mask: bool = True,
        origin: SetOrigin | None = None,
    ) -> None:
        self.group = group
        self.path = path
        self.reader = reader
        self.use_zarr_fill_value_as_mask = use_zarr_fill_value_as_mask
        self.origin = origin

    def _arrays(self) -> dict[str, RefArray]:
        return {
            name: member
            for name, member in self.group.members.items()
            if isinstance(member, RefArray)
        }

    def get_variables(self) -> dict[str, xr.Variable]:
        arrays = self._arrays()
        readers = {
            name: ArrayReader(array, self._where(name), self.reader)
            for name, array in arrays.items()
        }
        loaded = self._load_indexes(arrays, readers)
        return {
            name: self._variable(name, array, loaded.get(name, readers[name]))
            for name, array in arrays.items()
        }

    def _where(self, name: str) -> str:
        return f"{self.path}/{name}" if self.path else name

    def _load_indexes(
        self, arrays: Mapping[str, RefArray], readers: Mapping[str, ArrayReader]
    ) -> dict[str, np.ndarray[Any, Any]]:
        """Index coordinates (1-D, named like their dimension), read together in one batch.

        xarray loads them at once to build indexes; one by one they would cost one request
        each, together one for all (neighbours merged). Limited to `_INDEX_PRELOAD_BYTES`.
        """
        chosen = [
            name
            for name, array in arrays.items()
            if array.meta.dimension_names == (name,) and array.meta.dtype.kind != "O"
        ]
        total = sum(arrays[n].meta.dtype.itemsize * arrays[n].meta.shape[0] for n in chosen)
        if not chosen or total > _INDEX_PRELOAD_BYTES:
            return {}
        values = read_many([readers[name] for name in chosen], self.reader)
        return dict(zip(chosen, values, strict=True))

    def _variable(
        self, name: str, array: RefArray, source: ArrayReader | np.ndarray[Any, Any]
    ) -> xr.Variable:
        meta = array.meta
        where = self._where(name)
        dims = meta.dimension_names
        if dims is None:
            raise RefFormatError(
                f"{where}: no dimension names (_ARRAY_DIMENSIONS); xarray needs them. Add them "
                "to the references, or open the array with zarr through refzarr.ReferenceStore"
            )
        data: Any = (
            source.astype(native_order(source.dtype), copy=False)
            if isinstance(source, np.ndarray)
            else indexing.LazilyIndexedArray(
                RefzarrBackendArray(source, presented_dtype(meta), self.origin)
            )
        )
        raw = _thaw(meta.attributes)
        # NCZarr's bookkeeping (``_nczarr_array``), hidden as netCDF-C hides it
        attrs = {k: v for k, v in typed_attributes(raw).items() if not k.startswith("_nczarr")}
        masking = self.use_zarr_fill_value_as_mask and not netcdf_masking(raw)
        if masking and meta.fill_value is not None:
            attrs["_FillValue"] = _python_scalar(meta.fill_value)
        if meta.dtype.kind == "S" and isinstance(raw.get("_FillValue"), str):
            attrs["_FillValue"] = _char_fill(raw["_FillValue"], meta.dtype.itemsize)
        stored = as_stored(meta, source_layout(raw))  # a loaded coordinate: as in its file
        encoding = netcdf_encoding(stored, name, attrs, dims)
        if netcdf_family(raw) == 3 and isinstance(encoding.get("dtype"), np.dtype):
            # netCDF-C hands netCDF3 data over in native byte order, and netCDF4-python
            # names that as the variable's dtype
            encoding["dtype"] = native_order(encoding["dtype"])
        encoding.update(_chunk_encoding(stored, dims))
        # the reference set's codecs, for information: not under "filters", which to_zarr
        # would pass to zarr (it wants codec objects; some of ours cannot encode)
        encoding["codecs"] = [dict(codec) for codec in meta.codecs]
        data_file = single_source(array.manifest)
        if data_file is not None:
            encoding["source"] = data_file
        return xr.Variable(dims, data, attrs, encoding)

    def get_attrs(self) -> dict[str, Any]:
        attrs = typed_attributes(_thaw(self.group.attributes))
        # NCZarr's bookkeeping (netCDF-C's own, _NCProperties & co., is never scanned)
        return {k: v for k, v in attrs.items() if not k.startswith("_nczarr")}

    def get_dimensions(self) -> dict[str, int]:
        return {
            dim: size
            for array in self._arrays().values()
            for dim, size in zip(array.meta.dimension_names or (), array.meta.shape, strict=True)
        }

    def get_encoding(self) -> dict[str, Any]:
        arrays = self._arrays().values()
        unlimited = {d for a in arrays for d in unlimited_dimensions(a.meta.attributes)}
        # and the group's unlimited dimensions that no array uses (recorded on the group)
        unlimited.update(unlimited_dimensions(self.group.attributes))
        return {"unlimited_dims": unlimited}

    def close(self) -> None:
        """Nothing to close: files are opened per read."""


class RefzarrBackendEntrypoint(BackendEntrypoint):
    """``xr.open_dataset(refs, engine="refzarr")`` for JSON / Parquet references or a RefGroup."""

    description = "Open kerchunk / refzarr reference sets (JSON, Parquet, RefGroup) with refzarr"
    url = "https://github.com/refzarr/refzarr/blob/main/docs/reading.md"
    open_dataset_parameters = (
        "filename_or_obj",
        "drop_variables",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "use_cftime",
        "decode_timedelta",
        "group",
        "storage_options",
        "allowed_protocols",
        "use_zarr_fill_value_as_mask",
        "auto_complex",
        "check_sources",
    )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        if isinstance(filename_or_obj, RefGroup):
            return True
        if isinstance(filename_or_obj, str | os.PathLike):
            return os.fspath(filename_or_obj).lower().endswith(_SUFFIXES)
        return False

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool = True,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        group: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        allowed_protocols: Sequence[str] | None = None,
        use_zarr_fill_value_as_mask: bool = True,
        auto_complex: bool | None = None,
        check_sources: CheckSources | SourceGuard = "local",
    ) -> xr.Dataset:
        # auto_complex: accepted as engine="netcdf4" accepts it; complex numbers stored as
        # netCDF-C's (r, i) compounds are complex whether or not it is given (h5py's reading)
        root = _load(filename_or_obj, storage_options)
        reader = _reader(root, filename_or_obj, storage_options, allowed_protocols, check_sources)
        return self._open_group(
            root,
            group,
            reader,
            origin=_origin(filename_or_obj, reader),
            use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            drop_variables=drop_variables,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )

    def _open_group(
        self,
        root: RefGroup,
        group: str | None,
        reader: RangeReader,
        *,
        use_zarr_fill_value_as_mask: bool,
        origin: SetOrigin | None = None,
        **decoding: Any,
    ) -> xr.Dataset:
        """The group at path ``group`` of ``root``, read through ``reader``, CF-decoded."""
        path = (group or "").strip("/")
        store = RefzarrDataStore(
            _subgroup(root, path),
            path,
            reader,
            use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
            origin=origin,
        )
        return StoreBackendEntrypoint().open_dataset(store, **decoding)

    def open_groups_as_dict(
        self,
        filename_or_obj: Any,
        *,
        storage_options: Mapping[str, Any] | None = None,
        allowed_protocols: Sequence[str] | None = None,
        check_sources: CheckSources | SourceGuard = "local",
        use_zarr_fill_value_as_mask: bool = True,
        auto_complex: bool | None = None,
        **decoding: Any,
    ) -> dict[str, xr.Dataset]:
        # one reader for every group: each source file is checked once, not once per group
        root = _load(filename_or_obj, storage_options)
        reader = _reader(root, filename_or_obj, storage_options, allowed_protocols, check_sources)
        origin = _origin(filename_or_obj, reader)
        paths = [""] + [path for path, _ in root.groups() if path]
        return {
            "/" + path: self._open_group(
                root,
                path,
                reader,
                origin=origin,
                use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
                **decoding,
            )
            for path in paths
        }

    def open_datatree(self, filename_or_obj: Any, **kwargs: Any) -> xr.DataTree:
        groups = self.open_groups_as_dict(filename_or_obj, **kwargs)
        try:
            return xr.DataTree.from_dict(groups)
        except ValueError as exc:
            if "not aligned with its parents" not in str(exc):
                raise
            raise ValueError(f"{exc}\n{_UNALIGNED}") from exc


_UNALIGNED = (
    "xarray's DataTree needs every group's dimensions and indexes to align with its "
    "parent's, and this reference set's do not (the overviews of an image pyramid, say). "
    "Open the groups one by one with refzarr.open_groups(refs) (or "
    "xr.open_groups(refs, engine='refzarr')), a dict of Datasets by group path; to build a "
    "DataTree from them, put groups that do not align side by side (siblings) rather than "
    "below one another."
)


def open_dataset(
    refs: Any,
    *,
    chunks: Any = None,
    group: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    allowed_protocols: Sequence[str] | None = None,
    check_sources: CheckSources = "local",
    **xarray_kwargs: Any,
) -> xr.Dataset:
    """Open a reference set as an xarray Dataset read by refzarr.

    Parameters
    ----------
    refs
        A `RefGroup`, a kerchunk reference dict, or the path / URL of a JSON or Parquet
        reference set.
    chunks
        As for `xarray.open_dataset`: None gives lazy numpy-backed variables; ``{}`` gives dask
        arrays chunked like the references; a mapping gives those chunks.
    group
        Path of the group to open (default: the root).
    storage_options
        fsspec options for the referenced files (and for ``refs`` when it is a URL).
    allowed_protocols
        Protocols or URL prefixes the references may read (see `ReferenceStore`).
    check_sources
        Compare each source file with the state its scan recorded (`RefGroup.sources`) the
        first time a chunk of it is read, and raise `SourceChangedError` for one that changed:
        ``"local"`` (default) local files (one ``stat`` each), ``"all"`` remote ones too (one
        metadata request each), ``"none"`` / False nothing. A set that records no sources is
        read unchecked.
    **xarray_kwargs
        Passed to `xarray.open_dataset` (``decode_times``, ``mask_and_scale``, ...).

    Returns
    -------
    xarray.Dataset
    """
    source = _given(refs, storage_options)
    return xr.open_dataset(
        source,
        engine=RefzarrBackendEntrypoint,
        chunks=chunks,
        group=group,
        storage_options=storage_options,
        allowed_protocols=allowed_protocols,
        check_sources=check_sources,
        **xarray_kwargs,
    )


def open_datatree(
    refs: Any,
    *,
    storage_options: Mapping[str, Any] | None = None,
    check_sources: CheckSources = "local",
    **xarray_kwargs: Any,
) -> xr.DataTree:
    """Open every group of a reference set as an `xarray.DataTree` read by refzarr.

    ``check_sources`` as for `open_dataset` (each source file is checked once for all
    groups). Raises ValueError, as `xarray.open_datatree` does, when a group does not align
    with its parent (see `open_groups` for those reference sets).
    """
    source = _given(refs, storage_options)
    return xr.open_datatree(
        source,
        engine=RefzarrBackendEntrypoint,
        storage_options=storage_options,
        check_sources=check_sources,
        **xarray_kwargs,
    )


def open_groups(
    refs: Any,
    *,
    storage_options: Mapping[str, Any] | None = None,
    check_sources: CheckSources = "local",
    **xarray_kwargs: Any,
) -> dict[str, xr.Dataset]:
    """Open every group of a reference set as its own `xarray.Dataset`, read by refzarr.

    xarray's way (`xarray.open_groups`) to open groups that `open_datatree` refuses because
    they do not align with their parents: the reduced-resolution levels of a TIFF pyramid
    (``overview_1``, ... with their own ``x`` / ``y``), groups reusing a dimension name at
    another length.

    Parameters
    ----------
    refs
        A `RefGroup`, a kerchunk reference dict, or the path / URL of a JSON or Parquet
        reference set.
    storage_options
        fsspec options for the referenced files (and for ``refs`` when it is a URL).
    check_sources
        As for `open_dataset` (each source file is checked once for all groups).
    **xarray_kwargs
        Passed to `xarray.open_groups` (``chunks``, ``decode_times``, ...).

    Returns
    -------
    dict of str to xarray.Dataset
        Every group by its path (``"/"``, ``"/overview_1"``, ``"/series_1/overview_1"``),
        each with only its own variables.
    """
    source = _given(refs, storage_options)
    return xr.open_groups(
        source,
        engine=RefzarrBackendEntrypoint,
        storage_options=storage_options,
        check_sources=check_sources,
        **xarray_kwargs,
    )


def _given(refs: Any, storage_options: Mapping[str, Any] | None) -> Any:
    """What the engine is given for ``refs``: a path or URL as it is (the engine reads it, and
    its arrays pickle as it: small dask tasks), a reference dict read into a `RefGroup`."""
    if isinstance(refs, RefGroup | str | os.PathLike):
        return refs
    return _load(refs, storage_options)


def _reader(
    root: RefGroup,
    source: Any,
    storage_options: Mapping[str, Any] | None,
    allowed_protocols: Sequence[str] | None,
    check_sources: CheckSources | SourceGuard,
) -> RangeReader:
    """The reader of a reference set, checking its sources as ``check_sources`` says."""
    where = os.fspath(source) if isinstance(source, str | os.PathLike) else None
    return RangeReader(
        storage_options=storage_options,
        allowed=allowed_protocols,
        url_check=source_guard(root, check_sources, where),
    )


def _origin(source: Any, reader: RangeReader) -> SetOrigin | None:
    """Where a set opened from a path or URL is (what its arrays pickle as); None otherwise."""
    if not isinstance(source, str | os.PathLike):
        return None
    return set_origin(os.fspath(source), reader)


def _load(source: Any, storage_options: Mapping[str, Any] | None) -> RefGroup:
    if isinstance(source, RefGroup):
        return source
    return read(source, storage_options)


def _subgroup(root: RefGroup, path: str) -> RefGroup:
    if not path:
        return root
    try:
        node: RefArray | RefGroup | None = root[path]
    except KeyError:
        node = None
    if not isinstance(node, RefGroup):
        # an OSError, as xarray's netCDF4 and h5netcdf backends raise for a missing group
        what = "is an array, not a group" if node is not None else "is not in the reference set"
        groups = [p for p, _ in root.groups() if p]
        raise SourceNotFoundError(
            f"group not found: {path!r} {what}; its groups: {groups or 'none below the root'}"
        )
    return node


def _chunk_encoding(meta: ArrayMeta, dims: Sequence[str]) -> dict[str, Any]:
    """``chunks`` and ``preferred_chunks`` encoding: dask chunks aligned with the references.

    Along an axis whose chunks differ in length the preferred chunks are the explicit sizes
    (dask takes a tuple per axis), and ``chunks`` (the Zarr chunk shape `to_zarr` would
    reuse) is left out: no single chunk length describes such an array.
    """
    if meta.rectilinear is None:
        return {
            "chunks": meta.chunks,
            "preferred_chunks": dict(zip(dims, meta.chunks, strict=True)),
        }
    preferred: dict[str, int | tuple[int, ...]] = {
        dim: chunk if rect is None else rect.sizes
        for dim, chunk, rect in zip(dims, meta.chunks, meta.rectilinear, strict=True)
    }
    return {"preferred_chunks": preferred}


def _thaw(attributes: Mapping[str, Any]) -> dict[str, Any]:
    thawed: dict[str, Any] = thaw_json(attributes)
    return thawed


def _char_fill(text: str, itemsize: int) -> np.bytes_:
    """A ``char`` variable's ``_FillValue`` as engine="netcdf4" shows it: the stored bytes
    (``b"\\x00"`` for NUL, which the scanned text attribute holds as ``""``)."""
    return np.bytes_(text.encode("utf-8").ljust(itemsize, b"\0"))


def _python_scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) and value.dtype.kind in "biufc" else value
