"""Differential fuzz of the Zarr scanner: random stores written by zarr-python 3 (v2 and v3:
dtypes in both byte orders, fill values, compressors and filters, transposes, sharding with
random inner chunks, F order, "/" separators, chunks never written, nested groups,
consolidated metadata or not) read back through the references exactly as zarr-python reads
the store: through fsspec + zarr on JSON (and Parquet on some), refzarr's `ReferenceStore`
and refzarr's xarray reader.

``REFZARR_FUZZ_EXAMPLES=500 pytest tests/scan/zarr/test_zarr_fuzz.py`` explores more.
"""

from __future__ import annotations

import math
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import zarr
from hypothesis import given, reject
from hypothesis import strategies as st
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)
from zarrkit import assert_same, readback, roundtrip, store_arrays

import refzarr
from fuzzkit import fuzz_settings
from refzarr.errors import UnsupportedFeatureError
from refzarr.scan.zarr import ZarrScanner

pytestmark = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")

NUMERIC = ["bool", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16"]
BIG = [">i2", ">u4", ">i8", ">f4", ">f8", ">c16"]
OTHER_V2 = ["S3", "<U4", ">U2", "M8[s]", "<m8[ms]"]
OTHER_V3 = ["M8[s]", "m8[ms]", "str"]

DOCUMENTED = ("sharded variable-length strings", "not supported")


@dataclass
class ArraySpec:
    """One array: how it is created, and which region is written."""

    name: str
    kwargs: dict[str, Any]
    region: tuple[slice, ...] | None
    seed: int


def _shape_and_chunks(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ndim = draw(st.integers(0, 3))
    shape = tuple(draw(st.integers(0 if ndim else 1, 9)) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, max(n, 1) + 2)) for n in shape)
    return shape, chunks


def _fill(draw: st.DrawFn, dtype: str) -> Any:
    choice = draw(st.integers(0, 3))
    if choice == 0 and dtype != "str":
        return None
    if dtype == "str":
        return draw(st.sampled_from(["", "x", "fill"]))
    kind = np.dtype(dtype).kind
    if kind == "b":
        return draw(st.booleans())
    if kind == "f" and choice == 1:
        return draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    if kind in "fc":
        return draw(st.sampled_from([0.0, -1.5, 7.25]))
    if kind in "iu":
        return draw(st.sampled_from([0, 1, 5, 100]))
    if kind in "SU":
        return None if choice == 0 else ("ab" if kind == "U" else b"ab")
    return None


def _v3_compressor(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["blosc", "zstd", "gzip", "crc32c"]))
    if kind == "blosc":
        return BloscCodec(
            cname=draw(st.sampled_from(["lz4", "zstd", "zlib", "blosclz"])),
            clevel=draw(st.integers(0, 9)),
            shuffle=draw(st.sampled_from(["noshuffle", "shuffle", "bitshuffle"])),
            typesize=draw(st.sampled_from([1, 2, 4, 8])),
        )
    if kind == "zstd":
        return ZstdCodec(level=draw(st.integers(-3, 10)), checksum=draw(st.booleans()))
    if kind == "gzip":
        return GzipCodec(level=draw(st.integers(0, 9)))
    return Crc32cCodec()


def _v3_compressors(draw: st.DrawFn) -> list[Any]:
    return [_v3_compressor(draw) for _ in range(draw(st.integers(0, 2)))]


def _v2_compressor(draw: st.DrawFn) -> Any:
    return draw(
        st.sampled_from(
            [
                None,
                numcodecs.Blosc(
                    cname=draw(st.sampled_from(["lz4", "zstd", "zlib"])),
                    clevel=draw(st.integers(0, 9)),
                    shuffle=draw(st.sampled_from([0, 1, 2, -1])),
                ),
                numcodecs.Zstd(level=draw(st.integers(1, 5))),
                numcodecs.GZip(level=draw(st.integers(0, 9))),
                numcodecs.Zlib(level=draw(st.integers(0, 9))),
                numcodecs.BZ2(level=draw(st.integers(1, 9))),
                numcodecs.LZ4(),
            ]
        )
    )


