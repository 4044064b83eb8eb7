"""Differential fuzz of the HDF4 scanner (our own DD-block reader) and its codecs: random
files written by pyhdf and the HDF4 library it bundles (SDS of every type and rank, unlimited
dimensions appended in several writes, chunked and compressed storage, fill values, SDS never
written, attributes of every type, dimension scales), scanned by refzarr and read back
through refzarr's reader and through fsspec + zarr on the JSON (and Parquet) it writes,
compared exactly with pyhdf's reading (h4kit)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from h4kit import (
    all_readers,
    assert_matches_pyhdf,
    refzarr_reader,
    set_blocksize,
    set_chunk,
    set_nbit,
    write_sd,
    zarr_reader,
)
from hypothesis import assume, given
from hypothesis import strategies as st
from pyhdf.error import HDF4Error
from pyhdf.SD import SDC

import refzarr
from fuzzkit import fuzz_settings

# fsspec reads Parquet reference sets with fastparquet by default, which pandas 3 deprecates
pytestmark = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")

TYPES = {
    "i1": SDC.INT8,
    "u1": SDC.UINT8,
    "i2": SDC.INT16,
    "u2": SDC.UINT16,
    "i4": SDC.INT32,
    "u4": SDC.UINT32,
    "f4": SDC.FLOAT32,
    "f8": SDC.FLOAT64,
    "S1": SDC.CHAR8,
}
"""numpy type -> HDF4 number type of an SDS."""

ATTRIBUTE_TYPES = {**TYPES, "uc": SDC.UCHAR8}

# HDF4 coders of SDsetchunk (HDF4's COMP_CODE_*): none, RLE, skipping Huffman, deflate
CHUNK_CODERS = {"none": 0, "rle": 1, "skphuff": 3, "deflate": 4}


def _values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Random values of ``dtype`` (extremes, NaN and infinities included; text of letters,
    NULs and spaces)."""
    size = int(np.prod(shape))
    if dtype == "S1":
        return rng.choice(np.frombuffer(b"ab z\0", "S1"), size=size).reshape(shape)
    if dtype[0] == "f":
        values = rng.normal(scale=1e3, size=size).astype(dtype)
        picks = rng.random(size) < 0.1
        specials = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=dtype)
        values[picks] = rng.choice(specials, size=int(picks.sum()))
        return values.reshape(shape)
    info = np.iinfo(dtype)
    values = rng.integers(int(info.min), int(info.max), size=size, endpoint=True).astype(dtype)
    if size > 1:
        values[0], values[-1] = info.min, info.max
    if rng.random() < 0.3:  # runs: what RLE and Huffman coders compress
        values = np.repeat(values[: -(-size // 4)], 4)[:size]
    return values.reshape(shape)


@dataclass
class Sds:
    """How one SDS is written."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    unlimited: bool
    storage: str  # contiguous, compress:<coder>, chunk:<coder>, nbit
    chunks: tuple[int, ...]
    fill: Any
    writes: list[tuple[tuple[slice, ...], np.ndarray]]
    attributes: dict[str, tuple[str, Any]]
    scales: dict[int, tuple[str, list[Any]]]
    blocksize: int | None
    nbit: tuple[int, int, bool, bool] | None = None
    dim_names: list[str] = field(default_factory=list)


def _attribute(rng: np.random.Generator, kind: str) -> Any:
    """An attribute's value: text, one number or several."""
    if kind in ("S1", "uc") and kind == "S1":
        return "".join(rng.choice(list("abc xyz"), size=int(rng.integers(1, 8))))
    dtype = "u1" if kind == "uc" else kind
    count = 1 if kind == "uc" else int(rng.integers(1, 4))  # pyhdf reads UCHAR8 lists as text
    values = _values(rng, dtype, (count,))
    if dtype[0] == "f":
        values = np.nan_to_num(values, nan=1.5, posinf=2.5, neginf=-2.5)
    out = values.tolist()
    return out[0] if count == 1 else out


@st.composite
def sds_specs(draw: st.DrawFn, index: int) -> Sds:
    """One SDS: any type, rank 1-4, unlimited or not, any storage, fill value or not,
    written whole, in parts, record by record or never."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from(list(TYPES)))
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    unlimited = draw(st.booleans())
    # SDsetchunk refuses an SDS of an unlimited dimension (pyhdf's HDF4 4.2); its szip has
    # no encoder ("Encoder not available"): szip tiles are in the corpus tests only
    storages = ["contiguous"]
    if not unlimited:
        storages += ["chunk:none", "chunk:rle", "chunk:skphuff", "chunk:deflate"]
        storages += ["compress:deflate", "compress:rle", "compress:skphuff"]
        if dtype[0] in "iu" and dtype != "S1":
            storages.append("nbit")
    storage = draw(st.sampled_from(storages))
    chunks = tuple(draw(st.integers(1, n + 1)) for n in shape)
    fill = None
    if dtype != "S1" and draw(st.booleans()):  # pyhdf sets no CHAR8 fill value
        fill = _values(rng, dtype, (1,))[0]
        if dtype[0] == "f":
            fill = np.nan_to_num(fill, nan=-999.0)
        fill = fill.item()  # pyhdf takes Python numbers
    nbit = None
    if storage == "nbit":
        bits = 8 * np.dtype(dtype).itemsize
        length = draw(st.integers(1, bits))
        start = draw(st.integers(length - 1, bits - 1))
        nbit = (start, length, draw(st.booleans()), draw(st.booleans()))
    hows = ["whole", "never"]  # a compressed (not chunked) SDS is written whole
    if not storage.startswith("compress") and storage != "nbit":
        hows += ["parts", "records"] if unlimited else ["parts"]
    how = draw(st.sampled_from(hows))
    writes = _writes(rng, how, dtype, shape, unlimited, nbit)
    attributes = {
        f"a_{kind}": (kind, _attribute(rng, kind))
        for kind in draw(st.lists(st.sampled_from(list(ATTRIBUTE_TYPES)), max_size=3, unique=True))
    }
    scales: dict[int, tuple[str, list[Any]]] = {}
    for axis in draw(st.lists(st.integers(0, rank - 1), max_size=2, unique=True)):
        if unlimited and axis == 0:
            continue  # the scale of a dimension whose length changes
        kind = draw(st.sampled_from([k for k in TYPES if k != "S1"]))
        values = _values(rng, kind, (shape[axis],))
        if kind[0] == "f":
            values = np.nan_to_num(values, nan=0.5, posinf=1.5, neginf=-1.5)
        scales[axis] = (kind, values.tolist())
    blocksize = draw(st.sampled_from([None, 64, 200])) if unlimited else None
    names = [f"s{index}_d{k}" for k in range(rank)] if draw(st.booleans()) else []
    return Sds(
        f"sds{index}",
        dtype,
        shape,
        unlimited,
        storage,
        chunks,
        fill,
        writes,
        attributes,
        scales,
        blocksize,
        nbit,
        names,
    )


def _writes(
    rng: np.random.Generator,
    how: str,
    dtype: str,
    shape: tuple[int, ...],
    unlimited: bool,
    nbit: tuple[int, int, bool, bool] | None,
) -> list[tuple[tuple[slice, ...], np.ndarray]]:
    """The slabs written: the whole array, a few boxes, each record, or nothing."""

    def values(box_shape: tuple[int, ...]) -> np.ndarray:
        out = _values(rng, dtype, box_shape)
        if nbit is not None:  # only the field's bits are stored
            start, length, _, _ = nbit
            mask = ((1 << length) - 1) << (start - length + 1)
            out = (out.astype(np.int64) & mask).astype(dtype)
        return out

    if how == "never":
        return []
    if how == "whole":
        return [(tuple(slice(0, n) for n in shape), values(shape))]
    if how == "records":
        return [
            ((slice(k, k + 1), *(slice(0, n) for n in shape[1:])), values((1, *shape[1:])))
            for k in range(shape[0])
        ]
    boxes = []
    for _ in range(int(rng.integers(1, 4))):
        starts = [int(rng.integers(0, n)) for n in shape]
        stops = [int(rng.integers(s + 1, n + 1)) for s, n in zip(starts, shape, strict=True)]
        if unlimited:  # records are appended in order, from the first
            starts[0] = 0
        box = tuple(slice(a, b) for a, b in zip(starts, stops, strict=True))
        boxes.append((box, values(tuple(b - a for a, b in zip(starts, stops, strict=True)))))
    return boxes


def _create(sd: Any, spec: Sds) -> None:
    dims = (SDC.UNLIMITED, *spec.shape[1:]) if spec.unlimited else spec.shape
    sds = sd.create(spec.name, TYPES[spec.dtype], dims)
    try:
        for k, name in enumerate(spec.dim_names):
            sds.dim(k).setname(name)
        if spec.fill is not None:
            sds.setfillvalue(spec.fill)
        kind, _, coder = spec.storage.partition(":")
        if kind == "chunk":
            set_chunk(sds, spec.chunks, CHUNK_CODERS[coder], 5 if coder == "deflate" else 2)
        elif kind == "compress":
            _compress(sds, coder, spec.dtype)
        elif kind == "nbit":
            assert spec.nbit is not None
            set_nbit(sds, *spec.nbit)
        if spec.blocksize:
            set_blocksize(sds, spec.blocksize)
        for box, values in spec.writes:
            sds[box] = values
        for key, (kind_, value) in spec.attributes.items():
            sds.attr(key).set(ATTRIBUTE_TYPES[kind_], value)
        for axis, (kind_, values) in spec.scales.items():
            # pyhdf takes a scale of one value as that value
            sds.dim(axis).setscale(TYPES[kind_], values if len(values) > 1 else values[0])
    finally:
        sds.endaccess()


def _compress(sds: Any, coder: str, dtype: str) -> None:
    if coder == "deflate":
        sds.setcompress(SDC.COMP_DEFLATE, 6)
    elif coder == "rle":
        sds.setcompress(SDC.COMP_RLE)
    else:
        sds.setcompress(SDC.COMP_SKPHUFF, np.dtype(dtype).itemsize)


def _write(path: Path, specs: list[Sds], file_attributes: dict[str, tuple[str, Any]]) -> bool:
    """Write the file; False when the HDF4 library refuses a combination."""
    try:
        with write_sd(path) as sd:
            for key, (kind, value) in file_attributes.items():
                sd.attr(key).set(ATTRIBUTE_TYPES[kind], value)
            for spec in specs:
                _create(sd, spec)
    except (HDF4Error, ValueError, TypeError, AssertionError):
        return False
    return True


@st.composite
def files(draw: st.DrawFn) -> tuple[list[Sds], dict[str, tuple[str, Any]]]:
    count = draw(st.integers(1, 4))
    specs = [draw(sds_specs(k)) for k in range(count)]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kinds = draw(st.lists(st.sampled_from(list(ATTRIBUTE_TYPES)), max_size=3, unique=True))
    return specs, {f"f_{kind}": (kind, _attribute(rng, kind)) for kind in kinds}


@fuzz_settings(ci_examples=15)
@given(written=files(), parquet=st.integers(0, 3))
def test_sd_files(
    tmp_path_factory: pytest.TempPathFactory,
    written: tuple[list[Sds], dict[str, tuple[str, Any]]],
    parquet: int,
) -> None:
    specs, file_attributes = written
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "fuzz.hdf"
    assume(_write(path, specs, file_attributes))
    group = refzarr.scan(path)
    assert not group.skipped
    (folder / "read").mkdir()
    if parquet == 0:  # JSON and Parquet
        readers = all_readers(group, folder / "read")
    else:
        refzarr.write(group, folder / "read" / "refs.json")
        readers = {
            "refzarr": refzarr_reader(group),
            "zarr+json": zarr_reader(folder / "read" / "refs.json"),
        }
    assert assert_matches_pyhdf(path, group, readers) > 0


def test_chunk_rewritten_into_linked_blocks(tmp_path: Path) -> None:
    """A compressed chunk written again, larger, is stored by HDF4 in linked blocks: its
    bytes are read and held in the reference set (was UnsupportedFeatureError; found by
    the fuzz test above)."""
    path = tmp_path / "rewritten.hdf"
    with write_sd(path) as sd:
        sds = sd.create("sds0", SDC.INT8, (2, 3))
        set_chunk(sds, (1, 3), CHUNK_CODERS["skphuff"], 2)
        sds[1:2, 1:2] = np.array([[-50]], "i1")
        sds[0:2, 0:2] = np.array([[-128, 0], [27, 127]], "i1")
        sds[1:2, 1:3] = np.array([[-128, -128]], "i1")
        sds.endaccess()
    group = refzarr.scan(path)
    manifest = group["sds0"].manifest
    assert manifest.path_id.ravel().tolist() == [0, -2]  # chunk 1 in linked blocks: inlined
    (tmp_path / "read").mkdir()
    assert assert_matches_pyhdf(path, group, all_readers(group, tmp_path / "read")) == 3
