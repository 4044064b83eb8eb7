"""Differential fuzz of the TIFF scanner: random files written by tifffile (+ imagecodecs) with
several images, series, pages and pyramid levels, every compression and predictor tifffile
writes, every dtype and bit depth, sparse segments, both byte orders and BigTIFF, read back
through refzarr and through fsspec + zarr on the written references exactly as tifffile reads
them (lossy codecs included: the same decoder gives the same bytes).

``REFZARR_FUZZ_EXAMPLES=500 pytest tests/scan/tiff/test_tiff_fuzz.py`` explores more.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tifffile
from hypothesis import given, reject
from hypothesis import strategies as st
from tiffkit import assert_matches_tiff, assert_reader_matches_tiff, assert_written_matches_tiff

import refzarr
from fuzzkit import fuzz_settings
from refzarr.errors import UnsupportedFeatureError

pytestmark = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")

LOSSLESS = [None, "zlib", "lzw", "packbits", "zstd", "lzma", "deflate"]
"""Compressions that take any dtype and the TIFF predictors."""

IMAGE_DTYPES: dict[str, list[str]] = {
    "jpeg": ["u1"],
    "webp": ["u1"],
    "lerc": ["u1", "i1", "u2", "i2", "u4", "i4", "f4", "f8"],
    "jpegxl": ["u1", "u2", "f4"],
    "jpeg2000": ["u1", "u2", "i2"],
    "png": ["u1", "u2"],
    "jpegxr": ["u1"],
}
"""Image codecs and the dtypes tifffile + imagecodecs write with them."""

ALL_DTYPES = ["u1", "i1", "u2", "i2", "u4", "i4", "u8", "i8", "f2", "f4", "f8", "c8", "c16"]

DOCUMENTED = (
    "predictor",
    "YCbCr chroma subsampling without JPEG",
    "packed RGB",
    "different JPEGTables",
    "no stack of pages",
)
"""What docs/formats/tiff.md names as unsupported (a scan may refuse only those)."""


@dataclass
class Image:
    """One ``TiffWriter.write`` call (a page, a stack of pages or a pyramid level)."""

    data: np.ndarray
    kwargs: dict[str, Any]
    sparse: frozenset[int] = frozenset()
    levels: list[Image] = field(default_factory=list)


def _values(draw: st.DrawFn, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    smooth = draw(st.booleans())  # image codecs compress smooth data well, noise badly
    if smooth:
        grid = np.indices(shape).sum(axis=0).astype(np.float64)
        raw = grid * draw(st.sampled_from([1.0, 3.0, 17.5]))
    else:
        raw = rng.normal(0, 1, shape) * draw(st.sampled_from([1.0, 100.0, 1e6, 1e30]))
    if dtype.kind == "f":
        with np.errstate(over="ignore"):
            out = raw.astype(dtype)
        if draw(st.booleans()):
            out.flat[:: max(1, out.size // 3)] = np.nan
        return out
    if dtype.kind == "c":
        return (raw + 1j * raw[::-1]).astype(dtype)
    info = np.iinfo(dtype)
    span = min(float(info.max) - float(info.min) + 1, 2.0**52)  # exact in float64
    wrapped = np.nan_to_num(np.mod(raw, span)) + max(float(info.min), -(2.0**51))
    return wrapped.astype(np.int64).astype(dtype) if dtype.itemsize < 8 else wrapped.astype(dtype)


@st.composite
def images(draw: st.DrawFn, *, shape: tuple[int, int] | None = None) -> Image:
    """One image: dtype, samples, compression, predictor, tiles or strips, sparse segments."""
    height, width = shape or (draw(st.integers(1, 45)), draw(st.integers(1, 45)))
    compression = draw(st.sampled_from(LOSSLESS * 2 + list(IMAGE_DTYPES)))
    kwargs: dict[str, Any] = {"compression": compression, "metadata": None}
    bilevel = compression in LOSSLESS and draw(st.integers(0, 9)) == 0
    if bilevel:
        dtype = np.dtype(bool)
    elif compression in LOSSLESS:
        dtype = np.dtype(draw(st.sampled_from(ALL_DTYPES)))
    else:
        dtype = np.dtype(draw(st.sampled_from(IMAGE_DTYPES[compression])))
    samples, photometric = _samples(draw, compression, dtype)
    kwargs["photometric"] = photometric
    planar = samples > 1 and compression in LOSSLESS and draw(st.booleans())
    if samples > 1:
        kwargs["planarconfig"] = "separate" if planar else "contig"
        if (photometric == "rgb" and samples == 4) or photometric == "minisblack":
            extra = samples - (3 if photometric == "rgb" else 1)
            if extra:
                kwargs["extrasamples"] = [draw(st.sampled_from([0, 1, 2])) for _ in range(extra)]
    pages = draw(st.sampled_from([1, 1, 1, 2, 3]))
    page_shape = (samples, height, width) if planar else (height, width, samples)
    if samples == 1:
        page_shape = (height, width)
    full = (pages, *page_shape) if pages > 1 else page_shape
    data = _values(draw, dtype, full)
    if pages > 1:
        kwargs["metadata"] = {}  # tifffile's shaped series: one series of the pages
    _compression_options(draw, kwargs, compression, dtype, samples, photometric)
    tiled = draw(st.booleans())
    if tiled:
        kwargs["tile"] = (16 * draw(st.integers(1, 3)), 16 * draw(st.integers(1, 3)))
    else:
        kwargs["rowsperstrip"] = draw(st.integers(1, height + 8))
    sparse: frozenset[int] = frozenset()
    if tiled and compression is not None and draw(st.integers(0, 3)) == 0:
        tiles = _segment_count(data, kwargs, planar, samples, pages)
        # tifffile takes the dtype from the first tile: that one is written
        sparse = frozenset(draw(st.sets(st.integers(1, max(tiles - 1, 1)), max_size=tiles)))
    return Image(data, kwargs, sparse)


def _samples(draw: st.DrawFn, compression: str | None, dtype: np.dtype[Any]) -> tuple[int, str]:
    if dtype.kind == "b":
        return 1, draw(st.sampled_from(["minisblack", "miniswhite"]))
    if compression == "webp":  # RGB or RGBA only
        return draw(st.sampled_from([(3, "rgb"), (4, "rgb")]))
    if compression == "png" and dtype.itemsize > 1:
        return 1, "minisblack"
    if compression in ("jpeg", "jpegxr", "png", "jpegxl", "jpeg2000"):
        return draw(st.sampled_from([(1, "minisblack"), (3, "rgb")]))
    return draw(
        st.sampled_from(
            [
                (1, "minisblack"),
                (1, "minisblack"),
                (3, "rgb"),
                (4, "rgb"),
                (2, "minisblack"),
                (5, "minisblack"),
            ]
        )
    )


def _compression_options(
    draw: st.DrawFn,
    kwargs: dict[str, Any],
    compression: str | None,
    dtype: np.dtype[Any],
    samples: int,
    photometric: str,
) -> None:
    if compression in ("zlib", "deflate", "zstd", "lzma") and draw(st.booleans()):
        top = {"zlib": 9, "deflate": 9, "zstd": 19, "lzma": 9}[compression]
        kwargs["compressionargs"] = {"level": draw(st.integers(0, top))}
    predicted = ("zlib", "deflate", "lzw", "zstd", "lzma", "packbits", "lerc")
    if compression in predicted and dtype.kind in "uif":
        predictor = draw(st.sampled_from([None, "horizontal", "floatingpoint"]))
        if predictor is not None:  # tifffile: horizontal on integers, floatingpoint on floats
            predictor = "floatingpoint" if dtype.kind == "f" else "horizontal"
        kwargs["predictor"] = predictor
    if compression is None and dtype.kind == "u" and draw(st.booleans()):
        low = {1: 1, 2: 9, 4: 17}.get(dtype.itemsize)
        if low is not None:
            kwargs["bitspersample"] = draw(st.integers(low, dtype.itemsize * 8))
    if compression == "jpeg":
        kwargs["compressionargs"] = {"level": draw(st.integers(10, 95))}
        if samples == 3 and draw(st.booleans()):
            kwargs["photometric"] = "ycbcr"
            kwargs["subsampling"] = draw(st.sampled_from([(1, 1), (2, 1), (2, 2)]))
    if compression == "webp" and draw(st.booleans()):
        kwargs["compressionargs"] = {"level": draw(st.integers(0, 100))}
    if compression == "lerc" and dtype.kind == "f" and draw(st.booleans()):
        kwargs["compressionargs"] = {"level": draw(st.sampled_from([0.0, 0.5, 10.0]))}


def _segment_count(
    data: np.ndarray, kwargs: dict[str, Any], planar: bool, samples: int, pages: int
) -> int:
    height, width = (
        (data.shape[-2:] if planar else data.shape[-3:-1]) if samples > 1 else data.shape[-2:]
    )
    tile = kwargs["tile"]
    per_plane = -(-height // tile[0]) * -(-width // tile[1])
    return per_plane * (samples if planar else 1) * pages


@st.composite
def tiff_files(draw: st.DrawFn) -> tuple[dict[str, Any], list[Image]]:
    """A file: byte order, BigTIFF, 1 to 3 images each with 0 to 2 reduced levels (SubIFDs
    or pages of their own)."""
    found = []
    for _ in range(draw(st.integers(1, 3))):
        image = draw(images())
        if image.data.ndim == image_ndim(image) and not image.sparse:
            for _ in range(draw(st.integers(0, 2))):
                image.levels.append(_reduced(image, len(image.levels) + 1))
        found.append(image)
    # imagecodecs encodes wider samples of image codecs in native order only
    native = any(i.kwargs["compression"] in IMAGE_DTYPES and i.data.itemsize > 1 for i in found)
    byteorder = "<" if native else draw(st.sampled_from(["<", ">"]))
    options = {"byteorder": byteorder, "bigtiff": draw(st.booleans())}
    subifds = draw(st.booleans())
    for image in found:
        image.kwargs["subifds"] = len(image.levels) if subifds and image.levels else None
    return options, found


def image_ndim(image: Image) -> int:
    """Dimensions of one page of the image (a stack of pages has one more)."""
    return 2 if "planarconfig" not in image.kwargs else 3


def _reduced(image: Image, level: int) -> Image:
    step = 2**level
    planar = image.kwargs.get("planarconfig") == "separate"
    data = (
        image.data[..., ::step, ::step]
        if planar or image.data.ndim == 2
        else image.data[::step, ::step]
    )
    kwargs = {k: v for k, v in image.kwargs.items() if k not in ("subifds",)}
    kwargs["subfiletype"] = 1
    return Image(np.ascontiguousarray(data), kwargs)


def _tiles(image: Image) -> Iterator[np.ndarray | None]:
    """The image's tiles in file order, None where sparse (tifffile writes nothing)."""
    tile = image.kwargs["tile"]
    planar = image.kwargs.get("planarconfig") == "separate"
    pages = image.data if image.data.ndim > image_ndim(image) else image.data[np.newaxis]
    planes = [p for page in pages for p in (page if planar else page[np.newaxis])]
    k = 0
    for plane in planes:
        for y in range(0, plane.shape[0], tile[0]):
            for x in range(0, plane.shape[1], tile[1]):
                yield None if k in image.sparse else plane[y : y + tile[0], x : x + tile[1]]
                k += 1


