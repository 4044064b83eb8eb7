"""Differential fuzz of the FITS scanner: random files written by astropy (images of every
BITPIX and scaling, tile-compressed images, binary and ASCII tables), scanned by refzarr and
read back through refzarr's reader and through fsspec + zarr on the JSON (and Parquet) it
writes, compared exactly with astropy's reading (fitskit)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from astropy.io import fits
from astropy.utils.exceptions import AstropyWarning
from fitskit import assert_decoded_match, assert_raw_match, assert_zarr_match
from hypothesis import assume, given
from hypothesis import strategies as st

import refzarr
from fuzzkit import fuzz_settings

DTYPES = ["u1", "i2", "i4", "i8", "f4", "f8"]
"""The stored type of every BITPIX (8, 16, 32, 64, -32, -64)."""

# fsspec reads Parquet reference sets with fastparquet by default, which pandas 3 deprecates
pytestmark = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")


# -- values -----------------------------------------------------------------------------------


def _values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], low: int = 0) -> Any:
    """Random values of ``dtype``: integers over the whole range (extremes included), floats
    with NaN, infinities and negative zero sprinkled in."""
    size = int(np.prod(shape))
    kind = np.dtype(dtype).kind
    if kind == "f":
        values = rng.normal(scale=1e3, size=size).astype(dtype)
        specials = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=dtype)
        picks = rng.random(size) < 0.1
        values[picks] = rng.choice(specials, size=int(picks.sum()))
        return values.reshape(shape)
    if kind == "b":
        return rng.random(size).reshape(shape) < 0.5
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), low, -(2**62)), min(int(info.max), 2**62)
    values = rng.integers(lo, hi, size=size, endpoint=True).astype(dtype)
    if size and low <= info.min:
        values[0] = info.min
    if size > 1:
        values[-1] = info.max
    return values.reshape(shape)


def _opened(path: Path) -> fits.HDUList:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AstropyWarning)
        return fits.open(path, memmap=False)


def _write(hdus: list[Any], path: Path) -> bool:
    """Write ``hdus``; False when astropy cannot (a combination its writer refuses)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # astropy's own casts while quantizing or scaling
        try:
            fits.HDUList(hdus).writeto(path)
        except (ValueError, TypeError, OverflowError, OSError):
            return False
    return True


def _check(path: Path, parquet: bool, **options: Any) -> refzarr.RefGroup:
    """Scan ``path``; every array reads back as astropy reads it through every reader."""
    group = refzarr.scan(path, **options)
    assert not group.skipped
    assert_raw_match(group, path)
    assert_decoded_match(group, path)
    out = path.with_suffix(".json")
    refzarr.write(group, out)
    assert_zarr_match(out, group, path)
    if parquet:
        parq = path.with_suffix(".parq")
        refzarr.write(group, parq)
        assert_zarr_match(parq, group, path)
    return group


# -- images -----------------------------------------------------------------------------------

SCALES = [1.0, 0.5, 2.0, 0.37, -1.5, 1e-3, 3.0e5, 1.0000001]
OFFSETS = [0.0, 1.0, -7.25, 32768.0, -128.0, 2147483648.0, 9.223372036854776e18, 1e5]


@st.composite
def scalings(draw: st.DrawFn, dtype: str) -> dict[str, Any]:
    """BSCALE / BZERO / BLANK cards for an image of ``dtype`` (none, the unsigned convention,
    or a random combination)."""
    kind = draw(st.sampled_from(["none", "unsigned", "random"]))
    if kind == "none":
        return {}
    bits = 8 * np.dtype(dtype).itemsize
    if kind == "unsigned":
        zero = -128 if dtype == "u1" else 2 ** (bits - 1)
        return {"BZERO": draw(st.sampled_from([zero, float(zero)])), "BSCALE": 1}
    cards: dict[str, Any] = {}
    if draw(st.booleans()):
        cards["BSCALE"] = draw(
            st.sampled_from(SCALES) | st.floats(-1e6, 1e6, allow_nan=False).filter(bool)
        )
    if draw(st.booleans()):
        cards["BZERO"] = draw(st.sampled_from(OFFSETS) | st.floats(-1e9, 1e9, allow_nan=False))
    if np.dtype(dtype).kind in "iu" and draw(st.booleans()):
        info = np.iinfo(dtype)
        cards["BLANK"] = draw(
            st.sampled_from([0, int(info.min), int(info.max)])
            | st.integers(int(info.min), int(info.max))
        )
    return cards


