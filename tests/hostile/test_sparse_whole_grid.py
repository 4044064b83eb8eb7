"""Operations that once needed a whole chunk grid in memory work on a sparse grid's
written entries: `to_kerchunk`, combining sparse pieces (the result stays sparse) and the
HDF5 scanner's padding of variables shorter than their unlimited dimension. What still needs
every chunk (comparing a sparse array's values chunk by chunk, its whole columns) keeps the
limit error."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_shape_bombs import bomb, bounded

import refzarr

N = 2**40


def _inline(value: int) -> str:
    return "base64:" + base64.b64encode(np.int32(value).tobytes()).decode()


def piece(t: int, written: dict[int, Any], n: int = N) -> refzarr.RefGroup:
    """One time step of ``a(t, x)`` with x of ``n`` one-element chunks, ``written`` chunks."""
    refs = bomb([1, n], [1, 1], **{f"a/0.{x}": value for x, value in written.items()})
    documents = refs["refs"]
    documents["a/.zattrs"] = json.dumps({"_ARRAY_DIMENSIONS": ["t", "x"]})
    zarray = {"shape": [1], "chunks": [1], "dtype": "<i4", "fill_value": None, "order": "C",
              "filters": None, "compressor": None, "zarr_format": 2}  # fmt: skip
    documents["t/.zarray"] = json.dumps(zarray)
    documents["t/.zattrs"] = '{"_ARRAY_DIMENSIONS":["t"]}'
    documents["t/0"] = _inline(t)
    return refzarr.from_kerchunk(refs)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("data") / "data.bin"
    path.write_bytes(np.arange(8, dtype="<i4").tobytes())
    return path.as_uri()


def test_to_kerchunk_of_a_sparse_grid_lists_its_written_chunks(data_file: str) -> None:
    group = refzarr.from_kerchunk(
        bomb([N], [1], **{"a/1": _inline(5), f"a/{N - 1}": [data_file, 4, 4], "a/3": [data_file]})
    )
    assert group["a"].manifest.sparse
    refs = bounded(lambda: refzarr.to_kerchunk(group))
    chunks = {k: v for k, v in refs.items() if not k.rpartition("/")[2].startswith(".")}
    last = f"a/{N - 1}"
    assert chunks == {"a/1": "\x05\x00\x00\x00", "a/3": [data_file], last: [data_file, 4, 4]}
    assert list(chunks) == ["a/1", "a/3", f"a/{N - 1}"]  # C order, as for a dense grid
    assert refzarr.from_kerchunk(refs)["a"].manifest == group["a"].manifest


def test_combining_sparse_pieces_stays_sparse(data_file: str) -> None:
    pieces = [
        piece(0, {1: _inline(10), N - 1: [data_file, 4, 4]}),
        piece(1, {2: _inline(11), 5: [data_file, 8, 4]}),
        piece(2, {}),
    ]
    combined = bounded(lambda: refzarr.combine(pieces, concat_dims=["t"]))
    array = combined["a"]
    manifest = array.manifest
    assert array.meta.shape == (3, N)
    assert manifest.sparse
    assert manifest.count_written() == 4
    assert manifest[1, 5] == (data_file, 8, 4)
    assert manifest[0, N - 1] == (data_file, 4, 4)
    ds = refzarr.open_dataset(combined, mask_and_scale=False)
    values = bounded(lambda: ds["a"][:, :6].values)
    np.testing.assert_array_equal(values, [[7, 10, 7, 7, 7, 7], [7, 7, 11, 7, 7, 2], [7] * 6])
    assert bounded(lambda: ds["a"][0, -1].values) == 1


def test_combining_a_sparse_piece_with_a_dense_one(data_file: str) -> None:
    """A piece of 2**20 + 16 chunks, one in 15 written, is dense; its sparse partner makes
    the combination sparse: the dense piece's written entries are taken as they are."""
    n = 2**20 + 16
    dense = piece(0, {x: [data_file, 0, 4] for x in range(0, n, 15)}, n)
    assert not dense["a"].manifest.sparse
    sparse = piece(1, {3: [data_file, 4, 4]}, n)
    assert sparse["a"].manifest.sparse
    combined = bounded(lambda: refzarr.combine([dense, sparse], concat_dims=["t"]))
    manifest = combined["a"].manifest
    assert manifest.grid_shape == (2, n)
    assert manifest.sparse
    assert manifest.count_written() == len(range(0, n, 15)) + 1
    assert manifest[0, 15] == (data_file, 0, 4)
    assert manifest[1, 3] == (data_file, 4, 4)
    assert manifest[1, 15] is None


def test_hdf5_variables_shorter_than_their_unlimited_dimension(tmp_path: Path) -> None:
    """``a(time, x)`` with x of 2**31 one-element chunks, one record written, ``b(time)``
    five: ``a`` is padded to five records, its grid held sparse."""
    netCDF4 = pytest.importorskip("netCDF4")
    path = tmp_path / "unlimited.nc"
    with netCDF4.Dataset(path, "w") as f:
        f.createDimension("time", None)
        f.createDimension("x", 2**31)
        a = f.createVariable("a", "i4", ("time", "x"), chunksizes=(1, 1), fill_value=-1)
        f.createVariable("b", "i4", ("time",))[:5] = np.arange(5)
        a[0, 7] = 42
    group = bounded(lambda: refzarr.scan(path))
    manifest = group["a"].manifest
    assert group["a"].meta.shape == (5, 2**31)
    assert manifest.sparse
    assert manifest.count_written() == 1
    ds = refzarr.open_dataset(group, mask_and_scale=False)
    values = bounded(lambda: ds["a"][:, 6:9].values)
    np.testing.assert_array_equal(values, [[-1, 42, -1]] + [[-1, -1, -1]] * 4)


def _with_constant(t: int, value: int) -> refzarr.RefGroup:
    """A piece holding also ``s(x)``, 2**40 one-element chunks, chunk 5 holding ``value``."""
    refs = refzarr.to_kerchunk(piece(t, {1: _inline(3)}))
    zarray = json.loads(refs["a/.zarray"])
    refs["s/.zarray"] = json.dumps({**zarray, "shape": [N], "chunks": [1]})
    refs["s/.zattrs"] = '{"_ARRAY_DIMENSIONS":["x"]}'
    refs["s/5"] = _inline(value)
    return refzarr.from_kerchunk(refs)


def test_comparing_sparse_copies_keeps_the_limit_error() -> None:
    """``s`` is in every piece and must be identical: equal references are seen equal from
    their written entries; different ones would be compared chunk by chunk, 2**40 slots:
    refused, naming the variable, the pieces and the limit."""
    first = _with_constant(0, 1)
    combined = bounded(lambda: refzarr.combine([first, _with_constant(1, 1)], concat_dims=["t"]))
    assert combined["s"].manifest.sparse
    assert combined["s"].manifest.count_written() == 1
    with pytest.raises(
        refzarr.RefFormatError, match=r"variable 's': comparing its values in "
    ) as info:
        bounded(lambda: refzarr.combine([first, _with_constant(1, 2)], concat_dims=["t"]))
    assert "1,099,511,627,776 manifest entries" in str(info.value)
    assert "set_max_dense_entries" in str(info.value)