def write_file(path: Path, options: dict[str, Any], found: list[Image]) -> None:
    """Write the images with tifffile; reject combinations tifffile refuses."""
    try:
        with tifffile.TiffWriter(path, **options) as tif:
            for image in found:
                _write(tif, image, image.kwargs.get("subifds"))
                for level in image.levels:
                    _write(tif, level, None)
        with tifffile.TiffFile(path) as tif:
            for series in tif.series:
                for level in series.levels:
                    level.asarray()
    except (ValueError, TypeError, NotImplementedError, RuntimeError) as exc:
        _reject_writer_refusal(exc, found)
    except Exception as exc:  # imagecodecs' encoders raise errors of their own types
        if type(exc).__module__.startswith("imagecodecs"):
            _reject_writer_refusal(exc, found)
        raise


def _reject_writer_refusal(exc: Exception, found: list[Image]) -> None:
    log = os.environ.get("REFZARR_FUZZ_REJECTS")  # where exploring runs list what was refused
    if log:
        described = [(i.data.dtype.str, i.data.shape, i.kwargs) for i in found]
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{type(exc).__name__}: {str(exc)[:200]} {described}\n")
    reject()


def _write(tif: tifffile.TiffWriter, image: Image, subifds: int | None) -> None:
    kwargs = dict(image.kwargs)
    kwargs["subifds"] = subifds
    if image.sparse:
        tif.write(_tiles(image), shape=image.data.shape, dtype=image.data.dtype, **kwargs)
    else:
        tif.write(image.data, **kwargs)