@st.composite
def images(draw: st.DrawFn) -> tuple[np.ndarray[Any, Any], dict[str, Any]]:
    """An image of any BITPIX, NAXIS 0-4 (zero-length axes included) and its scaling cards."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=1, max_size=4)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = _values(rng, dtype, shape)
    cards = draw(scalings(dtype))
    if "BLANK" in cards and values.size and draw(st.booleans()):
        values.flat[rng.integers(values.size)] = cards["BLANK"]  # some pixels blank
    return values, cards


def _set_cards(path: Path, cards: list[dict[str, Any]]) -> None:
    """Add scaling cards to each HDU's header, the data left as stored."""
    with fits.open(path, mode="update", do_not_scale_image_data=True, memmap=False) as hdul:
        for hdu, extra in zip(hdul, cards, strict=True):
            for key, value in extra.items():
                hdu.header[key] = value


def _astropy_reads(path: Path) -> bool:
    """Whether astropy scales every HDU without failing (it fails on a few combinations,
    docs/formats/fits.md: Known limits): then there is nothing to compare with."""
    try:
        with _opened(path) as hdul, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for hdu in hdul:
                data = hdu.data
                for column in getattr(data, "names", None) or ():
                    _ = data[column]  # astropy parses table fields when first asked
    except Exception:  # astropy's CfitsioException too: its HCOMPRESS_1 decoder refuses
        # some tiles its encoder wrote ("qtree_decode64: bad format code")
        return False
    return True


