"""HDF5 filters beyond deflate/shuffle/Blosc: each dataset read through fsspec + zarr equals h5py.

Files are written with h5py (and hdf5plugin for the plugin filters), scanned, written as kerchunk
JSON and read back through fsspec ReferenceFileSystem + zarr-python 3 (``scan/hdf5/h5kit.py``).
The N-bit and scale-offset codecs are refzarr's own; their `encode` is checked against the bytes
HDF5 itself stored.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import h5py
import hdf5plugin
import numcodecs
import numpy as np
import pytest
from h5py import h5d, h5p, h5s, h5t

import refzarr
from corpus import CORPUS
from refzarr import UnsupportedFeatureError
from refzarr.codecs.hdf5.filters import Hdf5Filter, filter_to_codec
from scan.hdf5.h5kit import array, roundtrip, write_h5

DTYPES = ["i1", "u1", "<i2", ">u2", "<i4", ">i4", "<u8", ">i8", "<f4", ">f8"]


def _values(dtype: str, shape: tuple[int, ...] = (37, 11)) -> np.ndarray:
    rng = np.random.default_rng(7)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dt)
    info = np.iinfo(dt)
    native = dt.newbyteorder("=")
    return rng.integers(info.min, info.max, size=shape, dtype=native, endpoint=True).astype(dt)


def _raw_chunk(ds: h5py.Dataset, index: int = 0) -> bytes:
    info = ds.id.get_chunk_info(index)
    with open(ds.file.filename, "rb") as fh:
        fh.seek(info.byte_offset)
        return fh.read(info.size)


def _codec(path: Path, name: str, position: int = 0) -> dict[str, Any]:
    codecs = array(refzarr.scan(str(path)), name).meta.codecs
    return dict(codecs[position])


# -- compressors from imagecodecs and numcodecs ----------------------------------------------------

COMPRESSORS: dict[str, dict[str, Any]] = {
    "lzf": {"compression": "lzf"},
    "szip": {"compression": "szip"},
    "szip_nn": {"compression": "szip", "compression_opts": ("nn", 16)},
    "bzip2": dict(hdf5plugin.BZip2()),
    "lz4": dict(hdf5plugin.LZ4()),
    "lz4_small_blocks": dict(hdf5plugin.LZ4(nbytes=64)),
    "bitshuffle": dict(hdf5plugin.Bitshuffle(cname="none")),
    "bitshuffle_lz4": dict(hdf5plugin.Bitshuffle(cname="lz4")),
    "bitshuffle_zstd": dict(hdf5plugin.Bitshuffle(cname="zstd", clevel=5)),
    "bitshuffle_lz4_blocks": dict(hdf5plugin.Bitshuffle(nelems=16, cname="lz4")),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(COMPRESSORS))
def test_compressed_dataset_reads_as_h5py(tmp_path: Path, name: str, dtype: str) -> None:
    def writer(f: h5py.File) -> None:
        data = _values(dtype)
        f.create_dataset("v", data=data, chunks=(16, 5), **COMPRESSORS[name])  # edge chunks
        f.create_dataset(
            "big", data=np.resize(data, (150, 40)), chunks=(150, 40), **COMPRESSORS[name]
        )  # several bitshuffle / LZ4 blocks

    roundtrip(write_h5(tmp_path / f"{name}.h5", writer), tmp_path)


def test_codec_ids_and_configs(tmp_path: Path) -> None:
    path = write_h5(
        tmp_path / "c.h5",
        lambda f: [
            f.create_dataset(n, (40,), "i4", chunks=(20,), **kw) for n, kw in COMPRESSORS.items()
        ],
    )
    assert _codec(path, "lzf") == {"id": "refzarr_hdf5_lzf", "size": 80}
    szip = _codec(path, "szip")
    assert szip["id"] == "imagecodecs_szip"
    assert szip["header"] is True
    assert _codec(path, "bzip2") == {"id": "bz2", "level": 9}
    assert _codec(path, "lz4")["id"] == "imagecodecs_lz4h5"
    bitshuffle = {"id": "refzarr_hdf5_bitshuffle", "elementsize": 4, "compression": "none"}
    assert _codec(path, "bitshuffle") == {**bitshuffle, "blocksize": 0, "level": 3}
    assert _codec(path, "bitshuffle_zstd") == {
        "id": "refzarr_hdf5_bitshuffle",
        "elementsize": 4,
        "compression": "zstd",
        "blocksize": 0,
        "level": 5,
    }


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
@pytest.mark.parametrize("count", [1, 5, 8, 2049, 6000])
def test_bitshuffle_encode_matches_hdf5(tmp_path: Path, compression: str, count: int) -> None:
    data = np.arange(count, dtype="<i4") * 7
    options = hdf5plugin.Bitshuffle(cname=compression)
    path = write_h5(
        tmp_path / "b.h5", lambda f: f.create_dataset("v", data=data, chunks=(count,), **options)
    )
    codec = numcodecs.get_codec(_codec(path, "v"))
    encoded = codec.encode(data.tobytes())
    assert np.array_equal(np.frombuffer(codec.decode(encoded), "<i4"), data)
    if compression != "zstd":  # zstd output may differ between library versions
        with h5py.File(path) as f:
            assert encoded == _raw_chunk(f["v"])


# -- Blosc2 frames, plain and b2nd -----------------------------------------------------------------


def _blosc2(f: h5py.File) -> None:
    data = np.arange(37 * 23 * 5, dtype="<f8").reshape(37, 23, 5) / 7
    for name, options in {
        "lz4": hdf5plugin.Blosc2(cname="lz4", filters=hdf5plugin.Blosc2.SHUFFLE),
        "zstd_bitshuffle": hdf5plugin.Blosc2(cname="zstd", filters=hdf5plugin.Blosc2.BITSHUFFLE),
    }.items():
        f.create_dataset(f"{name}_1d", data=data.reshape(-1)[:3000], chunks=(700,), **options)
        f.create_dataset(f"{name}_3d", data=data, chunks=(20, 17, 5), **options)  # edge chunks
        f.create_dataset(
            f"{name}_2d_i2", data=(data[:, :, 0] * 50).astype(">i2"), chunks=(37, 23), **options
        )
    zeros = f.create_dataset(
        "zeros", shape=(30, 30), dtype="f4", chunks=(15, 15), **hdf5plugin.Blosc2()
    )
    zeros[:15, :15] = 0  # a chunk of zeros: a frame without chunk data
    zeros[15:, 15:] = 2.5
    f.create_dataset(
        "fletcher", data=data[0], chunks=(23, 5), fletcher32=True, **hdf5plugin.Blosc2()
    )


def test_blosc2_reads_as_h5py(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "b2.h5", _blosc2), tmp_path)
    assert array(group, "lz4_3d").meta.codecs[0] == {"id": "refzarr_hdf5_blosc2", "typesize": 8}


# -- scale-offset (refzarr's codec) ----------------------------------------------------------------


def _scaleoffset_writer(dtype: str, factor: int, fill: Any) -> Any:
    def writer(f: h5py.File) -> None:
        dt = np.dtype(dtype)
        if dt.kind == "f":
            data = np.linspace(-50, 70, 37 * 11).reshape(37, 11).astype(dt)
        else:
            info = np.iinfo(dt)
            low = max(info.min, -3000)
            data = (np.arange(37 * 11).reshape(37, 11) * 7 % 900 + low).astype(dt)
        kw = {} if fill is None else {"fillvalue": fill}
        ds = f.create_dataset(
            "v", shape=(40, 11), dtype=dt, chunks=(16, 5), scaleoffset=factor, **kw
        )
        ds[:37] = data  # rows 37.. stay fill value: inside the last row of chunks
        f.create_dataset("constant", data=np.full(20, 5, dt), chunks=(8,), scaleoffset=factor)
        f.create_dataset(
            "full",
            data=np.array([0, np.iinfo(dt).max], dt) if dt.kind != "f" else np.array([0, 1e30], dt),
            chunks=(2,),
            scaleoffset=factor,
        )

    return writer


@pytest.mark.parametrize("fill", [None, 9])
@pytest.mark.parametrize("dtype", DTYPES)
def test_scaleoffset_reads_as_h5py(tmp_path: Path, dtype: str, fill: Any) -> None:
    factor = 2 if np.dtype(dtype).kind == "f" else 0  # floats: D-scaling; integers: auto minbits
    path = write_h5(tmp_path / "s.h5", _scaleoffset_writer(dtype, factor, fill))
    group = roundtrip(path, tmp_path)
    assert array(group, "v").meta.codecs[0]["id"] == "refzarr_hdf5_scaleoffset"


@pytest.mark.parametrize("fill", [None, 9])
@pytest.mark.parametrize("dtype", ["u1", ">i2", "<u4", ">i8"])
def test_scaleoffset_fixed_minbits(tmp_path: Path, dtype: str, fill: Any) -> None:
    roundtrip(write_h5(tmp_path / "s.h5", _scaleoffset_writer(dtype, 5, fill)), tmp_path)


@pytest.mark.parametrize("fill", [None, 9])
@pytest.mark.parametrize("dtype", ["u1", "i1", ">u2", "<i4", ">i8", "<u8"])
def test_scaleoffset_encode_matches_hdf5(tmp_path: Path, dtype: str, fill: Any) -> None:
    path = write_h5(tmp_path / "s.h5", _scaleoffset_writer(dtype, 0, fill))
    codec = numcodecs.get_codec(_codec(path, "v"))
    with h5py.File(path) as f:
        ds = f["v"]
        for index in range(ds.id.get_num_chunks()):
            info = ds.id.get_chunk_info(index)
            rows, cols = (
                slice(o, o + c) for o, c in zip(info.chunk_offset, ds.chunks, strict=True)
            )
            chunk = np.full(ds.chunks, ds.fillvalue, ds.dtype)
            part = ds[rows, cols]
            chunk[: part.shape[0], : part.shape[1]] = part
            assert codec.encode(chunk.tobytes()) == _raw_chunk(ds, index)


def test_scaleoffset_full_precision_integers_need_no_codec(tmp_path: Path) -> None:
    path = write_h5(
        tmp_path / "s.h5",
        lambda f: f.create_dataset("v", data=np.arange(9, dtype="i2"), chunks=(4,), scaleoffset=16),
    )
    assert array(roundtrip(path, tmp_path), "v").meta.codecs == ()


# -- N-bit and integers with padding bits ----------------------------------------------------------

_INT_TYPES = {
    "i1": h5t.STD_I8LE,
    "u1": h5t.STD_U8LE,
    "<i2": h5t.STD_I16LE,
    ">u2": h5t.STD_U16BE,
    ">i4": h5t.STD_I32BE,
    "<u4": h5t.STD_U32LE,
    "<i8": h5t.STD_I64LE,
    ">u8": h5t.STD_U64BE,
}


def _layouts(size: int) -> list[tuple[int, int]]:
    """(precision, offset) pairs HDF5 accepts: the value must reach into the last byte."""
    bits = 8 * size
    return [(bits - 1, 0), (bits - 3, 2), (bits - 7, 7), (1, bits - 1)] + (
        [(bits // 2 + 1, bits // 2 - 1)] if size > 1 else [(5, 3)]
    )


def _padded_writer(dtype: str, precision: int, offset: int, nbit: bool, **filters: Any) -> Any:
    def writer(f: h5py.File) -> None:
        tid = _INT_TYPES[dtype].copy()
        tid.set_precision(precision)
        tid.set_offset(offset)
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_chunk((16, 5))
        if nbit:
            dcpl.set_filter(5, 0)  # H5Pset_nbit; h5py has no wrapper
        if filters.get("gzip"):
            dcpl.set_deflate(4)
        h5d.create(f.id, b"v", tid, h5s.create_simple((37, 11)), dcpl=dcpl)
        ds = f["v"]
        signed = ds.dtype.kind == "i"
        low, high = (
            (-(1 << precision - 1), (1 << precision - 1) - 1)
            if signed
            else (0, (1 << precision) - 1)
        )
        rng = np.random.default_rng(precision + offset)
        values = rng.integers(
            low, high, size=ds.shape, endpoint=True, dtype="i8" if signed else "u8"
        )
        values[0, :2] = low, high
        ds[...] = values.astype(ds.dtype)
        assert np.array_equal(ds[...], values.astype(ds.dtype))  # what h5py reads: the values

    return writer


@pytest.mark.parametrize("nbit", [True, False], ids=["nbit", "stored"])
@pytest.mark.parametrize("dtype", list(_INT_TYPES))
def test_padded_integers_read_as_h5py(tmp_path: Path, dtype: str, nbit: bool) -> None:
    for precision, offset in _layouts(np.dtype(dtype).itemsize):
        path = write_h5(
            tmp_path / f"n{precision}_{offset}.h5", _padded_writer(dtype, precision, offset, nbit)
        )
        codec = array(roundtrip(path, tmp_path), "v").meta.codecs[0]
        assert codec["id"] == "refzarr_hdf5_nbit"
        assert codec["packed"] is nbit


def test_padded_integers_with_deflate(tmp_path: Path) -> None:
    for nbit in (True, False):
        path = write_h5(tmp_path / f"g{nbit}.h5", _padded_writer(">i4", 20, 5, nbit, gzip=True))
        codecs = array(roundtrip(path, tmp_path), "v").meta.codecs
        assert [c["id"] for c in codecs] == ["refzarr_hdf5_nbit", "zlib"]


@pytest.mark.parametrize("dtype", ["u1", "<i2", ">i4", ">u8"])
def test_nbit_encode_matches_hdf5(tmp_path: Path, dtype: str) -> None:
    size = np.dtype(dtype).itemsize
    precision, offset = 8 * size - 3, 2
    path = write_h5(tmp_path / "n.h5", _padded_writer(dtype, precision, offset, True))
    codec = numcodecs.get_codec(_codec(path, "v"))
    with h5py.File(path) as f:
        ds = f["v"]
        chunk = ds[:16, :5]
        assert codec.encode(chunk.tobytes()) == _raw_chunk(ds, 0)


def test_nbit_on_full_precision_types_is_a_no_op(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_chunk((4,))
        dcpl.set_filter(5, 0)
        h5d.create(f.id, b"v", h5t.IEEE_F64BE, h5s.create_simple((10,)), dcpl=dcpl)
        f["v"][...] = np.linspace(0, 1, 10)

    assert array(roundtrip(write_h5(tmp_path / "n.h5", writer), tmp_path), "v").meta.codecs == ()


def test_padded_integer_in_compound_is_unsupported(tmp_path: Path) -> None:
    def writer(f: h5py.File) -> None:
        member = h5t.STD_I16LE.copy()
        member.set_precision(12)
        tid = h5t.create(h5t.COMPOUND, 4)
        tid.insert(b"a", 0, member)
        tid.insert(b"b", 2, h5t.STD_I16LE)
        h5d.create(f.id, b"v", tid, h5s.create_simple((3,)))

    path = write_h5(tmp_path / "c.h5", writer)
    with pytest.raises(UnsupportedFeatureError, match=r"c\.h5: dataset '/v'.*padding bits"):
        refzarr.scan(str(path))


# -- registration, missing imagecodecs, unknown filters --------------------------------------------

_CONFIGS = [
    {"id": "refzarr_hdf5_lzf", "size": 80},
    {
        "id": "refzarr_hdf5_nbit",
        "dtype": ">i2",
        "precision": 12,
        "offset": 2,
        "count": 8,
        "packed": True,
    },
    {
        "id": "refzarr_hdf5_scaleoffset",
        "dtype": "<u4",
        "count": 8,
        "scale_type": 2,
        "scale_factor": 0,
        "fill": None,
    },
    {
        "id": "refzarr_hdf5_bitshuffle",
        "elementsize": 4,
        "compression": "lz4",
        "blocksize": 0,
        "level": 3,
    },
    {
        "id": "imagecodecs_szip",
        "options_mask": 141,
        "pixels_per_block": 32,
        "bits_per_pixel": 32,
        "pixels_per_scanline": 8,
        "header": True,
    },
    {"id": "imagecodecs_lz4h5", "level": None, "blocksize": None},
    {"id": "imagecodecs_lzf", "header": False},
    {"id": "bz2", "level": 9},
]


def test_a_reader_that_never_imports_refzarr_finds_every_codec() -> None:
    script = (
        "import json, sys, numcodecs\n"
        "for config in json.loads(sys.argv[1]):\n"
        "    codec = numcodecs.get_codec(dict(config))\n"
        "    assert codec.codec_id == config['id'], codec\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(_CONFIGS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("config", _CONFIGS[:4], ids=lambda c: c["id"])
def test_configs_survive_get_codec(config: dict[str, Any]) -> None:
    assert numcodecs.get_codec(dict(config)).get_config() == config


@pytest.mark.parametrize(
    ("stage", "name"),
    [
        (Hdf5Filter(32000, "lzf", (4, 261, 80)), "LZF"),
        (Hdf5Filter(4, "szip", (141, 32, 32, 8)), "szip"),
        (Hdf5Filter(32004, "lz4", (0,)), "LZ4"),
        (Hdf5Filter(32008, "bitshuffle", (0, 4, 4, 0, 2)), "bitshuffle"),
    ],
)
def test_missing_imagecodecs_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, stage: Hdf5Filter, name: str
) -> None:
    monkeypatch.setitem(sys.modules, "imagecodecs", None)  # what an uninstalled package does
    with pytest.raises(
        UnsupportedFeatureError, match=rf"f\.h5: dataset 'v'.*{name}.*refzarr\[codecs\]"
    ):
        filter_to_codec(stage, np.dtype("i4"), where="f.h5: dataset 'v'")


@pytest.mark.parametrize(
    ("stage", "reason"),
    [
        (Hdf5Filter(999, "mystery"), "does not know"),
        (Hdf5Filter(6, "scaleoffset", (1, 4, 8, 1, 4, 0, 0, 0)), "scale type 1"),
        (Hdf5Filter(5, "nbit", (9, 0, 8, 3, 4, 1, 0, 1, 4)), "compound or array"),
        (Hdf5Filter(32008, "bitshuffle", (0, 4, 4, 0, 7)), "compression 7"),
        (Hdf5Filter(4, "szip", (141,)), "client values"),
    ],
)
def test_unsupported_variants(stage: Hdf5Filter, reason: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match=rf"f\.h5: dataset 'v'.*{reason}"):
        filter_to_codec(stage, np.dtype("i4"), where="f.h5: dataset 'v'")


# -- corpus files ----------------------------------------------------------------------------------

CORPUS_FILES = [
    "hdf5/b2nd-no-chunkshape.h5",
    "hdf5/ref_szip.h5",
    "hdf5/bitshuffle_datasets.hdf5",
    "hdf5/hdf5_compression_blosc_lz4_bitshuffle.h5",
    "hdf5/hdf5_compression_zstd.h5",
    "hdf5/test_compressed_chunked_datasets_latest.hdf5",
]


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_file_reads_as_h5py(tmp_path: Path, name: str) -> None:
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"corpus file {name} is not available")
    group = roundtrip(path, tmp_path)
    assert group.skipped == ()
    assert list(group.arrays())


def test_blosc2_b2nd_blocks_that_do_not_divide_the_chunk(tmp_path: Path) -> None:
    data = np.arange(400 * 500, dtype="<i2").reshape(400, 500)
    path = write_h5(
        tmp_path / "b2nd.h5",
        lambda f: f.create_dataset("v", data=data, chunks=(399, 333), **hdf5plugin.Blosc2()),
    )
    roundtrip(path, tmp_path)
