"""HDF5 filter pipelines as numcodecs configs in encoding order, or an error naming the filter.

Each filter maps to a codec that decodes its stored bytes exactly: numcodecs' own (deflate,
shuffle, fletcher32, Blosc, Zstandard, bzip2), imagecodecs' (szip, HDF5-LZ4; the ``codecs``
extra) or refzarr's (N-bit, scale-offset, LZF, bitshuffle, Blosc2 frames; see the sibling
modules, registered as numcodecs entry points). A filter or variant without one raises
`UnsupportedFeatureError` saying why, so that no chunk is ever decoded wrongly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.codecs.hdf5.bitshuffle import Hdf5Bitshuffle
from refzarr.codecs.hdf5.blosc2 import Hdf5Blosc2
from refzarr.codecs.hdf5.lzf import Hdf5Lzf
from refzarr.codecs.hdf5.nbit import Hdf5NBit
from refzarr.codecs.hdf5.nullterm import Hdf5NullTerm
from refzarr.codecs.hdf5.padding import TypeLike, integer_padding
from refzarr.codecs.hdf5.scaleoffset import SO_FLOAT_DSCALE, SO_INT, Hdf5ScaleOffset
from refzarr.codecs.hdf5.shuffle import Hdf5Shuffle
from refzarr.errors import UnsupportedFeatureError

__all__ = [
    "FILTER_NAMES",
    "Hdf5Filter",
    "filter_stages",
    "filter_to_codec",
    "filters_to_codecs",
    "szip_pixel_check",
]

DEFLATE, SHUFFLE, FLETCHER32, SZIP, NBIT, SCALEOFFSET = 1, 2, 3, 4, 5, 6
BZIP2, LZF, BLOSC, LZ4, BITSHUFFLE, ZSTD, BLOSC2 = 307, 32000, 32001, 32004, 32008, 32015, 32026

FILTER_NAMES = {
    DEFLATE: "deflate",
    SHUFFLE: "shuffle",
    FLETCHER32: "fletcher32",
    SZIP: "szip",
    NBIT: "N-bit",
    SCALEOFFSET: "scale-offset",
    BZIP2: "bzip2",
    LZF: "LZF",
    BLOSC: "Blosc",
    LZ4: "LZ4",
    BITSHUFFLE: "bitshuffle",
    ZSTD: "Zstandard",
    BLOSC2: "Blosc2",
}
"""Names of the registered HDF5 filters refzarr knows about, by filter id."""

_NEEDS_IMAGECODECS = frozenset({SZIP, LZF, LZ4, BITSHUFFLE, BLOSC2})
"""Filters whose codec decodes with imagecodecs (the optional ``codecs`` extra)."""

_BLOSC_COMPRESSORS = {0: "blosclz", 1: "lz4", 2: "lz4hc", 3: "snappy", 4: "zlib", 5: "zstd"}


@dataclass(frozen=True, slots=True)
class Hdf5Filter:
    """One stage of an HDF5 filter pipeline, as ``H5Pget_filter`` reports it.

    Parameters
    ----------
    id
        The registered filter id (1 deflate, 2 shuffle, 32001 Blosc, ...).
    name
        The name stored in the file (may be empty).
    client_data
        The filter's ``cd_values``.
    """

    id: int
    name: str
    client_data: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """A human-readable name: ``"LZF (HDF5 filter 32000)"``."""
        name = FILTER_NAMES.get(self.id) or self.name or "unknown filter"
        return f"{name} (HDF5 filter {self.id})"


@dataclass(frozen=True, slots=True)
class _Target:
    """What a mapper needs to know about the dataset: its dtype and HDF5 padding bits."""

    dtype: np.dtype[Any]
    padding: tuple[int, int] | None = None  # (precision, offset) of a padded integer type


def _deflate(cd: Sequence[int], target: _Target) -> dict[str, Any]:
    return {"id": "zlib", "level": int(cd[0]) if cd else 6}


def _shuffle(cd: Sequence[int], target: _Target) -> dict[str, Any]:
    # HDF5 stores the element size it shuffled with as the first client value
    return {"id": "shuffle", "elementsize": int(cd[0]) if cd else target.dtype.itemsize}


def _fletcher32(cd: Sequence[int], target: _Target) -> dict[str, Any]:
    # numcodecs' fletcher32 is HDF5's: a trailing 4-byte checksum, verified and stripped
    return {"id": "fletcher32"}


def _blosc(cd: Sequence[int], target: _Target) -> dict[str, Any]:
    # hdf5-blosc stores a plain Blosc frame; cd = [rev, version, typesize, size, clevel,
    # shuffle, compressor]; numcodecs decodes any frame whatever the config says
    clevel = int(cd[4]) if len(cd) > 4 else 5
    shuffle = int(cd[5]) if len(cd) > 5 else 1
    cname = _BLOSC_COMPRESSORS.get(int(cd[6]) if len(cd) > 6 else 0, "blosclz")
    return {"id": "blosc", "cname": cname, "clevel": clevel, "shuffle": shuffle, "blocksize": 0}


def _zstd(cd: Sequence[int], target: _Target) -> dict[str, Any]:
    # the HDF5 Zstandard filter stores one zstd frame (with its content size)
    return {"id": "zstd", "level": int(cd[0]) if cd else 3}


def _bzip2(cd: Sequence[int], target: _Target) -> dict[str, Any]:
    # the HDF5 bzip2 filter (PyTables, hdf5plugin) stores one plain bzip2 stream
    return {"id": "bz2", "level": int(cd[0]) if cd and 1 <= cd[0] <= 9 else 9}


def _lzf(cd: Sequence[int], target: _Target) -> dict[str, Any]:
    # a raw LZF stream; cd = [filter revision, LZF version, chunk bytes]. Not imagecodecs_lzf
    # (VirtualiZarr's id): without the size it cannot decode chunks that compress well. h5py
    # records no size for variable-length types (0: the codec grows its buffer as h5py does)
    return Hdf5Lzf(int(cd[2]) if len(cd) >= 3 and cd[2] > 0 else 0).get_config()


def _szip(cd: Sequence[int], target: _Target) -> dict[str, Any]:
    # cd = [options mask, pixels per block, bits per pixel, pixels per scanline], set by HDF5
    # at dataset creation; each chunk starts with its uncompressed size (4 bytes): header=True
    if len(cd) < 4:
        raise ValueError(f"szip needs 4 client values, got {list(cd)}")
    return {
        "id": "imagecodecs_szip",
        "options_mask": int(cd[0]),
        "pixels_per_block": int(cd[1]),
        "bits_per_pixel": int(cd[2]),
        "pixels_per_scanline": int(cd[3]),
        "header": True,
    }


def _lz4(cd: Sequence[int], target: _Target) -> dict[str, Any]:
    # imagecodecs' Lz4h5 is the HDF5 LZ4 filter's framing (sizes, then per-block records)
    return {"id": "imagecodecs_lz4h5", "level": None, "blocksize": int(cd[0]) if cd else None}


def _bitshuffle(cd: Sequence[int], target: _Target) -> dict[str, Any]:
    # cd = [major, minor, element size, block size, compression (0 none, 2 LZ4, 3 zstd), level]
    elementsize = int(cd[2]) if len(cd) > 2 else target.dtype.itemsize
    blocksize = int(cd[3]) if len(cd) > 3 else 0
    compression = int(cd[4]) if len(cd) > 4 else 0
    # imagecodecs_bitshuffle is not used for compression 0: it misreads zarr's uint8 arrays
    names = {0: "none", 2: "lz4", 3: "zstd"}
    if compression not in names:
        raise _Unsupported(f"bitshuffle compression {compression} is unknown")
    level = int(cd[5]) if len(cd) > 5 else 3
    return Hdf5Bitshuffle(elementsize, names[compression], blocksize, level).get_config()


def _nbit(cd: Sequence[int], target: _Target) -> dict[str, Any] | None:
    # cd = [nparms, need-not-compress, elements, class, size, order, precision, offset] for
    # integers and floats (class 1); compound and array types describe their members
    if len(cd) > 1 and cd[1]:
        return None  # full-precision types: HDF5 stores the chunk unchanged
    if len(cd) < 8 or cd[3] != 1:
        raise _Unsupported("N-bit packing of compound or array types is not supported")
    if target.dtype.kind not in "iu":
        raise _Unsupported(f"N-bit packing of {target.dtype} elements is not supported")
    precision, offset = int(cd[6]), int(cd[7])
    return Hdf5NBit(target.dtype.str, precision, offset, int(cd[2]), packed=True).get_config()


def _scaleoffset(cd: Sequence[int], target: _Target) -> dict[str, Any] | None:
    # cd = [scale type, scale factor, elements, class, size, sign, order, fill defined,
    # fill value bytes (little-endian, 4 per value)...]
    if len(cd) < 8:
        raise ValueError(f"scale-offset needs 8 or more client values, got {list(cd)}")
    scale_type, factor, count, cls, size, sign, order = (int(v) for v in cd[:7])
    if cls == 0 and scale_type == SO_INT:
        factor = max(factor, 0)
        if factor == 8 * size:
            return None  # full precision: HDF5 stores the chunk unchanged
    elif not (cls == 1 and scale_type == SO_FLOAT_DSCALE):
        raise _Unsupported(f"scale type {scale_type} for datatype class {cls}")
    kind = "f" if cls == 1 else ("i" if sign else "u")
    dtype = f"{'>' if order else '<'}{kind}{size}"
    words = b"".join(int(v).to_bytes(4, "little") for v in cd[8:])
    fill = int.from_bytes(words[:size], "little") if cd[7] else None
    return Hdf5ScaleOffset(dtype, count, scale_type, factor, fill).get_config()


def _blosc2(cd: Sequence[int], target: _Target) -> dict[str, Any]:
    # cd = [revision, block size, type size, chunk bytes, level, shuffle, compressor, (b2nd:)
    # rank, chunk shape...]; each chunk is a Blosc2 frame, which imagecodecs alone cannot read
    typesize = int(cd[2]) if len(cd) > 2 and cd[2] else max(target.dtype.itemsize, 1)
    return Hdf5Blosc2(typesize).get_config()


class _Unsupported(Exception):
    """A mapper's reason why this variant of a filter cannot be decoded."""


