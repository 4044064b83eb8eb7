"""Every BITPIX with every BSCALE / BZERO / BLANK combination (the unsigned convention
included), uncompressed and tile-compressed: decoded through ``engine="refzarr"`` to astropy's
default values AND dtypes (float32 where astropy scales to float32), raw values exact through
refzarr and through fsspec + zarr on JSON and Parquet; scaled table columns as astropy
scales them from the recorded ``fits_fields``."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from astropy.io import fits
from fitskit import assert_decoded_match, assert_raw_match, assert_zarr_match

import refzarr
from refzarr.io import RangeReader
from refzarr.reader.array import ArrayReader

RNG = np.random.default_rng(16)

STORED = {8: ">u1", 16: ">i2", 32: ">i4", 64: ">i8", -32: ">f4", -64: ">f8"}
"""Each BITPIX and the dtype it stores."""

SIGN = object()
"""Stands for the unsigned convention's BZERO (2^(n-1), or -128 for bytes)."""

SCALINGS: list[tuple[Any, Any]] = [
    (None, None),  # no scaling cards
    (1, 0),  # written, and neutral
    (0.37, None),  # a scale not exact in float32
    (None, 12.5),
    (1, 12.5),
    (0.37, 12.5),
    (1, SIGN),  # the unsigned convention
    (0.37, SIGN),  # the sign bit's offset, but scaled: no longer unsigned
]
BLANKS = [None, 0, 7]


def _cases(bitpix: int) -> list[dict[str, Any]]:
    """The header cards of every combination FITS allows for ``bitpix``."""
    cases = []
    for (bscale, bzero), blank in itertools.product(SCALINGS, BLANKS):
        if bzero is SIGN:
            if bitpix < 0:
                continue
            bzero = -128 if bitpix == 8 else 2 ** (bitpix - 1)
            if bitpix == 8 and bscale == 1 and blank:
                continue  # astropy fails on it (NaN into int8)
        cards = {"BSCALE": bscale, "BZERO": bzero, "BLANK": blank}
        cases.append({k: v for k, v in cards.items() if v is not None})
    return cases


def _stored_values(stored: np.dtype[Any], shape: tuple[int, int]) -> np.ndarray[Any, Any]:
    """Values over the type's range, with 7 (a BLANK), 0, and the extremes."""
    dtype = stored.newbyteorder("=")
    if dtype.kind == "f":
        values = RNG.normal(scale=1e3, size=shape).astype(dtype)
        values.flat[:4] = [np.nan, -0.0, np.inf, 7.0]
        return values
    info = np.iinfo(dtype)
    values = RNG.integers(int(info.min), int(info.max), size=shape, endpoint=True, dtype=dtype)
    values.flat[:4] = [7, 0, info.min, info.max]
    values.flat[::5] = 7
    return values


def _hdu_bytes(cards: dict[str, Any], values: np.ndarray[Any, Any] | None, bitpix: int) -> bytes:
    """One HDU as FITS stores it: the header, then the big-endian data padded to 2880 bytes."""
    header = fits.Header()
    for key, value in cards.items():
        header[key] = value
    data = b"" if values is None else values.astype(STORED[bitpix]).tobytes()
    return header.tostring().encode("ascii") + data + b"\0" * (-len(data) % 2880)


def write_combinations(path: Path, bitpix: int, shape: tuple[int, int] = (9, 7)) -> list[str]:
    """A file with one image extension per combination of `_cases`; their EXTNAMEs."""
    primary = {"SIMPLE": True, "BITPIX": 8, "NAXIS": 0, "EXTEND": True}
    chunks, names = [_hdu_bytes(primary, None, 8)], []
    for k, scaling in enumerate(_cases(bitpix)):
        name = f"C{k}"
        cards = {"XTENSION": "IMAGE", "BITPIX": bitpix, "NAXIS": 2, "NAXIS1": shape[1]}
        cards |= {"NAXIS2": shape[0], "PCOUNT": 0, "GCOUNT": 1, "EXTNAME": name, **scaling}
        values = _stored_values(np.dtype(STORED[bitpix]), shape)
        chunks.append(_hdu_bytes(cards, values, bitpix))
        names.append(name)
    path.write_bytes(b"".join(chunks))
    return names


