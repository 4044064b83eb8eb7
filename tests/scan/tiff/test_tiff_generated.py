"""Small TIFFs written by tifffile: every compression tifffile writes, predictors, planar and
chunky samples, partial last strips, sparse tiles, 1-bit masks, packed 12-bit samples, fill
order, BigTIFF, both byte orders, multi-page series and pyramids read back exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import imagecodecs
import numpy as np
import pytest
import tifffile
from tiffkit import assert_matches_tiff, assert_written_matches_tiff

import refzarr

RNG = np.random.default_rng(14)
RGB = RNG.integers(0, 255, (40, 50, 3), dtype=np.uint8)
SMOOTH = (np.add.outer(np.arange(40), np.arange(50)) * 3 % 256).astype(np.uint8)
SMOOTH_RGB = np.stack([SMOOTH, SMOOTH // 2, 255 - SMOOTH], axis=-1)

LOSSLESS = ["zlib", "deflate", "lzma", "zstd", "lzw", "packbits", "png", "pixtiff"]
IMAGE = ["jpeg", "jpeg2000", "jpegxr", "jpegxl", "webp", "lerc"]


def _write(tmp_path: Path, name: str, data: Any, **kwargs: Any) -> Path:
    path = tmp_path / f"{name}.tif"
    tifffile.imwrite(path, data, **kwargs)
    return path


def _check(path: Path, tmp_path: Path | None = None) -> refzarr.RefGroup:
    group = refzarr.scan(path)
    assert_matches_tiff(group, path)
    if tmp_path is not None:
        assert_written_matches_tiff(group, path, tmp_path)
    return group


@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
@pytest.mark.parametrize("layout", ["tiles", "strips"])
@pytest.mark.parametrize("compression", LOSSLESS + IMAGE)
def test_each_compression(compression: str, layout: str, tmp_path: Path) -> None:
    """RGB, chunky; strips of 7 rows leave a last strip of 5 (padded)."""
    shape = {"tile": (16, 16)} if layout == "tiles" else {"rowsperstrip": 7}
    data = SMOOTH_RGB if compression in IMAGE else RGB
    path = _write(tmp_path, compression, data, photometric="rgb", compression=compression, **shape)
    group = _check(path)
    meta = group["band_data"].meta
    assert meta.dimension_names == ("y", "x", "band")
    with tifffile.TiffFile(path) as tif:  # JPEG strips are a multiple of 8 or 16 rows
        rows = tif.pages.first.rowsperstrip
    assert meta.chunks == ((16, 16, 3) if layout == "tiles" else (rows, 50, 3))
    assert_written_matches_tiff(group, path, tmp_path)  # each codec through fsspec + zarr


@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize(
    ("dtype", "predictor", "compression"),
    [
        ("u2", "horizontal", "zlib"),
        ("i4", "horizontal", "lzw"),
        ("u1", "horizontal", "zstd"),
        ("f4", "floatingpoint", "zlib"),
        ("f8", "floatingpoint", "lzw"),
        ("f2", "floatingpoint", "zstd"),
    ],
)
@pytest.mark.parametrize("planar", ["contig", "separate", "single"])
def test_predictors(
    dtype: str, predictor: str, compression: str, planar: str, byteorder: str, tmp_path: Path
) -> None:
    """Predictors difference along columns, on whole chunks (the last strip padded first)."""
    values = RNG.normal(0, 1000, (3, 37, 29) if planar == "separate" else (37, 29, 3))
    data = values.astype(dtype) if dtype[0] == "f" else (values % 1000).astype(dtype)
    kwargs: dict[str, Any] = {"planarconfig": planar} if planar != "single" else {}
    if planar == "single":
        data = data[..., 0]
    path = _write(
        tmp_path,
        f"{dtype}-{predictor}",
        data,
        predictor=predictor,
        compression=compression,
        rowsperstrip=5,
        byteorder=byteorder,
        photometric="minisblack",
        **kwargs,
    )
    through_fsspec = planar == "contig" and dtype in ("u2", "f4")
    _check(path, tmp_path if through_fsspec else None)


@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("dtype", ["u1", "i2", "u4", "f4", "f8", "c8", "c16", "i8"])
def test_bigtiff_both_byte_orders(dtype: str, byteorder: str, tmp_path: Path) -> None:
    data = (RNG.normal(0, 100, (33, 21)) * 7).astype(dtype)
    path = _write(tmp_path, f"big-{dtype}", data, bigtiff=True, byteorder=byteorder, tile=(16, 16))
    group = _check(path, tmp_path if dtype in ("i2", "c8") else None)
    assert group["band_data"].meta.dtype.newbyteorder("=") == np.dtype(dtype)


def test_planar_tiled_and_stripped(tmp_path: Path) -> None:
    data = RNG.integers(0, 60000, (4, 45, 37), dtype=np.uint16)
    for name, kwargs in (("tiled", {"tile": (16, 32)}), ("stripped", {"rowsperstrip": 10})):
        path = _write(
            tmp_path,
            name,
            data,
            planarconfig="separate",
            photometric="minisblack",
            compression="zlib",
            **kwargs,
        )
        group = _check(path)
        assert group["band_data"].meta.dimension_names == ("band", "y", "x")


@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
def test_partial_last_strip_uncompressed(tmp_path: Path) -> None:
    """A last strip of 2 rows of 5, stored short and uncompressed: padded by refzarr.tiff_pad,
    through every reader."""
    data = RNG.integers(0, 255, (37, 23, 3), dtype=np.uint8)
    path = _write(tmp_path, "partial", data, photometric="rgb", rowsperstrip=5)
    group = _check(path, tmp_path)
    assert group["band_data"].meta.codecs == (
        {"id": "refzarr.tiff_pad", "nbytes": 5 * 23 * 3, "short": 2 * 23 * 3},
    )


@pytest.mark.parametrize("compression", [None, "zlib", "packbits"])
@pytest.mark.parametrize("layout", [{"rowsperstrip": 5}, {"tile": (16, 16)}])
def test_one_bit_images_unpack_to_bool(
    compression: str | None, layout: dict[str, Any], tmp_path: Path
) -> None:
    mask = RNG.random((37, 29)) > 0.4
    path = _write(tmp_path, "mask", mask, compression=compression, **layout)
    group = _check(path)
    assert group["band_data"].meta.dtype == np.dtype(bool)


def test_twelve_bit_samples(tmp_path: Path) -> None:
    data = RNG.integers(0, 4096, (37, 23), dtype=np.uint16)
    path = _write(tmp_path, "twelve", data, bitspersample=12, rowsperstrip=5)
    _check(path)


def test_fill_order_reversed_bits(tmp_path: Path) -> None:
    """FillOrder 2: the bits of every stored byte reversed (imagecodecs_bitorder first)."""
    data = RNG.integers(0, 255, (20, 30), dtype=np.uint8)
    stored = imagecodecs.bitorder_encode(data.copy())
    # tifffile writes no FillOrder tag: write a private tag, then renumber its IFD entry
    path = _write(tmp_path, "fillorder", stored, extratags=[(65000, "H", 1, 2, True)])
    with tifffile.TiffFile(path) as tif:
        entry = tif.pages.first.tags[65000].offset
    with open(path, "r+b") as f:
        f.seek(entry)
        f.write((266).to_bytes(2, "little"))
    group = _check(path)
    assert group["band_data"].meta.codecs == ({"id": "imagecodecs_bitorder"},)
    with tifffile.TiffFile(path) as tif:
        np.testing.assert_array_equal(tif.asarray(), data)


def test_sparse_tiles_are_missing_chunks(tmp_path: Path) -> None:
    """Tiles whose offset or byte count is 0 read as the fill value (GDAL_NODATA), as tifffile
    reads them, and are not referenced."""
    data = RNG.integers(1, 200, (48, 48), dtype=np.uint8)
    path = _write(tmp_path, "sparse", data, tile=(16, 16), extratags=[(42113, "s", 0, "7", True)])
    with tifffile.TiffFile(path, mode="r+b") as tif:
        page = tif.pages.first
        offsets, counts = list(page.dataoffsets), list(page.databytecounts)
        offsets[1], counts[4] = 0, 0
        page.tags["TileOffsets"].overwrite(offsets)
        page.tags["TileByteCounts"].overwrite(counts)
    group = _check(path)
    array = group["band_data"]
    assert array.manifest[0, 1] is None
    assert array.manifest[1, 1] is None
    assert array.meta.fill_value == 7
    with tifffile.TiffFile(path) as tif:
        assert (tif.asarray()[:16, 16:32] == 7).all()


def test_multi_page_series_and_pyramid(tmp_path: Path) -> None:
    stack = RNG.integers(0, 255, (3, 4, 20, 30), dtype=np.uint8)
    path = _write(
        tmp_path,
        "stack",
        stack,
        metadata={"axes": "TZYX"},
        tile=(16, 16),
        photometric="minisblack",
    )
    group = _check(path)
    assert group["band_data"].meta.dimension_names == ("t", "z", "y", "x")
    pyramid = tmp_path / "pyramid.tif"
    base = RNG.integers(0, 255, (64, 64), dtype=np.uint8)
    with tifffile.TiffWriter(pyramid) as tif:
        tif.write(base, tile=(16, 16), subifds=2, compression="zlib")
        tif.write(base[::2, ::2], tile=(16, 16), subfiletype=1, compression="zlib")
        tif.write(base[::4, ::4], tile=(16, 16), subfiletype=1, compression="zlib")
        tif.write(stack[0, 0], rowsperstrip=3)  # a second series
    group = _check(pyramid)
    assert {"overview_1", "overview_2", "series_1"} <= set(group.members)


def test_inline_threshold_holds_small_segments(tmp_path: Path) -> None:
    data = RNG.integers(0, 255, (37, 23), dtype=np.uint8)
    path = _write(tmp_path, "inline", data, rowsperstrip=5, compression="zlib")
    group = refzarr.scan(path, inline_threshold=10_000)
    manifest = group["band_data"].manifest
    assert not manifest.paths or (manifest.path_id < 0).all()
    assert_matches_tiff(group, path)


def test_jpeg_multi_page_series(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "pages", np.stack([SMOOTH_RGB] * 3), compression="jpeg", photometric="rgb"
    )
    _check(path)


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("bits", [32, 64])
def test_complex_integer_samples(bits: int, byteorder: str, tmp_path: Path) -> None:
    """SampleFormat 5: int16 (int32) pairs read as complex64 (complex128), as tifffile reads
    them, by refzarr.tiff_complexint (written as plain integers, then the tag changed)."""
    dtype = np.dtype(f"i{bits // 8}")
    data = RNG.integers(-30000, 30000, (23, 17)).astype(dtype)
    path = _write(tmp_path, "cint", data, byteorder=byteorder, rowsperstrip=5, compression="zlib")
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages.first.tags["SampleFormat"].overwrite(5)
    group = _check(path)
    assert group["band_data"].meta.dtype.kind == "c"
    assert group["band_data"].meta.codecs[0]["id"] == "refzarr.tiff_pad"