_MAPPERS: dict[int, Callable[[Sequence[int], _Target], dict[str, Any] | None]] = {
    DEFLATE: _deflate,
    SHUFFLE: _shuffle,
    FLETCHER32: _fletcher32,
    SZIP: _szip,
    NBIT: _nbit,
    SCALEOFFSET: _scaleoffset,
    BZIP2: _bzip2,
    LZF: _lzf,
    BLOSC: _blosc,
    LZ4: _lz4,
    BLOSC2: _blosc2,
    BITSHUFFLE: _bitshuffle,
    ZSTD: _zstd,
}


def _unsupported(stage: Hdf5Filter, reason: str, where: str) -> UnsupportedFeatureError:
    prefix = f"{where}: " if where else ""
    return UnsupportedFeatureError(f"{prefix}filter {stage.label} is not supported: {reason}")


def _imagecodecs_missing() -> bool:
    try:
        import imagecodecs  # noqa: F401
    except ImportError:
        return True
    return False


def _as_target(dtype: np.dtype[Any] | int, padding: tuple[int, int] | None) -> _Target:
    if isinstance(dtype, int):  # an element size only: an opaque byte dtype of that size
        return _Target(np.dtype(f"V{dtype}"), padding)
    return _Target(np.dtype(dtype), padding)


