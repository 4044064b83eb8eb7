"""Array metadata between refzarr (`ArrayMeta`, numcodecs configs) and the Zarr v3 metadata
VirtualiZarr's ``ManifestArray`` holds (a ``bytes`` codec, ``numcodecs.<id>`` codecs).

A numcodecs codec zarr-python knows as ``numcodecs.<id>`` keeps that name (what VirtualiZarr's
own parsers emit, so their arrays and ours concatenate); any other goes through refzarr's
``refzarr.numcodecs`` stage, which VirtualiZarr's kerchunk writer turns back into the same
numcodecs config. Array-to-array codecs (delta, fixedscaleoffset, ...) must precede the
bytes-to-bytes ones, as Zarr v3 orders them; a pipeline in another order is kept exact by
passing every codec through the ``refzarr.numcodecs`` stage.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from refzarr.errors import UnsupportedFeatureError
from refzarr.interop.vz_masking import unmark
from refzarr.model import ArrayMeta
from refzarr.model.frozen import thaw_json
from refzarr.model.netcdf_fills import NETCDF_DEFAULT_FILLS

__all__ = ["meta_from_v3", "v3_metadata"]


def v3_metadata(
    name: str, meta: ArrayMeta, attributes: dict[str, Any], *, missing_chunks: bool = False
) -> Any:
    """The ``ArrayV3Metadata`` of a refzarr array for a VirtualiZarr ``ManifestArray``
    (``missing_chunks``: some chunk of the array is not written, see `_stand_in`)."""
    from zarr.core.metadata.v3 import ArrayV3Metadata

    _check_expressible(name, meta)
    native = meta.dtype.newbyteorder("=") if meta.dtype.byteorder in "<>" else meta.dtype
    try:
        data_type = _data_type(native)
        fill = meta.fill_value
        return ArrayV3Metadata(
            shape=meta.shape,
            data_type=data_type,
            chunk_grid={"name": "regular", "configuration": {"chunk_shape": meta.chunks}},
            chunk_key_encoding={"name": "default", "configuration": {"separator": "/"}},
            fill_value=_stand_in(native, data_type, missing_chunks) if fill is None else fill,
            codecs=[_bytes_codec(meta.dtype), *_v3_codecs(meta.codecs)],
            attributes=attributes,
            dimension_names=meta.dimension_names,
            storage_transformers=None,
        )
    except (TypeError, ValueError) as exc:
        raise UnsupportedFeatureError(
            f"array {name!r}: Zarr v3 (VirtualiZarr) cannot describe dtype {meta.dtype} with "
            f"fill value {meta.fill_value!r}: {exc}"
        ) from exc


@functools.lru_cache(maxsize=256)
def _data_type(dtype: np.dtype[Any]) -> Any:
    """zarr-python's data type of a native dtype (its lookup costs ~2 ms: cached)."""
    from zarr.core.dtype import parse_data_type

    return parse_data_type(dtype, zarr_format=3)


def _stand_in(dtype: np.dtype[Any], data_type: Any, missing_chunks: bool) -> Any:
    """The fill value standing in for an undefined one, which Zarr v3 cannot say.

    An array with missing chunks gets the dtype's zero: what its missing chunks read as
    through the source's library (HDF5's default fill), Zarr v2 readers, refzarr's reader
    and `refzarr.to_icechunk`, so that xarray shows the same values through VirtualiZarr's
    Icechunk writer. Otherwise the fill value is never read, and stands in as NaN for floats
    and netCDF's default fill value for integers: values least likely to be data, since
    VirtualiZarr's kerchunk writer hands it to Zarr v2 readers, which mask it (a zero would
    mask every zero of the data there).
    """
    if missing_chunks and dtype.kind in "biufc":
        return np.zeros((), dtype=dtype)[()]
    if dtype.kind in "fc":
        return float("nan")
    default = NETCDF_DEFAULT_FILLS.get(f"{dtype.kind}{dtype.itemsize}")
    if dtype.kind in "iu" and default is not None:
        return default
    if dtype.kind == "V":
        return np.zeros((), dtype=dtype)[()]  # zarr's default fails on some structured dtypes
    return data_type.default_scalar()


def _check_expressible(name: str, meta: ArrayMeta) -> None:
    if not meta.is_regular:
        raise UnsupportedFeatureError(
            f"array {name!r} has chunks of different lengths along an axis; VirtualiZarr's "
            "ManifestArray needs a regular chunk grid"
        )
    if meta.dtype.names is not None and _big_endian_fields(meta.dtype):
        raise UnsupportedFeatureError(
            f"array {name!r} has big-endian fields in its structured dtype {meta.dtype}; Zarr "
            "v3 has one byte order per array, and VirtualiZarr before 2.7.1 records none here"
        )
    if meta.order != "C" and meta.ndim > 1:
        raise UnsupportedFeatureError(
            f"array {name!r} stores its chunks in Fortran order; VirtualiZarr's kerchunk writer "
            "writes C order only"
        )