@pytest.fixture(scope="module", params=sorted(STORED), ids=[f"BITPIX{b}" for b in sorted(STORED)])
def combinations(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, refzarr.RefGroup, int]:
    bitpix: int = request.param
    path = tmp_path_factory.mktemp("scaling") / f"bitpix{bitpix}.fits"
    write_combinations(path, bitpix)
    return path, refzarr.scan(path), bitpix


def test_decoded_values_and_dtypes_as_astropy(
    combinations: tuple[Path, refzarr.RefGroup, int],
) -> None:
    path, group, _ = combinations
    assert_decoded_match(group, path)


def test_raw_values_through_refzarr(combinations: tuple[Path, refzarr.RefGroup, int]) -> None:
    path, group, _ = combinations
    assert_raw_match(group, path)


def test_through_written_json(
    combinations: tuple[Path, refzarr.RefGroup, int], tmp_path: Path
) -> None:
    """Raw values through fsspec + zarr; decoded ones through refzarr reading the JSON back
    (the attribute types survive JSON)."""
    path, group, _ = combinations
    out = tmp_path / "refs.json"
    refzarr.write(group, out)
    assert_zarr_match(out, group, path)
    assert_decoded_match(refzarr.read(out), path)


# fsspec reads Parquet reference sets with pandas' fastparquet engine, which pandas 3 deprecates
@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
@pytest.mark.parametrize("bitpix", [16, -64])  # Parquet is slow to write; the corpus: all
def test_through_written_parquet(tmp_path: Path, bitpix: int) -> None:
    path = tmp_path / "combinations.fits"
    write_combinations(path, bitpix)
    group = refzarr.scan(path)
    out = tmp_path / "refs.parq"
    refzarr.write(group, out)
    assert_zarr_match(out, group, path)
    assert_decoded_match(refzarr.read(out), path)


def test_float32_types_recorded(combinations: tuple[Path, refzarr.RefGroup, int]) -> None:
    _, group, bitpix = combinations
    for _, array in group.arrays():
        attrs = array.meta.attributes
        if "scale_factor" not in attrs:
            continue
        recorded = attrs.get("_nczarr_attr", {}).get("types", {})
        if bitpix in (8, 16, -32):
            assert recorded["scale_factor"] == "<f4"
            assert attrs["scale_factor"] == float(np.float32(attrs.get("BSCALE", 1)))
        else:
            assert not recorded


@pytest.mark.parametrize(("algorithm", "tile"), [("RICE_1", (4, 5)), ("GZIP_2", (3, 7))])
@pytest.mark.parametrize(
    "cards",
    [{"BSCALE": 0.37, "BZERO": 12.5, "BLANK": 7}, {"BLANK": 0}, {"BZERO": 12.5}],
    ids=["scaled-blank", "blank0", "offset"],
)
def test_tile_compressed_scaled(
    tmp_path: Path, algorithm: str, tile: tuple[int, int], cards: dict[str, Any]
) -> None:
    values = _stored_values(np.dtype("i2"), (11, 13))
    hdu = fits.CompImageHDU(values, compression_type=algorithm, tile_shape=tile, name="Z")
    path = tmp_path / "scaled_tiles.fits"
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    with fits.open(path, mode="update", do_not_scale_image_data=True) as hdul:
        for key, value in cards.items():
            hdul[1].header[key] = value
    with fits.open(path, do_not_scale_image_data=True) as hdul:
        np.testing.assert_array_equal(hdul[1].data, values)  # the tiles were not rewritten
        assert all(hdul[1].header[key] == value for key, value in cards.items())
    group = refzarr.scan(path)
    assert group["Z"].meta.chunks == tile
    assert "fits_decoded" not in group["Z"].meta.attributes
    assert_raw_match(group, path)
    assert_decoded_match(group, path)