@fuzz_settings(ci_examples=8)
@given(
    primary=st.none() | images(),
    extensions=st.lists(images(), max_size=3),
    names=st.lists(st.sampled_from(["SCI", "ERR", ""]), min_size=3, max_size=3),
    chunk_bytes=st.sampled_from([16777216, 64, 7]),
    parquet=st.booleans(),
)
def test_images(
    tmp_path_factory: pytest.TempPathFactory,
    primary: tuple[np.ndarray[Any, Any], dict[str, Any]] | None,
    extensions: list[tuple[np.ndarray[Any, Any], dict[str, Any]]],
    names: list[str],
    chunk_bytes: int,
    parquet: bool,
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "images.fits"
    hdus: list[Any] = [fits.PrimaryHDU(None if primary is None else primary[0])]
    cards = [{} if primary is None else primary[1]]
    for (values, extra), name in zip(extensions, names, strict=False):
        hdus.append(fits.ImageHDU(values, name=name or None))
        cards.append(extra)
    assert _write(hdus, path)
    # a shifted image: astropy wrote its own BZERO; cards drawn for it replace those
    _set_cards(path, cards)
    assume(_astropy_reads(path))
    _check(path, parquet, chunk_bytes=chunk_bytes)


# -- tile-compressed images -------------------------------------------------------------------

ALGORITHMS = ["RICE_1", "GZIP_1", "GZIP_2", "PLIO_1", "HCOMPRESS_1", "NOCOMPRESS"]


@st.composite
def compressed(draw: st.DrawFn) -> fits.CompImageHDU:
    """A tile-compressed image: any algorithm, tile shape (edge tiles included), integer or
    float data (lossless or quantized, dithered or not)."""
    algorithm = draw(st.sampled_from(ALGORITHMS))
    if algorithm == "HCOMPRESS_1":  # 2-D, tiles (the edge tiles too) of 4 x 4 at least
        shape = tuple(draw(st.lists(st.integers(4, 24), min_size=2, max_size=2)))
        tile = tuple(
            draw(st.integers(4, n + 3).filter(lambda t, n=n: n % t == 0 or n % t >= 4))
            for n in shape
        )
    else:
        ndim = draw(st.integers(1, 3))
        shape = tuple(draw(st.lists(st.integers(1, 24), min_size=ndim, max_size=ndim)))
        tile = tuple(draw(st.integers(1, n + 3)) for n in shape)
    dtypes = ["u1", "i2", "i4"] if algorithm in ("PLIO_1", "HCOMPRESS_1") else DTYPES[:3]
    dtype = draw(st.sampled_from([*dtypes, "f4", "f8"] if algorithm != "PLIO_1" else dtypes))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = _values(rng, dtype, shape)
    if algorithm == "PLIO_1":
        # values below 2^12 only: astropy's PLIO_1 writer overruns its buffer (heap
        # corruption, an abort later) on tiles of changing values of 2^12 and more
        values = rng.integers(0, 2**12, size=shape).astype(dtype)
    if algorithm == "HCOMPRESS_1" and dtype != "u1":
        values = np.clip(values, -(2**30), 2**30).astype(dtype)  # HCOMPRESS sums pixels
    if draw(st.booleans()) and values.size:  # smooth or constant areas: equal tile bytes
        values[...] = values.flat[0] if dtype[0] != "f" or draw(st.booleans()) else 0
    options: dict[str, Any] = {"compression_type": algorithm, "tile_shape": tile}
    if dtype[0] == "f":
        values = np.where(np.isinf(values), 0, values).astype(dtype)
        lossless = draw(st.booleans())
        options["quantize_level"] = 0.0 if lossless else draw(st.sampled_from([16.0, 4.0, -0.5]))
        if not lossless:
            options["quantize_method"] = draw(st.sampled_from([-1, 1, 2]))
            options["dither_seed"] = draw(st.integers(1, 10000))
    if algorithm == "HCOMPRESS_1" and draw(st.booleans()):
        options["hcomp_scale"] = draw(st.integers(0, 3))
        options["hcomp_smooth"] = draw(st.booleans())
    name = draw(st.sampled_from([None, "TILED"]))
    return fits.CompImageHDU(values, name=name, **options)


@fuzz_settings(ci_examples=12)
@given(tiled=st.lists(compressed(), min_size=1, max_size=2), parquet=st.booleans())
def test_compressed_images(
    tmp_path_factory: pytest.TempPathFactory, tiled: list[fits.CompImageHDU], parquet: bool
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "tiled.fits"
    assume(_write([fits.PrimaryHDU(), *tiled], path))
    assume(_astropy_reads(path))
    _check(path, parquet, inline_decoded=2**20)


# -- binary tables ----------------------------------------------------------------------------

# code: (element dtype, kind of values)
BINARY_CODES = {
    "L": "?",
    "B": "u1",
    "I": "i2",
    "J": "i4",
    "K": "i8",
    "E": "f4",
    "D": "f8",
    "C": "c8",
    "M": "c16",
}


def _cells(rng: np.random.Generator, code: str, rows: int, repeat: int) -> Any:
    shape = (rows,) if repeat == 1 else (rows, repeat)
    if code in ("C", "M"):
        part = "f4" if code == "C" else "f8"
        values = np.empty(shape, dtype=BINARY_CODES[code])
        values.real, values.imag = _values(rng, part, shape), _values(rng, part, shape)
        return values
    return _values(rng, BINARY_CODES[code], shape)


@st.composite
def binary_columns(draw: st.DrawFn, rows: int) -> list[fits.Column]:
    """Columns of every binary format, with repeat counts, TDIM, scaling and TNULL; and
    variable-length P/Q columns."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    count = draw(st.integers(1, 5))
    columns = []
    for k in range(count):
        name = f"c{k}"
        kind = draw(st.sampled_from([*BINARY_CODES, "A", "X", "P", "Q"]))
        if kind == "A":
            width = draw(st.integers(1, 9))
            text = [bytes(rng.integers(32, 127, rng.integers(0, width + 1))) for _ in range(rows)]
            columns.append(fits.Column(name, f"{width}A", array=np.array(text, dtype=f"S{width}")))
            continue
        if kind == "X":
            bits = draw(st.integers(1, 20))
            values = rng.random((rows, bits)) < 0.5
            columns.append(fits.Column(name, f"{bits}X", array=values))
            continue
        if kind in ("P", "Q"):
            element = draw(st.sampled_from(["B", "I", "J", "K", "E", "D"]))
            cells = [
                _values(rng, BINARY_CODES[element], (int(rng.integers(0, 6)),)) for _ in range(rows)
            ]
            array = np.empty(rows, dtype=object)  # not np.array(cells): equal lengths stack
            array[:] = cells
            columns.append(fits.Column(name, f"{kind}{element}()", array=array))
            continue
        repeat = draw(st.sampled_from([1, 1, 2, 6]))
        dim = None
        if repeat == 6 and draw(st.booleans()):
            dim = draw(st.sampled_from(["(3,2)", "(2,3)", "(6)", "(1,2,3)"]))
        options: dict[str, Any] = {}
        if kind in "BIJK" and draw(st.booleans()):
            info = np.iinfo(BINARY_CODES[kind])
            options["null"] = draw(st.sampled_from([int(info.min), int(info.max), 0, 7]))
        if kind in "BIJKED" and draw(st.booleans()):
            options["bscale"] = draw(st.sampled_from([1, 0.5, 2.5, -3.0]))
            options["bzero"] = draw(st.sampled_from([0, 1.5, -100.0, 32768]))
        values = _cells(rng, kind, rows, repeat)
        if dim is not None:
            values = values.reshape((rows, *[int(n) for n in dim.strip("()").split(",")][::-1]))
        columns.append(fits.Column(name, f"{repeat}{kind}", array=values, dim=dim, **options))
    return columns


@fuzz_settings(ci_examples=12)
@given(
    rows=st.integers(0, 9),
    data=st.data(),
    chunk_bytes=st.sampled_from([16777216, 40, 1]),
    parquet=st.booleans(),
)
def test_binary_tables(
    tmp_path_factory: pytest.TempPathFactory,
    rows: int,
    data: st.DataObject,
    chunk_bytes: int,
    parquet: bool,
) -> None:
    columns = data.draw(binary_columns(rows))
    path = tmp_path_factory.mktemp("fuzz") / "table.fits"
    _check_table(fits.BinTableHDU, "CAT", columns, path, parquet, chunk_bytes)


def _check_table(
    kind: Any, name: str, columns: list[fits.Column], path: Path, parquet: bool, chunk_bytes: int
) -> None:
    """Write a table HDU of ``kind`` (binary or ASCII) and check it, when astropy both
    writes and reads it back (otherwise the example is rejected)."""
    try:
        table = kind.from_columns(columns, name=name)
    except (ValueError, TypeError) as error:  # astropy refuses the column
        assume(False)
        raise AssertionError from error
    assume(_write([fits.PrimaryHDU(), table], path))
    assume(_astropy_reads(path))
    _check(path, parquet, chunk_bytes=chunk_bytes)


# -- ASCII tables -----------------------------------------------------------------------------


@st.composite
def ascii_columns(draw: st.DrawFn, rows: int) -> list[fits.Column]:
    """Columns of every ASCII-table format (A, I, F, E, D), some with a TNULL."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    columns = []
    for k in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from("AIFED"))
        name = f"a{k}"
        if kind == "A":
            width = draw(st.integers(1, 8))
            text = [bytes(rng.integers(33, 127, rng.integers(0, width + 1))) for _ in range(rows)]
            columns.append(fits.Column(name, f"A{width}", array=np.array(text, dtype=f"S{width}")))
        elif kind == "I":
            width = draw(st.integers(2, 11))
            bound = 10 ** (width - 1) - 1
            values = rng.integers(-bound, bound, size=rows, endpoint=True)
            columns.append(fits.Column(name, f"I{width}", array=values))
        else:
            width = draw(st.integers(8, 25))
            # E8.0: astropy writes "1E-01." and cannot read it back
            decimals = draw(st.integers(0 if kind == "F" else 1, max(1, width - 8)))
            values = rng.normal(scale=10.0 ** draw(st.integers(-3, 3)), size=rows)
            if kind == "F":
                values = np.round(values, decimals)
                limit = 10.0 ** (width - decimals - 3)
                values = np.clip(values, -limit, limit)
            columns.append(fits.Column(name, f"{kind}{width}.{decimals}", array=values))
    return columns


@fuzz_settings(ci_examples=8)
@given(
    rows=st.integers(0, 9),
    data=st.data(),
    chunk_bytes=st.sampled_from([16777216, 40, 1]),
    parquet=st.booleans(),
)
def test_ascii_tables(
    tmp_path_factory: pytest.TempPathFactory,
    rows: int,
    data: st.DataObject,
    chunk_bytes: int,
    parquet: bool,
) -> None:
    columns = data.draw(ascii_columns(rows))
    path = tmp_path_factory.mktemp("fuzz") / "ascii.fits"
    _check_table(fits.TableHDU, "TXT", columns, path, parquet, chunk_bytes)


def test_name_and_extver_shared(tmp_path: Path) -> None:
    """Two HDUs of one name and EXTVER: the second gets ``_<index>`` even when the first has
    no data (the case the fuzz test found fitskit naming otherwise)."""
    path = tmp_path / "shared.fits"
    empty, image = np.zeros((0,), "u1"), np.arange(3, dtype="u1")
    assert _write(
        [fits.PrimaryHDU(), fits.ImageHDU(empty, name="SCI"), fits.ImageHDU(image, name="SCI")],
        path,
    )
    group = _check(path, parquet=False)
    assert [name for name, _ in group.arrays()] == ["SCI_1_2"]