def _big_endian_fields(dtype: np.dtype[Any]) -> bool:
    if dtype.names is None:
        base = dtype.subdtype[0] if dtype.subdtype else dtype
        return base.byteorder == ">" or (base.byteorder == "=" and not np.little_endian)
    fields = dtype.fields
    assert fields is not None
    return any(_big_endian_fields(fields[n][0]) for n in dtype.names)


def _bytes_codec(dtype: np.dtype[Any]) -> dict[str, Any]:
    if dtype.names is not None:  # little-endian fields (`_check_expressible`); zarr 3.4 warns
        return {"name": "bytes", "configuration": {"endian": "little"}}  # when it is absent
    if dtype.byteorder == "|" or (dtype.itemsize == 1 and dtype.kind != "V"):
        return {"name": "bytes"}
    big = dtype.byteorder == ">" or (dtype.byteorder == "=" and np.little_endian is False)
    return {"name": "bytes", "configuration": {"endian": "big" if big else "little"}}


def _v3_codecs(codecs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    from zarr.abc.codec import ArrayArrayCodec

    kinds = [_zarr_class(c) for c in codecs]
    array_array = [k is not None and issubclass(k, ArrayArrayCodec) for k in kinds]
    first_bytes = next((i for i, a in enumerate(array_array) if not a), len(codecs))
    if any(array_array[first_bytes:]):  # an array codec after a bytes codec: v3 cannot say so
        return [_stage(c) for c in codecs]
    return [_stage(c) if k is None else _named(c) for c, k in zip(codecs, kinds, strict=True)]


def _zarr_class(codec: Mapping[str, Any]) -> Any:
    from zarr.registry import get_codec_class

    try:
        return get_codec_class(f"numcodecs.{codec['id']}")
    except (KeyError, ValueError):  # zarr 3.4 raises UnknownCodecError (a ValueError)
        return None


def _named(codec: Mapping[str, Any]) -> dict[str, Any]:
    config = {k: v for k, v in thaw_json(codec).items() if k != "id"}
    return {"name": f"numcodecs.{codec['id']}", "configuration": config}


def _stage(codec: Mapping[str, Any]) -> dict[str, Any]:
    import refzarr.codecs.zarr3 as zarr3

    return {"name": zarr3.CODEC_NAME, "configuration": thaw_json(codec)}


# -- Zarr v3 -> refzarr -----------------------------------------------------------------------


def meta_from_v3(
    name: str, metadata: Any, dims: tuple[str, ...], attributes: dict[str, Any]
) -> ArrayMeta:
    """The `ArrayMeta` of a ``ManifestArray``'s metadata, its dimensions and attributes."""
    from xarray.backends.zarr import FillValueCoder

    dtype, codecs = _dtype_and_codecs(name, metadata)
    fill_value = _python(metadata.fill_value)
    fill = attributes.get("_FillValue")
    if isinstance(fill, str) and dtype.kind in "fc":
        attributes = {**attributes, "_FillValue": _python(FillValueCoder.decode(fill, dtype))}
    attributes, fill_value = unmark(attributes, fill_value, dtype)
    return ArrayMeta(
        shape=tuple(metadata.shape),
        chunks=tuple(metadata.chunk_grid.chunk_shape),
        dtype=dtype,
        fill_value=fill_value,
        codecs=codecs,
        attributes=attributes,
        dimension_names=dims if dims else None,
    )


def _dtype_and_codecs(name: str, metadata: Any) -> tuple[np.dtype[Any], list[dict[str, Any]]]:
    from zarr.abc.codec import ArrayBytesCodec
    from zarr.codecs import BytesCodec

    dtype = np.dtype(metadata.data_type.to_native_dtype())
    codecs = []
    for codec in metadata.codecs:
        if isinstance(codec, BytesCodec):
            endian = getattr(codec.endian, "value", codec.endian)
            if endian == "big" and dtype.itemsize > 1:
                dtype = dtype.newbyteorder(">")
        elif isinstance(codec, ArrayBytesCodec):
            raise UnsupportedFeatureError(
                f"variable {name!r} uses the Zarr v3 codec {type(codec).__name__}, which has no "
                "Zarr v2 / kerchunk equivalent (sharding?)"
            )
        else:
            codecs.append(_numcodecs_config(name, codec))
    return dtype, codecs


def _numcodecs_config(name: str, codec: Any) -> dict[str, Any]:
    import refzarr.codecs.zarr3 as zarr3

    if isinstance(codec, zarr3.NumcodecsStage):
        return dict(codec.codec)
    config = getattr(codec, "codec_config", None)  # zarr-python's numcodecs.* wrappers
    if isinstance(config, Mapping) and "id" in config:
        return dict(config)
    document = codec.to_dict()
    native = _NATIVE.get(document.get("name"))
    if native is None:
        raise UnsupportedFeatureError(
            f"variable {name!r} uses the Zarr v3 codec {document.get('name')!r}, which refzarr "
            "cannot express as a numcodecs (Zarr v2) codec"
        )
    return {"id": native, **(document.get("configuration") or {})}


_NATIVE = {"gzip": "gzip", "zstd": "zstd"}
"""Zarr v3 core codecs whose configuration is the numcodecs codec's of the same id."""


def _python(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
