"""Files astropy writes: every BITPIX, the unsigned conventions, every
tile compression with edge tiles, tables with TDIM and scaled columns; each read back
exactly as astropy reads it, through refzarr and through fsspec + zarr."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from astropy.io import fits
from fitskit import assert_decoded_match, assert_raw_match, assert_zarr_match
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refzarr
from refzarr.scan.fits import FitsScanner

RNG = np.random.default_rng(7)


def _roundtrip(path: Path, tmp_path: Path, **options: Any) -> refzarr.RefGroup:
    group = refzarr.scan(path, **options)
    assert not group.skipped
    assert_raw_match(group, path)
    assert_decoded_match(group, path)
    out = tmp_path / "refs.json"
    refzarr.write(group, out)
    assert_zarr_match(out, group, path)
    return group


def _image(dtype: str, shape: tuple[int, ...] = (7, 5)) -> np.ndarray[Any, Any]:
    kind = np.dtype(dtype).kind
    if kind == "f":
        values = RNG.normal(size=shape).astype(dtype)
        values.flat[3] = np.nan
        return values
    info = np.iinfo(dtype)
    low, high = max(int(info.min), -(2**62)), min(int(info.max), 2**62)
    values = RNG.integers(low, high, size=shape, endpoint=True).astype(dtype)
    values.flat[0], values.flat[-1] = info.min, info.max
    return values


@pytest.mark.parametrize("dtype", ["u1", "i2", "i4", "i8", "f4", "f8"])
def test_every_bitpix(tmp_path: Path, dtype: str) -> None:
    path = tmp_path / "image.fits"
    fits.PrimaryHDU(_image(dtype)).writeto(path)
    group = _roundtrip(path, tmp_path)
    assert group["PRIMARY"].meta.dtype == np.dtype(dtype).newbyteorder(">")
    assert group["PRIMARY"].meta.dimension_names == ("y", "x")


@pytest.mark.parametrize(("dtype", "expected"), [("u2", "<u2"), ("u4", "<u4"), ("u8", "<u8")])
def test_unsigned_convention(tmp_path: Path, dtype: str, expected: str) -> None:
    path = tmp_path / "unsigned.fits"
    fits.ImageHDU(_image(dtype), name="UINT").writeto(path)
    group = _roundtrip(path, tmp_path)
    meta = group["UINT"].meta
    assert meta.dtype == np.dtype(expected)
    assert [c["id"] for c in meta.codecs] == ["refzarr.fits_unsigned"]


def test_signed_bytes(tmp_path: Path) -> None:
    path = tmp_path / "int8.fits"
    fits.PrimaryHDU(_image("i1")).writeto(path)
    group = _roundtrip(path, tmp_path)
    assert group["PRIMARY"].meta.dtype == np.dtype("i1")


TILINGS = [
    (algorithm, tile)
    for algorithm in ("RICE_1", "GZIP_1", "GZIP_2", "PLIO_1", "HCOMPRESS_1")
    for tile in ((1, 37), (8, 16), (37, 23))
    if not (algorithm == "HCOMPRESS_1" and min(tile) < 4)  # HCOMPRESS needs 4 x 4 at least
]


@pytest.mark.parametrize(("algorithm", "tile"), TILINGS)
def test_tile_compression_with_edge_tiles(
    tmp_path: Path, algorithm: str, tile: tuple[int, int]
) -> None:
    values = RNG.integers(0, 2**12 if algorithm == "PLIO_1" else 2**15, size=(30, 37))
    hdu = fits.CompImageHDU(
        values.astype("i2"), compression_type=algorithm, tile_shape=tile, name="TILED"
    )
    path = tmp_path / "tiled.fits"
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    group = _roundtrip(path, tmp_path)
    array = group["TILED"]
    assert array.meta.chunks == tile
    assert array.manifest.grid_shape == (-(-30 // tile[0]), -(-37 // tile[1]))
    assert (array.manifest.path_id >= 0).all()  # every tile referenced, edge tiles included


@pytest.mark.parametrize("dtype", ["u1", "i4", "u2", "f4", "f8"])
def test_tile_compressed_types(tmp_path: Path, dtype: str) -> None:
    values = _image(dtype, (20, 33))
    if dtype.startswith("f"):
        values[np.isnan(values)] = 0
        hdu = fits.CompImageHDU(
            values, compression_type="GZIP_2", tile_shape=(6, 10), quantize_level=0.0
        )
    else:
        hdu = fits.CompImageHDU(values, compression_type="RICE_1", tile_shape=(6, 10))
    path = tmp_path / "types.fits"
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    group = _roundtrip(path, tmp_path)
    assert group["COMPRESSED_IMAGE"].manifest.grid_shape == (4, 4)


def test_quantized_tiles_inlined_when_small_else_unsupported(tmp_path: Path) -> None:
    values = RNG.normal(size=(40, 30)).astype("f4")
    hdu = fits.CompImageHDU(values, compression_type="RICE_1", tile_shape=(10, 10))
    path = tmp_path / "quantized.fits"
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    group = _roundtrip(path, tmp_path)
    assert "fits_decoded" in group["COMPRESSED_IMAGE"].meta.attributes
    with pytest.raises(refzarr.UnsupportedFeatureError, match=r"quantized.*inline_decoded"):
        refzarr.scan(path, inline_decoded=100)
    skipped = refzarr.scan(path, inline_decoded=100, on_unsupported="skip")
    assert "COMPRESSED_IMAGE" not in skipped
    assert [s.path for s in skipped.skipped] == ["/COMPRESSED_IMAGE"]


def test_tables_with_tdim_and_scaled_columns(tmp_path: Path) -> None:
    columns = [
        fits.Column("id", "J", array=np.arange(6)),
        fits.Column("flux", "I", array=np.arange(6) * 3),  # TSCAL2/TZERO2 set below
        fits.Column("flag", "L", array=np.array([True, False] * 3)),
        fits.Column("name", "8A", array=np.array([b"a", b"bb"] * 3)),
        fits.Column("cube", "6E", dim="(3,2)", array=RNG.normal(size=(6, 2, 3))),
        fits.Column("count", "I", array=np.arange(6) - 1, null=-1),
        fits.Column("uint", "I", array=np.arange(6, dtype="u2") + 40000, bzero=32768),
        fits.Column("z", "C", array=np.arange(6) * (1 + 2j)),
    ]
    table = fits.BinTableHDU.from_columns(columns, name="CAT")
    path = tmp_path / "table.fits"
    fits.HDUList([fits.PrimaryHDU(), table]).writeto(path)
    fits.setval(path, "TSCAL2", value=0.5, ext=1, after="TFORM2")
    fits.setval(path, "TZERO2", value=2.0, ext=1, after="TSCAL2")
    group = _roundtrip(path, tmp_path, chunk_bytes=100)
    array = group["CAT"]
    assert array.meta.dimension_names == ("CAT_row",)
    fields = array.meta.attributes["fits_fields"]
    assert fields["flux"] == {"TSCAL": 0.5, "TZERO": 2.0}
    assert fields["count"] == {"TNULL": -1}
    assert array.meta.dtype["cube"].shape == (2, 3)


def test_ascii_table_parsed(tmp_path: Path) -> None:
    columns = [
        fits.Column("a", "E12.5", array=np.array([1.5, -2.25e10, 3.0, 0.0, 7.0])),
        fits.Column("b", "I6", array=np.arange(5)),
        fits.Column("c", "A4", array=np.array([b"x", b"yy", b"zzz", b"", b"w"])),
        fits.Column("d", "D20.10", array=np.linspace(0, 1, 5)),
    ]
    path = tmp_path / "ascii.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.TableHDU.from_columns(columns, name="TXT")]).writeto(path)
    for chunk_bytes in (10**6, 100):
        group = _roundtrip(path, tmp_path, chunk_bytes=chunk_bytes)
        assert [c["id"] for c in group["TXT"].meta.codecs] == ["refzarr.fits_ascii"]


def test_large_image_chunked_along_slowest_axis(tmp_path: Path) -> None:
    path = tmp_path / "cube.fits"
    fits.PrimaryHDU(_image("i4", (5, 13, 11))).writeto(path)
    group = _roundtrip(path, tmp_path, chunk_bytes=2000)
    meta = group["PRIMARY"].meta
    assert meta.chunks[1:] == (13, 11)
    assert meta.chunks[0] < 5
    assert meta.dimension_names == ("z", "y", "x")
    path4 = tmp_path / "four.fits"
    fits.PrimaryHDU(_image("i2", (2, 3, 4, 5))).writeto(path4)
    four = _roundtrip(path4, tmp_path, chunk_bytes=50)
    assert four["PRIMARY"].meta.dimension_names == ("dim_3", "z", "y", "x")


def test_names_and_dimensions_across_hdus(tmp_path: Path) -> None:
    hdus = fits.HDUList(
        [
            fits.PrimaryHDU(_image("i2", (4, 5))),
            fits.ImageHDU(_image("i2", (4, 5)), name="SCI", ver=1),
            fits.ImageHDU(_image("i2", (4, 6)), name="SCI", ver=2),
            fits.ImageHDU(_image("f4", (4, 5))),
        ]
    )
    path = tmp_path / "mef.fits"
    hdus.writeto(path)
    group = _roundtrip(path, tmp_path)
    assert sorted(n for n, _ in group.arrays()) == ["HDU3", "PRIMARY", "SCI_1", "SCI_2"]
    assert group["SCI_1"].meta.dimension_names == ("y", "x")
    assert group["SCI_2"].meta.dimension_names == ("y", "x_SCI_2")
    assert group["HDU3"].meta.attributes["fits_hdu"] == 3


def test_header_cards_as_attributes(tmp_path: Path) -> None:
    hdu = fits.PrimaryHDU(_image("i2"))
    hdu.header["OBSERVER"] = ("Edwin", "who")
    hdu.header["EXPTIME"] = 12.5
    hdu.header["FLAG"] = False
    hdu.header.add_comment("first")
    hdu.header.add_comment("second")
    hdu.header.add_history("made")
    path = tmp_path / "header.fits"
    hdu.writeto(path)
    attrs = refzarr.scan(path)["PRIMARY"].meta.attributes
    assert attrs["OBSERVER"] == "Edwin"
    assert attrs["EXPTIME"] == 12.5
    assert attrs["FLAG"] is False
    assert list(attrs["COMMENT"]) == ["first", "second"]
    assert list(attrs["HISTORY"]) == ["made"]
    assert attrs["BITPIX"] == 16


def test_scanner_options_and_pickling(tmp_path: Path) -> None:
    import pickle

    scanner = FitsScanner(chunk_bytes=64, inline_threshold=10**6)
    assert pickle.loads(pickle.dumps(scanner)) == scanner
    path = tmp_path / "small.fits"
    fits.PrimaryHDU(_image("i2")).writeto(path)
    group = scanner(str(path))
    assert (group["PRIMARY"].manifest.path_id < 0).all()  # every chunk inlined
    assert_raw_match(group, path)
    with pytest.raises(ValueError, match="chunk_bytes"):
        FitsScanner(chunk_bytes=0)


def test_stack_extensions_one_per_ccd(tmp_path: Path) -> None:
    ccds = [_image("i2", (6, 8)) for _ in range(3)]
    hdus = [fits.PrimaryHDU()]
    for k, values in enumerate(ccds, start=1):
        hdus.append(fits.ImageHDU(values, name="SCI", ver=k))
        hdus[-1].header["CCDTEMP"] = -100.0 - k
        hdus.append(fits.ImageHDU(values.astype("f4"), name="ERR", ver=k))
    path = tmp_path / "mosaic.fits"
    fits.HDUList(hdus).writeto(path)
    group = refzarr.scan(path, stack_extensions=True)
    assert sorted(n for n, _ in group.arrays()) == ["ERR", "SCI", "extver"]
    sci = group["SCI"]
    assert sci.meta.dimension_names == ("extver", "y", "x")
    assert sci.meta.chunks == (1, 6, 8)
    assert list(sci.meta.attributes["fits_headers"]["CCDTEMP"]) == [-101.0, -102.0, -103.0]
    with refzarr.open_dataset(group) as ds:
        np.testing.assert_array_equal(ds["SCI"].values, np.stack(ccds))
        np.testing.assert_array_equal(ds["ERR"].values, np.stack(ccds).astype("f4"))
        assert list(ds["extver"].values) == [1, 2, 3]
    out = tmp_path / "mosaic.json"
    refzarr.write(group, out)
    with refzarr.open_dataset(out) as ds:
        np.testing.assert_array_equal(ds["SCI"].values, np.stack(ccds))


def test_stack_extensions_refuses_unlike_ccds(tmp_path: Path) -> None:
    hdus = [fits.PrimaryHDU()]
    hdus.append(fits.ImageHDU(_image("i2", (6, 8)), name="SCI", ver=1))
    hdus.append(fits.ImageHDU(_image("i2", (6, 9)), name="SCI", ver=2))
    path = tmp_path / "unlike.fits"
    fits.HDUList(hdus).writeto(path)
    with pytest.raises(refzarr.UnsupportedFeatureError, match="cannot stack 'SCI_1' and 'SCI_2'"):
        refzarr.scan(path, stack_extensions=True)


@pytest.mark.parametrize("algorithm", ["RICE_1", "GZIP_1", "PLIO_1"])
def test_edge_tiles_of_equal_lengths_told_apart_by_digest(tmp_path: Path, algorithm: str) -> None:
    # constant tiles, one value each: (16, 8) and (8, 16) edge tiles compress to equal lengths
    tiles = np.arange(9, dtype="i2").reshape(3, 3) * 7 + 1
    values = np.kron(tiles, np.ones((16, 16), dtype="i2"))[:40, :40]
    hdu = fits.CompImageHDU(values, compression_type=algorithm, tile_shape=(16, 16))
    path = tmp_path / "digest.fits"
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    group = _roundtrip(path, tmp_path)
    codec = group["COMPRESSED_IMAGE"].meta.codecs[0]
    assert codec["digests"], codec
    assert "fits_decoded" not in group["COMPRESSED_IMAGE"].meta.attributes


def test_edge_tiles_of_identical_bytes_decoded(tmp_path: Path) -> None:
    values = np.zeros((40, 40), dtype="i2")  # (16, 8) and (8, 16) edge tiles: the same bytes
    hdu = fits.CompImageHDU(values, compression_type="RICE_1", tile_shape=(16, 16))
    path = tmp_path / "zeros.fits"
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    group = _roundtrip(path, tmp_path)
    assert "identical bytes" in group["COMPRESSED_IMAGE"].meta.attributes["fits_decoded"]


def test_variable_length_columns_inlined_when_small_else_unsupported(tmp_path: Path) -> None:
    cells = [np.arange(n, dtype="f8") for n in (1, 4, 0, 2)]
    columns = [
        fits.Column("spectrum", "PD()", array=np.array(cells, dtype=object)),
        fits.Column("id", "K", array=np.arange(4)),
    ]
    path = tmp_path / "vla.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(columns, name="VL")]).writeto(
        path
    )
    group = _roundtrip(path, tmp_path)
    array = group["VL"]
    assert list(array.meta.attributes["fits_variable_length"]) == ["spectrum"]
    assert array.meta.dtype["spectrum"].shape == (4,)
    with pytest.raises(refzarr.UnsupportedFeatureError, match=r"HDU 1 \('VL'\): variable-length"):
        refzarr.scan(path, inline_decoded=10)
    skipped = refzarr.scan(path, inline_decoded=10, on_unsupported="skip")
    assert [s.path for s in skipped.skipped] == ["/VL"]


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    shape=st.tuples(st.integers(1, 40), st.integers(1, 40)),
    tile=st.tuples(st.integers(1, 17), st.integers(1, 17)),
    algorithm=st.sampled_from(["RICE_1", "GZIP_1", "GZIP_2", "PLIO_1"]),
    seed=st.integers(0, 2**16),
)
def test_any_tiling_reads_back(
    tmp_path_factory: pytest.TempPathFactory,
    shape: tuple[int, int],
    tile: tuple[int, int],
    algorithm: str,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2**10, size=shape).astype("i2")
    if seed % 3 == 0:
        values[:] = values.flat[0]  # constant tiles: equal lengths, equal bytes
    hdu = fits.CompImageHDU(values, compression_type=algorithm, tile_shape=tile)
    path = tmp_path_factory.mktemp("tiling") / "t.fits"
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    group = refzarr.scan(path)
    assert_raw_match(group, path)


@pytest.mark.parametrize(("scale", "smooth"), [(2, False), (3, True)])
def test_lossy_hcompress_as_astropy_decodes_it(tmp_path: Path, scale: int, smooth: bool) -> None:
    values = RNG.integers(0, 2**14, size=(32, 29)).astype("i4")
    hdu = fits.CompImageHDU(
        values,
        compression_type="HCOMPRESS_1",
        tile_shape=(16, 16),
        hcomp_scale=scale,
        hcomp_smooth=smooth,
    )
    path = tmp_path / "lossy.fits"
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    group = _roundtrip(path, tmp_path)
    codec = group["COMPRESSED_IMAGE"].meta.codecs[0]
    assert (codec["scale"], codec["smooth"]) == (scale, int(smooth))