def _mapped(stage: Hdf5Filter, target: _Target, where: str) -> dict[str, Any] | None:
    mapper = _MAPPERS.get(stage.id)
    if mapper is None:
        raise _unsupported(stage, "refzarr does not know it", where)
    if stage.id in _NEEDS_IMAGECODECS and _imagecodecs_missing():
        raise _unsupported(
            stage, "its decoder comes from imagecodecs: pip install 'refzarr[codecs]'", where
        )
    try:
        return mapper(stage.client_data, target)
    except _Unsupported as exc:
        raise _unsupported(stage, str(exc), where) from None
    except (ValueError, IndexError) as exc:
        raise UnsupportedFeatureError(
            f"{where}: filter {stage.label} has client values {list(stage.client_data)} "
            f"refzarr cannot interpret ({exc})"
        ) from exc


def filter_to_codec(
    stage: Hdf5Filter, dtype: np.dtype[Any] | int, *, where: str = ""
) -> dict[str, Any] | None:
    """The numcodecs config that decodes what ``stage`` encoded, or None for a no-op stage.

    Parameters
    ----------
    stage
        The filter.
    dtype
        The dataset's dtype (h5py's), or just its element size in bytes.
    where
        What to name in an error (file and dataset).

    Raises
    ------
    UnsupportedFeatureError
        When no codec decodes the filter's bytes exactly, or imagecodecs (the ``codecs`` extra)
        is missing for one that needs it.
    """
    return _mapped(stage, _as_target(dtype, None), where)


