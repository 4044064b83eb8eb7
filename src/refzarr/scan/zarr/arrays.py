"""One Zarr array (as zarr-python parsed it) as a `RefArray`: its codecs as numcodecs configs,
its chunks from the store's listing, its attributes, dimension names and fill value."""

from __future__ import annotations

import base64
import math
import struct
from typing import Any, Literal

import numpy as np
import zarr

from refzarr.codecs.chunk import decode_whole
from refzarr.errors import RefFormatError, ScanError, UnsupportedFeatureError
from refzarr.model import INLINED, ArrayMeta, ChunkManifest, RefArray
from refzarr.model.meta import DIMENSIONS_ATTR
from refzarr.scan.zarr.chunks import ChunkKeys, chunk_manifest
from refzarr.scan.zarr.listing import StoreListing
from refzarr.scan.zarr.pipeline import Pipeline, model_dtype, v2_pipeline, v3_pipeline

__all__ = ["scan_array"]


def scan_array(
    array: zarr.Array[Any],
    path: str,
    listing: StoreListing,
    inline_threshold: int,
    where: str,
) -> RefArray:
    """The array at ``path`` of the store (``""``: the store is an array).

    Raises
    ------
    UnsupportedFeatureError
        When its codecs, dtype or chunk grid cannot be referenced exactly.
    ScanError
        When a chunk's size cannot be right, or its metadata is inconsistent.
    """
    metadata: Any = array.metadata
    dtype = model_dtype(np.dtype(array.dtype))
    fill = _fill_value(metadata, dtype)
    if metadata.zarr_format == 2:
        pipe = v2_pipeline(metadata, dtype)
        keys = ChunkKeys(metadata.dimension_separator or ".", prefix=False)
    else:
        pipe = v3_pipeline(metadata, dtype, fill, where)
        keys = _v3_keys(metadata, where)
    chunks = (
        tuple(int(n) for n in metadata.chunk_grid.chunk_shape)
        if metadata.zarr_format == 3
        else tuple(metadata.chunks)
    )
    grid = tuple(math.ceil(s / c) for s, c in zip(metadata.shape, chunks, strict=True))
    manifest = chunk_manifest(listing, path, grid, keys, pipe.size_rule(), inline_threshold, where)
    complete = manifest.count_written() == manifest.nchunks
    attributes = dict(array.attrs.asdict())
    declared = _declared_fill(metadata, fill, complete, attributes, dtype)
    meta = _meta(array, attributes, dtype, chunks, pipe, declared, where)
    return RefArray(meta, manifest)


def _v3_keys(metadata: Any, where: str) -> ChunkKeys:
    encoding = metadata.chunk_key_encoding.to_dict()
    name = encoding.get("name")
    separator = str((encoding.get("configuration") or {}).get("separator", "/"))
    if name == "default":
        return ChunkKeys(separator, prefix=True)
    if name == "v2":
        return ChunkKeys(separator if "configuration" in encoding else ".", prefix=False)
    raise UnsupportedFeatureError(f"{where}: the chunk key encoding {encoding} is not supported")


def _fill_value(metadata: Any, dtype: np.dtype[Any]) -> Any:
    """The store's fill value in refzarr's terms (strings as str, not numpy's str_)."""
    value = metadata.fill_value
    if value is None:
        return None
    if dtype.kind == "O":
        return value.item() if isinstance(value, np.generic) else value
    return value


def _declared_fill(
    metadata: Any, fill: Any, complete: bool, attributes: dict[str, Any], dtype: np.dtype[Any]
) -> Any:
    """The fill value the references declare (``attributes`` loses a v3 ``_FillValue``).

    Zarr v2: the store's own, which xarray masks either way. Zarr v3: xarray masks the
    ``_FillValue`` attribute (which it writes base64-encoded), not the fill value, but it
    takes a Zarr v2 fill value (which references carry) for ``_FillValue``. So a v3 array
    declares its ``_FillValue`` attribute, decoded, when every chunk is written; when some
    chunk is missing its fill value is needed for the values, and is declared unless it is
    the zero (empty string) Zarr v2 reads anyway and there is no ``_FillValue``.
    """
    if metadata.zarr_format == 2:
        return fill
    mask = _xarray_fill(attributes.get("_FillValue"), dtype)
    if mask is not None:  # now the fill value xarray masks: no attribute to contradict it
        del attributes["_FillValue"]
    if complete or fill is None:
        return mask
    if mask is None and _is_default(fill):
        return None
    return fill


