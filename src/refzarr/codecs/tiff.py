"""numcodecs codecs for TIFF segments that numcodecs and imagecodecs lack: padding a short
last strip to a whole chunk (``refzarr.tiff_pad``) and widening complex-integer samples to
the complex dtype tifffile gives (``refzarr.tiff_complexint``).

Importing this module registers both with numcodecs (they are also numcodecs entry points);
neither needs imagecodecs. `register_imagecodecs` registers the imagecodecs codecs TIFF
references use (imagecodecs declares no entry points of its own; refzarr's pyproject does);
the TIFF scanner calls it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numcodecs.abc import Codec
from numcodecs.compat import ensure_contiguous_ndarray
from numcodecs.registry import codec_registry, register_codec

__all__ = ["IMAGECODECS_IDS", "TiffComplexInt", "TiffPad", "register_imagecodecs"]


class TiffPad(Codec):  # type: ignore[misc]
    """Pads a decoded segment with zeros to the bytes of a whole chunk.

    The last strip of a TIFF image whose height is not a multiple of RowsPerStrip holds
    fewer rows than the others; Zarr reads it as a whole chunk and cuts it at the array's
    edge, so the rows past the edge only need to exist. Placed right after the decompressor
    (and before any predictor, which works row by row), it makes every strip a whole chunk.

    Only a segment of exactly ``nbytes`` (a whole chunk, left as it is) or ``short`` bytes
    (the last strip, padded) is accepted: any other size means damaged data, which padding
    would turn into wrong values in silence.

    Parameters
    ----------
    nbytes
        Bytes of a whole decoded chunk.
    short
        Bytes of the decoded last strip.
    """

    codec_id = "refzarr.tiff_pad"

    def __init__(self, nbytes: int, short: int) -> None:
        self.nbytes = int(nbytes)
        self.short = int(short)
        if not 0 <= self.short <= self.nbytes:
            raise ValueError(f"need 0 <= short <= nbytes, got short={short}, nbytes={nbytes}")

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration."""
        return {"id": self.codec_id, "nbytes": self.nbytes, "short": self.short}

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The segment's bytes followed by zeros up to ``nbytes``.

        Raises
        ------
        ValueError
            When the segment is neither a whole chunk nor a last strip.
        """
        data = ensure_contiguous_ndarray(buf).view(np.uint8).reshape(-1)
        if data.size == self.nbytes:
            if out is None:
                return data
            _flat(out)[:] = data
            return out
        if data.size != self.short:
            raise ValueError(
                f"a segment decoded to {data.size} bytes; a chunk holds {self.nbytes} and the "
                f"last strip {self.short} (damaged segment?)"
            )
        padded = np.zeros(self.nbytes, dtype=np.uint8) if out is None else _flat(out)
        padded[: data.size] = data
        padded[data.size :] = 0
        return padded if out is None else out

    def encode(self, buf: Any) -> Any:
        """The chunk itself (a whole chunk needs no padding)."""
        return ensure_contiguous_ndarray(buf)


class TiffComplexInt(Codec):  # type: ignore[misc]
    """Complex-integer samples (TIFF SampleFormat 5) as complex floats.

    Each sample is a pair of integers (real, imaginary); numpy has no complex-integer
    dtype, so tifffile reads them as complex floats of twice the integer's size, in the
    file's byte order: ``int16`` pairs become ``complex64``, ``int32`` pairs ``complex128``.

    Parameters
    ----------
    dtype
        The stored integer dtype with its byte order (``"<i2"``, ``">i4"``).
    """

    codec_id = "refzarr.tiff_complexint"

    def __init__(self, dtype: str) -> None:
        integer = np.dtype(dtype)
        if integer.kind != "i" or integer.itemsize not in (2, 4):
            raise ValueError(f"dtype must be a 2- or 4-byte signed integer, got {dtype!r}")
        self.dtype = integer.str
        self.float_dtype = np.dtype(f"{integer.byteorder}f{integer.itemsize * 2}")
        self.complex_dtype = np.dtype(f"{integer.byteorder}c{integer.itemsize * 4}")

    def get_config(self) -> dict[str, Any]:
        """The JSON-serialisable configuration."""
        return {"id": self.codec_id, "dtype": self.dtype}

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The samples as complex floats in the stored byte order."""
        data = ensure_contiguous_ndarray(buf).view(np.uint8).reshape(-1)
        pairs = np.frombuffer(data, dtype=self.dtype)
        values = pairs.astype(self.float_dtype).view(self.complex_dtype)
        if out is not None:
            _flat(out)[:] = values.view(np.uint8)
            return out
        return values

    def encode(self, buf: Any) -> Any:
        """Complex floats as integer pairs (rounded towards zero, as a cast does)."""
        values = np.asarray(buf).astype(self.complex_dtype, copy=False)
        pairs = values.view(self.float_dtype).astype(self.dtype)
        return pairs.tobytes()


def _flat(out: Any) -> np.ndarray[Any, np.dtype[np.uint8]]:
    flat: np.ndarray[Any, np.dtype[np.uint8]] = ensure_contiguous_ndarray(out).view(np.uint8)
    return flat.reshape(-1)


IMAGECODECS_IDS = {
    "imagecodecs_lzw": "Lzw",
    "imagecodecs_packbits": "Packbits",
    "imagecodecs_jpeg": "Jpeg",
    "imagecodecs_webp": "Webp",
    "imagecodecs_zstd": "Zstd",
    "imagecodecs_lerc": "Lerc",
    "imagecodecs_jpegxl": "Jpegxl",
    "imagecodecs_jpeg2k": "Jpeg2k",
    "imagecodecs_png": "Png",
    "imagecodecs_jpegxr": "Jpegxr",
    "imagecodecs_delta": "Delta",
    "imagecodecs_floatpred": "Floatpred",
    "imagecodecs_bitorder": "Bitorder",
    "imagecodecs_packints": "Packints",
    "imagecodecs_float24": "Float24",
}
"""The imagecodecs numcodecs codecs TIFF references use, by id -> class in
``imagecodecs.numcodecs``."""


def register_imagecodecs() -> None:
    """Register the imagecodecs codecs of `IMAGECODECS_IDS` with numcodecs, where not yet
    registered (a no-op without imagecodecs: reading then names the missing codec)."""
    missing = [codec_id for codec_id in IMAGECODECS_IDS if codec_id not in codec_registry]
    if not missing:
        return
    try:
        import imagecodecs.numcodecs as icn
    except ImportError:
        return
    for codec_id in missing:
        register_codec(getattr(icn, IMAGECODECS_IDS[codec_id]))


register_codec(TiffPad)
register_codec(TiffComplexInt)