def scan_or_documented(path: Path) -> refzarr.RefGroup | None:
    """The scan, or None when it refuses a feature the docs name as unsupported."""
    try:
        return refzarr.scan(path)
    except UnsupportedFeatureError as exc:
        if any(words in str(exc) for words in DOCUMENTED):
            return None
        raise


@fuzz_settings(ci_examples=15)
@given(tiff_files(), st.booleans())
def test_random_tiff_files_read_back(case: tuple[dict[str, Any], list[Image]], write: bool) -> None:
    options, found = case
    with tempfile.TemporaryDirectory(prefix="refzarr-tifffuzz-") as folder:
        path = Path(folder) / "fuzz.tif"
        write_file(path, options, found)
        group = scan_or_documented(path)
        if group is None:
            return
        assert_matches_tiff(group, path)
        assert_reader_matches_tiff(group, path)
        if write:
            assert_written_matches_tiff(group, path, Path(folder))


def test_shaped_stack_then_plain_image(tmp_path: Path) -> None:
    """tifffile logs "invalid shaped series metadata or corrupted file" for a shaped stack
    followed by a plain image (both written by tifffile) and lists generic series instead;
    the scan took the log for damage and refused the file (found by the fuzz above)."""
    path = tmp_path / "mixed.tif"
    with tifffile.TiffWriter(path) as tif:
        tif.write(np.arange(2 * 3 * 4, dtype="u1").reshape(2, 3, 4), metadata={})
        tif.write(np.ones((5, 6), dtype="i2"), metadata=None)
    group = refzarr.scan(path)
    assert_matches_tiff(group, path)