@st.composite
def arrays(draw: st.DrawFn, fmt: int, name: str) -> ArraySpec:
    shape, chunks = _shape_and_chunks(draw)
    dtype = draw(st.sampled_from(NUMERIC + BIG + (OTHER_V2 if fmt == 2 else OTHER_V3)))
    kwargs: dict[str, Any] = {"shape": shape, "chunks": chunks, "dtype": dtype}
    kwargs["fill_value"] = _fill(draw, dtype)
    if fmt == 2:
        kwargs["compressors"] = _v2_compressor(draw)
        kwargs["order"] = draw(st.sampled_from(["C", "F"]))
        kwargs["chunk_key_encoding"] = {
            "name": "v2",
            "separator": draw(st.sampled_from([".", "/"])),
        }
        if np.dtype(dtype).kind in "iuf" and draw(st.integers(0, 3)) == 0:
            kwargs["filters"] = [numcodecs.Delta(dtype=np.dtype(dtype).str)]
    else:
        _v3_codecs(draw, kwargs, dtype, shape, chunks)
    dims = [f"{name}_{k}" for k in range(len(shape))]  # a group's arrays share no dimension
    if draw(st.integers(0, 4)) == 0:
        pass  # no dimension names: not for xarray
    elif fmt == 2:
        kwargs["attributes"] = {"_ARRAY_DIMENSIONS": dims}
    else:
        kwargs["dimension_names"] = dims
    region = None
    if draw(st.integers(0, 4)):
        region = tuple(
            slice(a, a + draw(st.integers(0, n - a)))
            for n in shape
            for a in [draw(st.integers(0, n))]
        )
    return ArraySpec(name, kwargs, region, draw(st.integers(0, 2**16)))


def _v3_codecs(
    draw: st.DrawFn,
    kwargs: dict[str, Any],
    dtype: str,
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
) -> None:
    is_str = dtype == "str"
    filters = []
    if len(shape) > 1 and not is_str and draw(st.booleans()):
        filters.append(TransposeCodec(order=tuple(draw(st.permutations(range(len(shape)))))))
    endian = draw(st.sampled_from(["little", "big"]))
    kwargs["filters"] = filters or None
    kwargs["compressors"] = _v3_compressors(draw) or None
    if shape and not is_str and draw(st.integers(0, 2)) == 0:
        inner_chunks = tuple(draw(st.integers(1, c)) for c in chunks)
        shard = tuple(c * draw(st.integers(1, 3)) for c in inner_chunks)
        if filters:
            # sharding sees the transposed shard, zarr-python checks the inner chunks against
            # the untransposed one (and then cannot write the array): they must divide both
            seen = [shard[k] for k in filters[0].order]
            common = [math.gcd(a, b) for a, b in zip(shard, seen, strict=True)]
            inner_chunks = tuple(
                draw(st.sampled_from([d for d in range(1, g + 1) if g % d == 0])) for g in common
            )
        inner: list[Any] = []
        if len(shape) > 1 and draw(st.booleans()):
            inner.append(TransposeCodec(order=tuple(draw(st.permutations(range(len(shape)))))))
        inner.append(BytesCodec(endian=endian))
        inner += _v3_compressors(draw)
        kwargs["chunks"] = shard
        kwargs["serializer"] = ShardingCodec(
            chunk_shape=inner_chunks,
            codecs=inner,
            index_location=draw(st.sampled_from(["start", "end"])),
        )
    elif not is_str and np.dtype(dtype).itemsize > 1:
        kwargs["serializer"] = BytesCodec(endian=endian)


