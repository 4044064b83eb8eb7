"""The codec pipeline of a TIFF image's segments (tiles or strips) as numcodecs configs:
decompressor, fill order, predictor, packed or complex-integer samples, padding of a short
last strip. imagecodecs' numcodecs codecs where they exist, refzarr's (`refzarr.codecs.tiff`)
where not; anything else is an `UnsupportedFeatureError` naming the feature."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.errors import UnsupportedFeatureError

__all__ = ["SegmentCodecs", "segment_codecs", "stored_dtype"]

Config = dict[str, Any]

_COMPRESSORS: dict[int, Config] = {
    5: {"id": "imagecodecs_lzw"},
    8: {"id": "zlib", "level": 6},
    32946: {"id": "zlib", "level": 6},
    50013: {"id": "zlib", "level": 6},
    32773: {"id": "imagecodecs_packbits"},
    34925: {"id": "lzma"},
    50000: {"id": "imagecodecs_zstd"},
    34887: {"id": "imagecodecs_lerc"},
    50002: {"id": "imagecodecs_jpegxl"},
    52546: {"id": "imagecodecs_jpegxl"},
    33003: {"id": "imagecodecs_jpeg2k"},
    33004: {"id": "imagecodecs_jpeg2k"},
    33005: {"id": "imagecodecs_jpeg2k"},
    34712: {"id": "imagecodecs_jpeg2k"},
    34933: {"id": "imagecodecs_png"},
    22610: {"id": "imagecodecs_jpegxr"},
    34934: {"id": "imagecodecs_jpegxr"},
}
"""TIFF Compression -> decompressor config, for those needing no parameters from tags."""

_JPEG = (7, 34892)
_WEBP = 50001
_IMAGE_CODECS = frozenset(
    (7, 34892, 50001, 50002, 52546, 33003, 33004, 33005, 34712, 34933, 22610, 34934)
)
"""Compressions that decode to an image (native values; no packed bits, no predictor of
TIFF's), as tifffile's ``IMAGE_COMPRESSIONS``. Not LERC: libtiff (GDAL) and tifffile take
its decoded values for bytes in the file's byte order, like deflate's (a big-endian file's
LERC blob holds byte-swapped values)."""

_PREDICTORS = {2: ("imagecodecs_delta", 1), 34892: ("imagecodecs_delta", 2)}
_PREDICTORS |= {34893: ("imagecodecs_delta", 4), 3: ("imagecodecs_floatpred", 1)}
_PREDICTORS |= {34894: ("imagecodecs_floatpred", 2), 34895: ("imagecodecs_floatpred", 4)}


@dataclass(frozen=True, slots=True)
class SegmentCodecs:
    """A page's segment pipeline: the array's dtype and its codecs in encoding order."""

    dtype: np.dtype[Any]
    codecs: tuple[Config, ...]


def stored_dtype(page: Any, where: str) -> np.dtype[Any]:
    """The dtype tifffile gives the page's samples, in the byte order they are stored in
    (native for the floating-point predictor, whose decoder writes native values)."""
    if page.dtype is None:
        raise UnsupportedFeatureError(
            f"{where}: samples of SampleFormat {int(page.sampleformat)} with "
            f"BitsPerSample {page.bitspersample} have no numpy dtype"
        )
    dtype: np.dtype[Any] = np.dtype(page.dtype)
    if dtype.itemsize == 1 or page.predictor in (3, 34894, 34895):
        return dtype
    if page.bitspersample not in (8, 16, 32, 64, 128) or page.compression in _IMAGE_CODECS:
        native: np.dtype[Any] = dtype.newbyteorder("=")  # decoded by imagecodecs: native
        return native
    stored: np.dtype[Any] = dtype.newbyteorder(page.parent.byteorder)
    return stored


def segment_codecs(
    page: Any,
    chunks: Sequence[int],
    x_axis: int,
    short_rows: tuple[int, int] | None,
    where: str,
) -> SegmentCodecs:
    """The codecs (encoding order) decoding each segment of ``page`` into a chunk.

    Parameters
    ----------
    page
        tifffile's key page of the image (its tags describe every page of the series).
    chunks
        The chunk shape of the array (the series' axes).
    x_axis
        The chunk axis along which the horizontal predictors difference (image columns).
    short_rows
        ``(rows of the last strip, rows of a chunk)`` when the last strip holds fewer rows
        than a chunk (it is then padded), else None.
    where
        File and series, named in errors.

    Raises
    ------
    UnsupportedFeatureError
        For a compression, predictor, fill order or sample layout no codec decodes.
    """
    dtype = stored_dtype(page, where)
    if page.is_subsampled and int(page.compression) not in _JPEG:
        raise UnsupportedFeatureError(
            f"{where}: YCbCr chroma subsampling {page.subsampling} without JPEG compression "
            "is not supported (its segments do not hold whole pixels)"
        )
    count = int(np.prod(chunks, dtype=np.int64))
    decode: list[Config] = []  # decoding order, reversed at the end
    if page.fillorder == 2:
        decode.append({"id": "imagecodecs_bitorder"})
    compressor = _decompressor(page, where)
    if compressor is not None:
        decode.append(compressor)
    unpack = _unpacker(page, dtype, chunks, where)
    if unpack is not None:
        decode.append(unpack)
    if short_rows is not None:
        nbytes = count * dtype.itemsize
        short = nbytes // short_rows[1] * short_rows[0]
        decode.append({"id": "refzarr.tiff_pad", "nbytes": nbytes, "short": short})
    predictor = _predictor(page, dtype, chunks, x_axis, where)
    if predictor is not None:
        if unpack is not None:
            raise UnsupportedFeatureError(
                f"{where}: predictor {int(page.predictor)} on {page.bitspersample}-bit "
                f"SampleFormat {int(page.sampleformat)} samples is not supported"
            )
        decode.append(predictor)
    return SegmentCodecs(dtype, tuple(decode[::-1]))


def _decompressor(page: Any, where: str) -> Config | None:
    compression = int(page.compression)
    if compression == 1:
        return None
    if compression in _JPEG:
        return _jpeg(page)
    if compression == _WEBP:
        return (
            {"id": "imagecodecs_webp", "hasalpha": True}
            if page.samplesperpixel == 4
            else {"id": "imagecodecs_webp"}
        )
    found = _COMPRESSORS.get(compression)
    if found is None:
        raise UnsupportedFeatureError(
            f"{where}: compression {_name(page.compression)} ({compression}) is not supported "
            "(no numcodecs or imagecodecs codec decodes its segments one by one)"
        )
    return dict(found)


def _jpeg(page: Any) -> Config:
    from tifffile.tifffile import jpeg_decode_colorspace

    colorspace, outcolorspace = jpeg_decode_colorspace(
        int(page.photometric), int(page.planarconfig), tuple(page.extrasamples), page.is_jfif
    )
    tables = page.jpegtables
    header = page.jpegheader
    return {
        "id": "imagecodecs_jpeg",
        "tables": None if tables is None else base64.b64encode(bytes(tables)).decode(),
        "header": None if header is None else base64.b64encode(bytes(header)).decode(),
        "bitspersample": int(page.bitspersample),
        "colorspace_jpeg": colorspace,
        "colorspace_data": outcolorspace,
    }


def _unpacker(page: Any, dtype: np.dtype[Any], chunks: Sequence[int], where: str) -> Config | None:
    """Turning decoded bytes into samples: packed bits, float24, complex integers."""
    bits = page.bitspersample
    if isinstance(bits, tuple):
        raise UnsupportedFeatureError(
            f"{where}: BitsPerSample {bits} (packed RGB) is not supported"
        )
    if page.compression in _IMAGE_CODECS:
        return None
    if page.sampleformat == 5:
        return {"id": "refzarr.tiff_complexint", "dtype": f"{page.parent.byteorder}i{bits // 16}"}
    if bits in (8, 16, 32, 64, 128):
        return None
    if bits == 24 and dtype.kind == "f":
        return {"id": "imagecodecs_float24", "byteorder": page.parent.byteorder, "rounding": None}
    if dtype.kind in "ub":
        return {
            "id": "imagecodecs_packints",
            "dtype": dtype.str,
            "bitspersample": int(bits),
            "bitorder": None,
            "runlen": int(
                chunks[-1]
                if page.planarconfig == 2 or page.samplesperpixel == 1
                else chunks[-1] * chunks[-2]
            ),
        }
    raise UnsupportedFeatureError(
        f"{where}: {bits}-bit samples of SampleFormat {int(page.sampleformat)} are not supported"
    )


def _predictor(
    page: Any, dtype: np.dtype[Any], chunks: Sequence[int], x_axis: int, where: str
) -> Config | None:
    predictor = int(page.predictor)
    if predictor == 1:
        return None
    found = _PREDICTORS.get(predictor)
    if found is None or page.compression in _IMAGE_CODECS or page.sampleformat == 5:
        raise UnsupportedFeatureError(
            f"{where}: predictor {_name(page.predictor)} ({predictor}) with compression "
            f"{_name(page.compression)} is not supported"
        )
    codec_id, dist = found
    return {
        "id": codec_id,
        "shape": [int(c) for c in chunks],
        "dtype": dtype.str,
        "axis": x_axis - len(chunks),
        "dist": dist,
    }


def _name(value: Any) -> str:
    return str(getattr(value, "name", value))