GDAL_COMPRESSIONS = [
    "NONE", "DEFLATE", "LZW", "PACKBITS", "ZSTD", "LZMA", "JPEG", "WEBP", "LERC",
    "LERC_DEFLATE", "LERC_ZSTD",
]  # fmt: skip
GDAL_DTYPES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "float64"]


@st.composite
def gdal_tiffs(draw: st.DrawFn) -> tuple[np.ndarray, dict[str, Any], list[int], bool]:
    """A GeoTIFF written by GDAL (rasterio): JPEG in YCbCr with JPEGTables, WebP, LERC,
    predictors, NBITS, pixel or band interleave, sparse blocks, internal overviews and masks,
    BigTIFF, big-endian."""
    compress = draw(st.sampled_from(GDAL_COMPRESSIONS))
    height, width = draw(st.integers(1, 70)), draw(st.integers(1, 70))
    if compress in ("JPEG", "WEBP"):
        dtype = "uint8"
        count = draw(st.sampled_from([3, 4] if compress == "WEBP" else [1, 3]))
    else:
        dtype = draw(st.sampled_from(GDAL_DTYPES))
        count = draw(st.sampled_from([1, 1, 2, 3]))
    profile: dict[str, Any] = {
        "driver": "GTiff",
        "height": height,
        "width": width,
        "count": count,
        "dtype": dtype,
        "compress": compress,
        "interleave": draw(st.sampled_from(["pixel", "band"])),
        "bigtiff": draw(st.sampled_from(["YES", "NO"])),
        "endianness": draw(st.sampled_from(["LITTLE", "BIG"])),
        "sparse_ok": True,
    }
    if compress in ("JPEG", "WEBP"):
        profile["interleave"] = "pixel" if count > 1 else "band"
    if compress == "JPEG":
        profile["jpeg_quality"] = draw(st.integers(10, 100))
        if count == 3 and draw(st.booleans()):
            profile["photometric"] = "YCBCR"
    if draw(st.booleans()):
        profile.update(tiled=True, blockxsize=16 * draw(st.integers(1, 3)))
        profile["blockysize"] = 16 * draw(st.integers(1, 3))
    else:
        profile["blockysize"] = draw(st.integers(1, height + 8))
    if compress in ("DEFLATE", "LZW", "ZSTD", "LZMA") and draw(st.booleans()):
        profile["predictor"] = 3 if dtype.startswith("float") else 2
    if (
        compress in ("NONE", "DEFLATE", "LZW")
        and dtype in ("uint8", "uint16")
        and draw(st.booleans())
    ):
        profile["nbits"] = draw(st.integers(1, 8 if dtype == "uint8" else 16))
        profile.pop("predictor", None)
    if draw(st.booleans()):
        profile["nodata"] = 0
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    grid = np.indices((count, height, width)).sum(axis=0)
    data = (grid * 7 + rng.integers(0, 5, grid.shape)).astype(dtype)
    if "nbits" in profile:
        data = (data.astype(np.int64) % (1 << profile["nbits"])).astype(dtype)
    overviews = draw(st.sampled_from([[], [], [2], [2, 4]]))
    overviews = [f for f in overviews if min(height, width) >= f]
    mask = draw(st.integers(0, 3)) == 0
    return data, profile, overviews, mask