def filter_stages(
    stages: Iterable[Hdf5Filter],
    dtype: np.dtype[Any] | int,
    *,
    where: str = "",
    szip_sizes_checked: bool = False,
) -> list[dict[str, Any] | None]:
    """One numcodecs config per filter, in HDF5's order (None for a no-op stage): the stages
    of `filters_to_codecs`, before it adds what a padded or null-terminated type needs
    (``szip_sizes_checked``: as there).

    Raises
    ------
    UnsupportedFeatureError
        Naming the first filter that cannot be mapped (see `filter_to_codec`).
    """
    found: list[dict[str, Any] | None] = []
    stages = list(stages)
    for index, stage in enumerate(stages):
        codec = filter_to_codec(stage, dtype, where=where)
        before = [c for c in found if c is not None]
        if codec is not None and codec["id"] == "shuffle" and _resized(before, codec):
            codec = Hdf5Shuffle(codec["elementsize"]).get_config()
        last = index == len(stages) - 1
        _check_szip_input(before, codec, stage, where, checked=szip_sizes_checked and last)
        found.append(codec)
    return found


def _check_szip_input(
    before: Sequence[dict[str, Any]],
    codec: dict[str, Any] | None,
    stage: Hdf5Filter,
    where: str,
    *,
    checked: bool = False,
) -> None:
    """Refuse szip after a stage that may leave a partial pixel (scale-offset, deflate, LZF,
    fletcher32's 4 bytes on 8-byte pixels, ...): the last bytes decode from whatever memory
    held (imagecodecs' and HDF5's own decoding: wrong values, in silence), unless ``checked``:
    szip is the last stage and the caller checks every chunk's size (`szip_pixel_check`)."""
    if codec is None or codec["id"] != "imagecodecs_szip" or checked:
        return
    resizing = _resizing_before_szip(before, codec)
    if resizing is not None:
        raise _unsupported(
            stage,
            f"szip after {resizing!r}, whose output may end in a partial "
            f"{_szip_pixel(codec)}-byte pixel that imagecodecs' szip does not decode",
            where,
        )


