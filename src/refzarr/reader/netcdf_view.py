"""What ``engine="netcdf4"`` shows of a variable beyond its values: dtype and encoding.

refzarr's xarray backend presents references to netCDF4/HDF5 data the way xarray's netCDF4
backend presents the file: variable-length strings with xarray's vlen string dtype (decoded to
``str`` like the file's), enums as their integer dtype with the mapping in
``encoding["dtype"].metadata`` (not as an attribute, so that ``to_netcdf`` writes an enum
again), and the source's filters (``zlib``, ``complevel``, ``shuffle``, ``fletcher32``, ...)
and chunking (``chunksizes``) in ``encoding``, next to the Zarr-style entries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from refzarr.errors import RefzarrError
from refzarr.model import ArrayMeta, ChunkManifest

__all__ = [
    "ENUM_ATTRS",
    "as_stored",
    "netcdf_encoding",
    "presented_dtype",
    "single_source",
    "vlen_dtype",
    "vlen_element",
]

ENUM_ATTRS = ("_hdf5_enum", "_hdf5_enum_name")
"""Attributes the HDF5 scanner describes an enum with; shown in ``encoding["dtype"]``."""

_VLEN = {"vlen-utf8": str, "vlen-bytes": bytes}

_COMPRESSORS = {
    "zlib": "zlib",
    "imagecodecs_szip": "szip",
    "zstd": "zstd",
    "bz2": "bzip2",
    "blosc": "blosc",
}
"""Codec ids -> the netCDF4 ``filters()`` flag they stand for."""


def vlen_dtype(element: type) -> np.dtype[Any]:
    """xarray's dtype for variable-length ``str`` or ``bytes`` (object, tagged)."""
    return np.dtype("O", metadata={"element_type": element})


def vlen_element(dtype: np.dtype[Any]) -> Any:
    """``str`` / ``bytes`` for a dtype made by `vlen_dtype` (or h5py's), else None."""
    metadata: Mapping[str, Any] = dtype.metadata or {}
    return metadata.get("element_type", metadata.get("vlen")) if dtype.kind == "O" else None


def presented_dtype(meta: ArrayMeta) -> np.dtype[Any]:
    """The dtype xarray's netCDF4 backend gives the variable (vlen strings tagged as such)."""
    if meta.dtype.kind == "O" and meta.codecs:
        element = _VLEN.get(str(meta.codecs[0].get("id")))
        if element is not None:
            return vlen_dtype(element)
    return meta.dtype


def netcdf_encoding(
    meta: ArrayMeta, name: str, attrs: dict[str, Any], dims: Sequence[str]
) -> dict[str, Any]:
    """netCDF4-style encoding entries (``attrs`` loses the enum attributes, which it gives)."""
    encoding: dict[str, Any] = {}
    dtype = _enum_dtype(meta, name, attrs)
    element = vlen_element(dtype)
    if element is None:
        encoding["dtype"] = dtype
    elif element is str:
        # what netCDF4-python's Variable.dtype is for variable-length strings: xarray's
        # decoding then makes the whole variable fixed-width str at once, as for netCDF4
        # (per read, each dask chunk would get its own width, and dask keeps the first's)
        encoding["dtype"] = str
    encoding.update(_filters(meta.codecs))
    if meta.is_regular and (meta.codecs or meta.chunks != meta.shape):
        encoding["contiguous"] = False
        encoding["chunksizes"] = meta.chunks
    encoding["original_shape"] = meta.shape
    return encoding


def _enum_dtype(meta: ArrayMeta, name: str, attrs: dict[str, Any]) -> np.dtype[Any]:
    mapping = attrs.pop(ENUM_ATTRS[0], None)
    enum_name = attrs.pop(ENUM_ATTRS[1], None)
    if not isinstance(mapping, Mapping):
        return presented_dtype(meta)
    # without a named type, a name that cannot clash with the variable's own
    metadata = {"enum": dict(mapping), "enum_name": enum_name or f"{name}_enum"}
    return np.dtype(meta.dtype.newbyteorder("="), metadata=metadata)


def _compressor_detail(codec: Mapping[str, Any]) -> Any:
    """What netCDF4's ``filters()`` gives for a compressor: a dict for szip and Blosc."""
    ident = codec.get("id")
    if ident == "blosc":
        name = "lz" if codec.get("cname") == "blosclz" else codec.get("cname")
        return {"compressor": f"blosc_{name}", "shuffle": codec.get("shuffle")}
    if ident == "imagecodecs_szip":
        coding = "nn" if int(codec.get("options_mask", 0)) & 32 else "ec"
        return {"coding": coding, "pixels_per_block": codec.get("pixels_per_block")}
    return True


def _filters(codecs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """netCDF4's ``Variable.filters()`` dict, from the codec pipeline."""
    found: dict[str, Any] = dict.fromkeys(("zlib", "szip", "zstd", "bzip2", "blosc"), False)
    found.update(shuffle=False, complevel=0, fletcher32=False)
    for codec in codecs:
        ident = str(codec.get("id"))
        flag = _COMPRESSORS.get(ident)
        if flag is not None:
            found[flag] = _compressor_detail(codec)
            level = codec.get("level", codec.get("clevel"))
            if isinstance(level, int):
                found["complevel"] = level
        elif ident in ("shuffle", "refzarr_hdf5_shuffle"):
            found["shuffle"] = True
        elif ident == "fletcher32":
            found["fletcher32"] = True
    return found


def as_stored(meta: ArrayMeta, layout: tuple[tuple[int, ...], tuple[Any, ...]] | None) -> ArrayMeta:
    """``meta`` with the chunking and codecs its source file had (``layout``, recorded when a
    coordinate was loaded at scan time), for the encoding shown; ``meta`` itself without one."""
    if layout is None:
        return meta
    try:
        return meta.replace(chunks=layout[0], codecs=layout[1])
    except (RefzarrError, TypeError, ValueError):  # a record we do not understand: ignored
        return meta


SOURCE_LOAD_CHUNKS = 1024
"""Chunks of an array whose manifest `single_source` loads (when not in memory yet) to name
its file: more are the chunks of many files, whose references an opening does not need."""


def single_source(manifest: ChunkManifest) -> str | None:
    """The one file an array's chunks are in (``encoding["source"]``, as the netCDF4 backend
    names the file), or None: inlined, several files, or more than one block, or a block of
    more than `SOURCE_LOAD_CHUNKS` chunks not loaded yet (a Parquet set's)."""
    if manifest.nblocks != 1:
        return None
    block = manifest.loaded_block(0)
    if block is None:
        if manifest.nchunks > SOURCE_LOAD_CHUNKS:
            return None
        block = manifest.block(0)
    paths = block.paths
    return paths[0] if len(paths) == 1 else None