def _write_gdal(
    path: Path,
    data: np.ndarray,
    profile: dict[str, Any],
    overviews: list[int],
    mask: bool,
    window: bool,
) -> None:
    import rasterio
    from rasterio.enums import Resampling
    from rasterio.windows import Window

    options = {"GDAL_TIFF_INTERNAL_MASK": "YES"}
    with rasterio.Env(**options), rasterio.open(path, "w", **profile) as ds:
        if window:  # only the top-left part: the other blocks stay sparse
            h, w = max(1, data.shape[1] // 2), max(1, data.shape[2] // 2)
            ds.write(data[:, :h, :w], window=Window(0, 0, w, h))
        else:
            ds.write(data)
        if mask:
            ds.write_mask((data[0] % 3 != 0).astype("uint8") * 255)
        if overviews:
            ds.build_overviews(overviews, Resampling.nearest)


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
@fuzz_settings(ci_examples=10)
@given(gdal_tiffs(), st.booleans())
def test_random_gdal_tiffs_read_back(
    case: tuple[np.ndarray, dict[str, Any], list[int], bool], window: bool
) -> None:
    data, profile, overviews, mask = case
    with tempfile.TemporaryDirectory(prefix="refzarr-tifffuzz-") as folder:
        path = Path(folder) / "gdal.tif"
        try:
            _write_gdal(path, data, profile, overviews, mask, window)
        except Exception as exc:  # GDAL refusing a combination (rasterio's errors)
            if type(exc).__module__.startswith("rasterio"):
                _reject_writer_refusal(exc, [])
            raise
        group = scan_or_documented(path)
        if group is None:
            return
        assert_matches_tiff(group, path)
        assert_reader_matches_tiff(group, path)


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_lerc_in_big_endian_file(dtype: str, tmp_path: Path) -> None:
    """GDAL's LERC in a big-endian file holds byte-swapped values (libtiff and tifffile take
    the decoded values for bytes in the file's order); the scan declared them native and read
    them byte-swapped, in silence (found by the fuzz above)."""
    import rasterio

    path = tmp_path / "lerc_be.tif"
    data = (np.arange(2 * 5 * 6) * 300).astype(dtype).reshape(2, 5, 6)
    profile = {"driver": "GTiff", "height": 5, "width": 6, "count": 2, "dtype": dtype}
    profile |= {"compress": "LERC_DEFLATE", "endianness": "BIG", "blockysize": 2}
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(data)
    group = refzarr.scan(path)
    assert group["band_data"].meta.dtype == np.dtype(dtype).newbyteorder(">")
    assert_matches_tiff(group, path)
    assert_written_matches_tiff(group, path, tmp_path)
    np.testing.assert_array_equal(tifffile.imread(path), np.moveaxis(data, 0, -1))