def test_scaled_table_columns_from_fits_fields(tmp_path: Path) -> None:
    """astropy scales table columns to float64 (any TFORM) or, for the unsigned TZERO, to the
    unsigned type; the raw fields and ``fits_fields`` reproduce them exactly."""
    raw = {
        code: RNG.integers(-100, 100, 6).astype(dtype)
        for code, dtype in [
            ("B", "u1"),
            ("I", "i2"),
            ("J", "i4"),
            ("K", "i8"),
            ("E", "f4"),
            ("D", "f8"),
        ]
    }
    columns = [fits.Column(f"s{code}", code, array=v) for code, v in raw.items()]
    columns += [fits.Column(f"u{code}", code, array=raw[code]) for code in "IJ"]
    path = tmp_path / "scaled_table.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(columns, name="T")]).writeto(
        path
    )
    with fits.open(path, mode="update") as hdul:
        header = hdul[1].header
        for k, column in enumerate(columns, start=1):
            if column.name == "sK":  # astropy 8.0 fails on TZERO in a K column (bzero64)
                header[f"TSCAL{k}"] = 0.37
            elif column.name.startswith("s"):
                header[f"TSCAL{k}"], header[f"TZERO{k}"] = 0.37, 12.5
            else:
                header[f"TZERO{k}"] = 2 ** (8 * np.dtype(raw[column.name[1]].dtype).itemsize - 1)
    group = refzarr.scan(path)
    assert_raw_match(group, path)
    fields = group["T"].meta.attributes["fits_fields"]
    with fits.open(path) as hdul:
        want = hdul[1].data
        got = _read_rows(group)
        for name in want.columns.names:
            scaled = _apply_fits_field(got[name], fields[name])
            assert scaled.dtype == want[name].dtype, name
            np.testing.assert_array_equal(scaled, want[name], err_msg=name)


def _read_rows(group: refzarr.RefGroup) -> np.ndarray[Any, Any]:
    array = group["T"]
    assert isinstance(array, refzarr.RefArray)
    return ArrayReader(array, "T", RangeReader()).read()


def _apply_fits_field(values: np.ndarray[Any, Any], field: dict[str, Any]) -> np.ndarray[Any, Any]:
    """astropy's scaling of one table column from its ``fits_fields`` entry."""
    tscal, tzero = field.get("TSCAL", 1), field.get("TZERO", 0)
    bits = 8 * values.dtype.itemsize
    if tscal == 1 and values.dtype.kind == "i" and tzero == 2 ** (bits - 1):
        unsigned = np.dtype(f"u{values.dtype.itemsize}")
        return values.astype(unsigned) + unsigned.type(tzero)  # modulo 2^bits, as astropy
    out = values.astype("f8")
    if tscal != 1:
        out *= tscal
    if tzero != 0:
        out += tzero
    return out


def test_stacked_scaled_extensions_decode_as_astropy(tmp_path: Path) -> None:
    ccds = [_stored_values(np.dtype(">i2"), (5, 6)) for _ in range(3)]
    hdus = [fits.PrimaryHDU()]
    for k, values in enumerate(ccds, start=1):
        hdus.append(fits.ImageHDU(values, name="SCI", ver=k, do_not_scale_image_data=True))
    path = tmp_path / "mosaic.fits"
    fits.HDUList(hdus).writeto(path)
    with fits.open(path, mode="update", do_not_scale_image_data=True) as hdul:
        for hdu in hdul[1:]:
            hdu.header["BSCALE"], hdu.header["BZERO"], hdu.header["BLANK"] = 0.37, 12.5, 7
    group = refzarr.scan(path, stack_extensions=True)
    with fits.open(path) as hdul:
        want = np.stack([hdu.data for hdu in hdul[1:]])
    assert want.dtype == np.float32
    with refzarr.open_dataset(group) as ds:
        got = ds["SCI"].values
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
