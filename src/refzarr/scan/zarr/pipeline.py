"""A Zarr array's codecs as numcodecs configs (what Zarr v2 metadata, and so kerchunk
references, can carry): Zarr v2 filters and compressor as they are; each Zarr v3 codec mapped
to its numcodecs twin, or to refzarr's own codec for ``sharding_indexed`` and ``transpose``.

What has no exact numcodecs rendering raises `UnsupportedFeatureError` naming the codec:
refzarr never references bytes it cannot have decoded exactly as zarr-python decodes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from zarr.abc.codec import ArrayArrayCodec, ArrayBytesCodec, BytesBytesCodec
from zarr.codecs import ShardingCodec

from refzarr.codecs.zarr import ZarrSharding, ZarrTranspose
from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.model.dtypes import encode_fill_value
from refzarr.scan.zarr.chunks import SizeRule

__all__ = ["Pipeline", "v2_pipeline", "v3_pipeline"]

Config = dict[str, Any]

_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
"""Zarr v3 ``blosc`` shuffle names -> numcodecs' Blosc constants."""

_SIZE_KEEPING = frozenset({"astype", ZarrTranspose.codec_id})
"""Codec ids whose output is exactly as long as their input (as refzarr emits them)."""


@dataclass
class Pipeline:
    """An array's codecs as numcodecs configs, and what follows from them.

    Parameters
    ----------
    dtype
        The values' numpy dtype (variable-length strings as objects).
    shape
        The chunk shape the codecs see (a shard for a sharded array).
    codecs
        numcodecs configs in encoding order.
    order
        Memory order of a decoded chunk (``"F"``: a ``transpose`` reversing the axes).
    index_bytes
        For a sharded array whose shards are not compressed: the bytes of a shard's index
        (a smaller shard is damaged).
    """

    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    codecs: list[Config] = field(default_factory=list)
    order: Literal["C", "F"] = "C"
    index_bytes: int = 0

    def size_rule(self) -> SizeRule:
        """What sizes a stored chunk may have under these codecs."""
        if self.index_bytes:
            return SizeRule(minimum=self.index_bytes)
        if self.dtype.kind != "O" and all(c["id"] in _SIZE_KEEPING for c in self.codecs):
            return SizeRule(exact=math.prod(self.shape) * self.dtype.itemsize)
        return SizeRule()


def model_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype refzarr's model holds for zarr's: numpy's variable-width strings as objects."""
    return np.dtype("O") if dtype.kind == "T" else dtype


def v2_pipeline(metadata: Any, dtype: np.dtype[Any]) -> Pipeline:
    """A Zarr v2 array's filters and compressor, as they are."""
    pipe = Pipeline(dtype, tuple(metadata.chunks), order=metadata.order)
    for codec in (*(metadata.filters or ()), metadata.compressor):
        if codec is not None:
            pipe.codecs.append(dict(codec.get_config()))
            pipe.dtype = _output_dtype(pipe.codecs[-1], pipe.dtype)
    return pipe


def v3_pipeline(metadata: Any, dtype: np.dtype[Any], fill_value: Any, where: str) -> Pipeline:
    """A Zarr v3 array's codecs mapped to numcodecs configs.

    Raises
    ------
    UnsupportedFeatureError
        For a codec (or codec configuration) without an exact numcodecs rendering.
    """
    if metadata.storage_transformers:
        raise UnsupportedFeatureError(
            f"{where}: storage transformers {list(metadata.storage_transformers)} are not supported"
        )
    shape = tuple(metadata.chunk_grid.chunk_shape)
    return _chain(tuple(metadata.codecs), Pipeline(dtype, shape), fill_value, where)


def _chain(codecs: tuple[Any, ...], pipe: Pipeline, fill_value: Any, where: str) -> Pipeline:
    for position, codec in enumerate(codecs):
        if isinstance(codec, ArrayArrayCodec):
            _array_to_array(codec, pipe, first=position == 0, where=where)
        elif isinstance(codec, ArrayBytesCodec):
            _array_to_bytes(codec, pipe, fill_value, where)
        elif isinstance(codec, BytesBytesCodec):
            pipe.codecs.append(_bytes_to_bytes(codec, where))
            if pipe.codecs[-1]["id"] != "crc32c":
                pipe.index_bytes = 0  # a compressed shard may be smaller than its index
        else:
            _unsupported(codec, where)
    return pipe


def _array_to_array(codec: Any, pipe: Pipeline, *, first: bool, where: str) -> None:
    name, config = _describe(codec)
    if name == "transpose":
        _transpose(tuple(int(k) for k in config["order"]), pipe, first=first)
    elif name.startswith("numcodecs."):
        numcodec = {"id": name.removeprefix("numcodecs."), **config}
        pipe.codecs.append(numcodec)
        pipe.dtype = _output_dtype(numcodec, pipe.dtype)
    else:
        _unsupported(codec, where)


def _transpose(order: tuple[int, ...], pipe: Pipeline, *, first: bool) -> None:
    """The first codec reversing the axes is Zarr v2's F order; any other permutation is
    refzarr's transpose codec."""
    ndim = len(pipe.shape)
    if order == tuple(range(ndim)):
        return
    if first and order == tuple(reversed(range(ndim))):
        pipe.order = "F"
        pipe.shape = pipe.shape[::-1]  # what the next codecs (sharding) see
        return
    codec = ZarrTranspose(order, pipe.shape, pipe.dtype.str)
    pipe.codecs.append(codec.get_config())
    pipe.shape = tuple(pipe.shape[k] for k in order)