def _xarray_fill(value: Any, dtype: np.dtype[Any]) -> Any:
    """A v3 ``_FillValue`` attribute as xarray reads it (floats as base64 of a little-endian
    float64, as xarray writes them; numbers as numbers); None when absent or encoded
    otherwise (it then stays an attribute)."""
    if value is None:
        return None
    try:
        if dtype.kind == "f" and isinstance(value, str):
            raw = base64.standard_b64decode(value)
            return dtype.type(struct.unpack("<d", raw)[0])
        if dtype.kind in "fiub" and isinstance(value, int | float) and not isinstance(value, bool):
            return dtype.type(value)
        if dtype.kind == "b" and isinstance(value, bool):
            return np.bool_(value)
    except (ValueError, TypeError, OverflowError, struct.error):
        return None
    return None


def _is_default(fill: Any) -> bool:
    if isinstance(fill, str | bytes):
        return len(fill) == 0
    raw = np.asarray(fill)
    return raw.dtype.kind != "O" and not any(raw.tobytes())


def _meta(
    array: zarr.Array[Any],
    attributes: dict[str, Any],
    dtype: np.dtype[Any],
    chunks: tuple[int, ...],
    pipe: Pipeline,
    fill: Any,
    where: str,
) -> ArrayMeta:
    metadata: Any = array.metadata
    names: Any = attributes.pop(DIMENSIONS_ATTR, None)
    if metadata.zarr_format == 3 and metadata.dimension_names is not None:
        declared = tuple(metadata.dimension_names)
        names = declared if all(isinstance(n, str) for n in declared) else names
    if metadata.zarr_format == 3 and names is None and not metadata.shape:
        names = ()  # a 0-d array needs no names: xarray reads it so (its writer leaves them out)
    separator: Literal[".", "/"] = (
        "/" if metadata.zarr_format == 2 and (metadata.dimension_separator == "/") else "."
    )
    try:
        return ArrayMeta(
            shape=tuple(array.metadata.shape),
            chunks=chunks,
            dtype=dtype,
            fill_value=fill,
            codecs=tuple(pipe.codecs),
            attributes=attributes,
            dimension_names=None if names is None else tuple(names),
            order=pipe.order,
            dimension_separator=separator,
        )
    except RefFormatError as exc:
        if names is not None and "dimension_names" in str(exc):
            raise ScanError(
                f"{where}: its dimension names {names!r} are not one string per dimension of "
                f"shape {tuple(array.metadata.shape)}"
            ) from exc
        raise UnsupportedFeatureError(f"{where}: cannot be referenced: {exc}") from exc


def inline_values(ref: RefArray, listing: StoreListing, where: str) -> RefArray:
    """``ref`` holding its values as one uncompressed chunk: its chunks fetched (at once)
    and decoded with its own codecs, so the values are exactly what its references read."""
    manifest = ref.manifest
    stored: list[bytes | None] = [None] * manifest.nchunks
    wanted: list[tuple[int, str]] = []
    for block in manifest.iter_blocks():
        for row, pid in enumerate(block.path_id.tolist()):
            number = block.start + row
            if pid == INLINED:
                stored[number] = block.inlined[number]
            elif pid >= 0:
                wanted.append((number, block.paths[pid]))
    if wanted:  # fsspec names what it fetched by path, without the URLs' protocol
        paths = [str(listing.fs._strip_protocol(url)) for _, url in wanted]
        found = listing.fs.cat(paths, on_error="raise")
        for (number, _), path in zip(wanted, paths, strict=True):
            stored[number] = bytes(found[path])
    values = decode_whole(ref.meta, stored, where)
    return RefArray(ref.meta.as_one_raw_chunk(), ChunkManifest.one_inlined(values.tobytes()))