def _szip_pixel(codec: dict[str, Any]) -> int:
    return max(1, -(-int(codec["bits_per_pixel"]) // 8))


def _resizing_before_szip(before: Sequence[dict[str, Any]], codec: dict[str, Any]) -> str | None:
    """The id of the first stage before szip that may leave a partial pixel, or None."""
    pixel = _szip_pixel(codec)
    for c in before:
        if c["id"] in ("shuffle", Hdf5Shuffle.codec_id) or (
            c["id"] == "fletcher32" and 4 % pixel == 0
        ):
            continue
        return str(c["id"])
    return None


def szip_pixel_check(codecs: Sequence[dict[str, Any]]) -> tuple[int, str] | None:
    """When ``codecs`` (encoding order) end with szip after a stage that may leave a partial
    pixel: its pixel size and that stage's id. Every chunk's szip input must then be a whole
    number of pixels (the size in its first 4 bytes, little-endian), else it does not decode
    exactly. None otherwise."""
    if not codecs or codecs[-1]["id"] != "imagecodecs_szip":
        return None
    resizing = _resizing_before_szip(codecs[:-1], codecs[-1])
    return None if resizing is None else (_szip_pixel(codecs[-1]), resizing)


def _resized(before: Sequence[dict[str, Any]], shuffle: dict[str, Any]) -> bool:
    """Whether the stages ``before`` a shuffle may leave a buffer that is no whole number of
    its elements (HDF5 then shuffles the whole ones and keeps the rest; numcodecs' shuffle
    raises): anything but fletcher32's 4-byte trailer on elements whose size divides 4."""
    size = int(shuffle["elementsize"])
    return any(c["id"] != "fletcher32" or 4 % size for c in before)


def filters_to_codecs(
    stages: Iterable[Hdf5Filter],
    dtype: np.dtype[Any] | int,
    *,
    where: str = "",
    type_id: TypeLike | None = None,
    szip_sizes_checked: bool = False,
) -> list[dict[str, Any]]:
    """numcodecs configs of a whole pipeline, in HDF5's (encoding) order.

    Parameters
    ----------
    stages
        The filters, in HDF5's order.
    dtype
        The array's dtype (h5py's), or just its element size in bytes.
    where
        What to name in an error (file and dataset).
    type_id
        The dataset's HDF5 datatype (an h5py ``TypeID``): an integer type with padding bits
        gets a first stage that turns stored elements into the values h5py reads.
    szip_sizes_checked
        The caller checks each chunk's szip size (`szip_pixel_check`): szip as the last stage
        after one that may leave a partial pixel is not refused here.

    Raises
    ------
    UnsupportedFeatureError
        Naming the first filter that cannot be mapped, or a padded type refzarr cannot read.
    """
    stages = list(stages)
    padding = integer_padding(type_id, where) if type_id is not None else None
    target = _as_target(dtype, padding)
    codecs: list[dict[str, Any]] = []
    for index, stage in enumerate(stages):
        if padding is not None and stage.id == NBIT and index > 0:
            raise _unsupported(stage, "N-bit after another filter on a padded type", where)
        codec = _mapped(stage, target, where)
        if codec is not None and codec["id"] == "shuffle" and _resized(codecs, codec):
            codec = Hdf5Shuffle(codec["elementsize"]).get_config()
        last = index == len(stages) - 1
        _check_szip_input(codecs, codec, stage, where, checked=szip_sizes_checked and last)
        if codec is not None:
            codecs.append(codec)
    has_nbit = any(c["id"] == Hdf5NBit.codec_id for c in codecs)
    if padding is not None and not has_nbit:
        precision, offset = padding
        codecs.insert(0, Hdf5NBit(target.dtype.str, precision, offset, packed=False).get_config())
    if type_id is not None and _null_terminated(type_id):
        codecs.insert(0, Hdf5NullTerm(type_id.get_size()).get_config())
    return codecs


_STRING, _STR_NULLTERM = 3, 0  # HDF5's H5T_STRING class and H5T_STR_NULLTERM padding


def _null_terminated(type_id: TypeLike) -> bool:
    """Whether values of ``type_id`` are fixed strings of 2+ bytes that end at their first NUL
    (one byte, netCDF's ``char``, needs nothing: a NUL there is the whole value)."""
    if type_id.get_class() != _STRING or type_id.get_size() < 2:
        return False
    variable = getattr(type_id, "is_variable_str", None)
    strpad = getattr(type_id, "get_strpad", None)
    if variable is None or strpad is None:  # not an h5py string type: nothing known
        return False
    return not variable() and strpad() == _STR_NULLTERM