def _output_dtype(config: Config, dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype a numcodecs filter hands on when encoding (its ``astype``)."""
    target = config.get("encode_dtype") if config["id"] == "astype" else config.get("astype")
    return dtype if target is None else np.dtype(target)


def _array_to_bytes(codec: Any, pipe: Pipeline, fill_value: Any, where: str) -> None:
    name, config = _describe(codec)
    if name == "bytes":
        _byte_order(config.get("endian"), pipe)
    elif name in ("vlen-utf8", "vlen-bytes"):
        pipe.codecs.append({"id": name})
    elif isinstance(codec, ShardingCodec):
        _sharding(codec, pipe, fill_value, where)
    else:
        _unsupported(codec, where)


def _byte_order(endian: str | None, pipe: Pipeline) -> None:
    """Values stored in the other byte order than the dtype's: numcodecs' ``astype`` swaps
    them, so the values keep the native dtype zarr-python gives."""
    dtype = pipe.dtype
    if endian is None or dtype.kind == "O" or dtype.itemsize == 1:
        return
    stored = dtype.newbyteorder("<" if endian == "little" else ">")
    if stored.str != dtype.str:
        pipe.codecs.append({"id": "astype", "encode_dtype": stored.str, "decode_dtype": dtype.str})


def _sharding(codec: ShardingCodec, pipe: Pipeline, fill_value: Any, where: str) -> None:
    """A shard decoded whole by `ZarrSharding`, its inner codecs mapped like the array's."""
    if pipe.dtype.kind == "O":
        raise UnsupportedFeatureError(
            f"{where}: sharded variable-length strings: Zarr v2 readers cannot decode an "
            "object array whose codec is not a vlen codec"
        )
    inner_shape = tuple(int(n) for n in codec.chunk_shape)
    inner = _chain(tuple(codec.codecs), Pipeline(pipe.dtype, inner_shape), fill_value, where)
    index_dtype, index_codecs = _index_codecs(tuple(codec.index_codecs), where)
    where_index = str(getattr(codec.index_location, "value", codec.index_location))
    location: Literal["start", "end"] = "start" if where_index == "start" else "end"
    try:
        sharding = ZarrSharding(
            shard_shape=pipe.shape,
            chunk_shape=inner_shape,
            dtype=pipe.dtype.str,
            fill_value=encode_fill_value(fill_value, pipe.dtype),
            codecs=inner.codecs,
            order=inner.order,
            index_codecs=index_codecs,
            index_dtype=index_dtype,
            index_location=location,
        )
    except (ValueError, TypeError) as exc:
        raise ScanError(f"{where}: invalid sharding_indexed codec: {exc}") from exc
    pipe.codecs.append(sharding.get_config())
    pipe.index_bytes = sharding.index_bytes


def _index_codecs(codecs: tuple[Any, ...], where: str) -> tuple[str, list[Config]]:
    """A shard index's byte order and its checksum codecs (``bytes`` then ``crc32c``)."""
    if not codecs or _describe(codecs[0])[0] != "bytes":
        raise UnsupportedFeatureError(
            f"{where}: a shard index encoded with {[_describe(c)[0] for c in codecs]}; "
            "refzarr reads indexes encoded with 'bytes' (and 'crc32c')"
        )
    endian = _describe(codecs[0])[1].get("endian") or "little"
    configs = [_bytes_to_bytes(c, where) for c in codecs[1:]]
    if any(c["id"] != "crc32c" for c in configs):
        raise UnsupportedFeatureError(
            f"{where}: a shard index with codecs {[_describe(c)[0] for c in codecs]}; "
            "refzarr reads indexes encoded with 'bytes' (and 'crc32c')"
        )
    return ("<u8" if endian == "little" else ">u8"), configs


def _bytes_to_bytes(codec: Any, where: str) -> Config:
    name, config = _describe(codec)
    if name == "gzip":
        return {"id": "gzip", "level": config.get("level", 1)}
    if name == "zstd":
        return {"id": "zstd", "level": config.get("level", 0), **_checksum(config)}
    if name == "blosc":
        return _blosc(config, codec, where)
    if name == "crc32c":
        return {"id": "crc32c", "location": "end"}
    if name.startswith("numcodecs."):
        return {"id": name.removeprefix("numcodecs."), **config}
    _unsupported(codec, where)
    raise AssertionError  # unreachable: _unsupported raises


def _checksum(config: Config) -> Config:
    return {"checksum": bool(config["checksum"])} if "checksum" in config else {}


def _blosc(config: Config, codec: Any, where: str) -> Config:
    shuffle = _SHUFFLE.get(str(config.get("shuffle", "noshuffle")))
    if shuffle is None:
        _unsupported(codec, where)
    return {
        "id": "blosc",
        "cname": str(config.get("cname", "zstd")),
        "clevel": int(config.get("clevel", 5)),
        "shuffle": shuffle,
        "blocksize": int(config.get("blocksize", 0)),
    }


def _describe(codec: Any) -> tuple[str, Config]:
    """A codec's name and configuration, as its Zarr v3 metadata spells them."""
    document = codec.to_dict()
    return str(document["name"]), dict(document.get("configuration") or {})


def _unsupported(codec: Any, where: str) -> None:
    try:
        shown: Any = codec.to_dict()
    except Exception:  # a codec without a JSON form: its repr says enough
        shown = repr(codec)
    raise UnsupportedFeatureError(
        f"{where}: the Zarr v3 codec {shown} has no numcodecs equivalent refzarr can "
        "reference exactly"
    )