@st.composite
def stores(draw: st.DrawFn) -> tuple[int, bool, dict[str, list[ArraySpec]]]:
    """A store: format, consolidated or not, arrays by group path (``""`` the root)."""
    fmt = draw(st.sampled_from([2, 3]))
    groups = draw(st.sampled_from([[""], ["", "g"], ["", "g", "g/h"], ["", "a", "b/c"]]))
    found: dict[str, list[ArraySpec]] = {}
    for path in groups:
        names = draw(
            st.lists(st.sampled_from(["x", "y", "v", "d1", "w.z"]), max_size=3, unique=True)
        )
        found[path] = [draw(arrays(fmt, name)) for name in names]
    return fmt, draw(st.booleans()), found


def _data(spec: ArraySpec, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(spec.seed)
    dtype = spec.kwargs["dtype"]
    if dtype == "str":
        words = np.array(["", "a", "ünï", "xyz" * 5, "fill"], dtype=object)
        return words[rng.integers(0, len(words), shape)]
    np_dtype = np.dtype(dtype)
    raw = rng.normal(0, 1000, shape)
    if np_dtype.kind == "b":
        return raw > 0
    if np_dtype.kind in "Mm":
        return raw.astype("i8").astype(np_dtype)
    if np_dtype.kind == "S":
        return raw.astype("i8").astype(str).astype(np_dtype)
    if np_dtype.kind == "U":
        return raw.astype("i8").astype(str).astype(np_dtype)
    if np_dtype.kind in "iu":
        info = np.iinfo(np_dtype)
        return (np.abs(raw).astype("i8") % min(int(info.max), 2**40)).astype(np_dtype)
    out = (
        raw.astype(np_dtype)
        if np_dtype.kind == "f"
        else (raw + 1j * np.sqrt(np.abs(raw))).astype(np_dtype)
    )
    if np_dtype.kind == "f" and out.size > 2:
        out.flat[1] = np.nan
    return out


def write_store(
    path: Path, fmt: int, consolidated: bool, found: dict[str, list[ArraySpec]]
) -> None:
    """Write the store with zarr-python; reject what zarr-python refuses to write."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unstable specs (v3 strings, consolidated metadata)
        try:
            root = zarr.open_group(path, mode="w", zarr_format=fmt)
            for group_path, specs in found.items():
                group = root.require_group(group_path) if group_path else root
                for spec in specs:
                    array = group.create_array(spec.name, **spec.kwargs)
                    if spec.region is not None:
                        shape = tuple(s.stop - s.start for s in spec.region)
                        array[spec.region] = _data(spec, shape)
            if consolidated:
                zarr.consolidate_metadata(path, zarr_format=fmt)
        except (ValueError, TypeError, NotImplementedError) as exc:
            log = os.environ.get("REFZARR_FUZZ_REJECTS")
            if log:
                with open(log, "a", encoding="utf-8") as f:
                    f.write(f"{type(exc).__name__}: {str(exc)[:200]}\n")
            reject()


def _scan(path: Path) -> Any:
    try:
        return ZarrScanner()(str(path))
    except UnsupportedFeatureError as exc:
        if "sharded variable-length strings" in str(exc):
            return None
        raise


@fuzz_settings(ci_examples=12)
@given(stores(), st.booleans())
def test_random_zarr_stores_read_back(
    case: tuple[int, bool, dict[str, list[ArraySpec]]], parquet: bool
) -> None:
    fmt, consolidated, found = case
    with tempfile.TemporaryDirectory(prefix="refzarr-zarrfuzz-") as folder:
        path = Path(folder) / "fuzz.zarr"
        write_store(path, fmt, consolidated, found)
        group = _scan(path)
        if group is None:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = store_arrays(str(path))
        assert sorted(p for p, _ in group.arrays()) == sorted(expected)
        back = readback(group, Path(folder))
        for how in ("json", "store") + (("parquet",) if parquet else ()):
            for array_path, values in expected.items():
                assert_same(back.read(how, array_path), values, f"{how} {array_path}")
        assert_reader_matches(group, expected)


def assert_reader_matches(group: Any, expected: dict[str, np.ndarray]) -> None:
    """refzarr's xarray reader (undecoded) gives zarr-python's numeric values (in native
    byte order, as xarray hands them out)."""
    named = all(array.meta.dimension_names is not None for _, array in group.arrays())
    if not named:
        return
    datasets = refzarr.open_groups(group, mask_and_scale=False, decode_times=False)
    for path, values in expected.items():
        if values.dtype.kind not in "biufcMm":
            continue
        folder, _, name = path.rpartition("/")
        got = datasets[f"/{folder}"][name].values
        assert got.shape == values.shape, path
        assert got.dtype.newbyteorder("=") == values.dtype.newbyteorder("="), path
        np.testing.assert_array_equal(got, values, err_msg=path)  # NaN, NaT equal


# -- regressions found by the fuzz above ------------------------------------------------------


def test_sharded_after_reversing_transpose(tmp_path: Path) -> None:
    """A transpose reversing the axes (Zarr v2's F order) before sharding: the sharding codec
    sees the transposed shard; the references decoded shards of the untransposed shape and
    read wrong values in silence."""
    array = zarr.create_array(
        tmp_path / "s.zarr",
        shape=(3, 5),
        chunks=(2, 4),
        dtype="i2",
        filters=[TransposeCodec(order=(1, 0))],
        serializer=ShardingCodec(chunk_shape=(2, 1)),
        compressors=None,
    )
    array[:, :3] = np.arange(9, dtype="i2").reshape(3, 3) + 1
    roundtrip(tmp_path / "s.zarr", tmp_path)


def test_compressed_shards_smaller_than_their_index(tmp_path: Path) -> None:
    """Compressors after sharding can make a shard smaller than its index: the scan took
    such a shard for a damaged one (ScanError)."""
    array = zarr.create_array(
        tmp_path / "s.zarr",
        shape=(4, 4),
        chunks=(4, 4),
        dtype="bool",
        serializer=ShardingCodec(chunk_shape=(1, 1)),
        compressors=[ZstdCodec(level=3)],
    )
    array[:] = True
    assert (tmp_path / "s.zarr/c/0/0").stat().st_size < 16 * 16 + 4
    roundtrip(tmp_path / "s.zarr", tmp_path)


@pytest.mark.parametrize("dtype", ["M8[s]", "m8[ms]"])
def test_big_endian_datetimes(dtype: str, tmp_path: Path) -> None:
    """Datetimes stored big-endian: numcodecs' ``astype`` decodes them to a datetime array,
    which refzarr's reader took through the buffer protocol (ValueError)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # datetimes are not in the v3 spec yet
        array = zarr.create_array(
            tmp_path / "s.zarr",
            shape=(3,),
            chunks=(2,),
            dtype=dtype,
            serializer=BytesCodec(endian="big"),
        )
        array[:] = np.array([1, -5, 7]).astype(dtype)
    roundtrip(tmp_path / "s.zarr", tmp_path)


@pytest.mark.parametrize("dtype", ["M8[s]", "m8[ms]"])
def test_unwritten_datetimes_without_fill_value(dtype: str, tmp_path: Path) -> None:
    """A Zarr v2 datetime array with ``fill_value: null`` reads NaT where no chunk was written
    (zarr-python, also through the references); refzarr's reader gave the epoch (zeros)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        array = zarr.create_array(
            tmp_path / "s.zarr",
            shape=(3,),
            chunks=(2,),
            dtype=dtype,
            fill_value=None,
            zarr_format=2,
            attributes={"_ARRAY_DIMENSIONS": ["t"]},
        )
        array[:2] = np.array([1, 2]).astype(dtype)
    group = roundtrip(tmp_path / "s.zarr", tmp_path)
    got = refzarr.open_dataset(group, mask_and_scale=False, decode_times=False)["s"].values
    np.testing.assert_array_equal(got, zarr.open_array(tmp_path / "s.zarr")[...], strict=True)
