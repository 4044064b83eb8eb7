"""Properties: concatenating any split of an array (any file lengths, any chunk length per file,
any input order) reads back as the whole array; combining partial results (a tree reduction)
equals combining every piece at once; stacking pieces equals numpy.stack."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import refzarr
from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup
from refzarr.io import RangeReader
from refzarr.model import INLINED
from refzarr.reader import ArrayReader

WIDTH = 3


def _inlined_array(values: np.ndarray[Any, Any], chunk: int, dims: tuple[str, ...]) -> RefArray:
    """``values`` in chunks of ``chunk`` along axis 0, every chunk inlined and the edge chunk
    stored padded to the whole chunk length (as HDF5 stores it)."""
    n = values.shape[0]
    grid = -(-n // chunk)
    inlined = {}
    for k in range(grid):
        stored = np.zeros((chunk, *values.shape[1:]), values.dtype)
        part = values[k * chunk : (k + 1) * chunk]
        stored[: part.shape[0]] = part
        inlined[(k,) + (0,) * (values.ndim - 1)] = stored.tobytes()
    grid_shape = (grid, *(1,) * (values.ndim - 1))
    zeros = np.zeros(grid_shape, np.uint64)
    manifest = ChunkManifest.from_arrays(
        [], np.full(grid_shape, INLINED, np.int32), zeros, zeros, inlined
    )
    meta = ArrayMeta(values.shape, (chunk, *values.shape[1:]), values.dtype, None, (), {}, dims)
    return RefArray(meta, manifest)


def _piece(whole: np.ndarray[Any, Any], start: int, stop: int, chunk: int) -> RefGroup:
    times = np.arange(start, stop, dtype=np.int64)
    return RefGroup(
        {"first": start},
        {
            "v": _inlined_array(whole[start:stop], chunk, ("time", "x")),
            "time": _inlined_array(times, max(1, stop - start), ("time",)),
        },
    )


def _read(group: RefGroup, name: str) -> np.ndarray[Any, Any]:
    array = group[name]
    assert isinstance(array, RefArray)
    return ArrayReader(array, name, RangeReader(), threads=1).read()


@st.composite
def splits(draw: st.DrawFn) -> tuple[np.ndarray[Any, Any], list[tuple[int, int, int]], list[int]]:
    """The whole array, pieces (start, stop, chunk) and an input order."""
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=6))
    dtype = draw(st.sampled_from(["<f4", ">i2", "<u8", "<f8"]))
    total = sum(sizes)
    whole = (np.arange(total * WIDTH).reshape(total, WIDTH) % 251).astype(dtype)
    if whole.dtype.kind == "f":
        whole[::3, 0] = np.nan
    pieces, start = [], 0
    for size in sizes:
        chunk = draw(st.integers(1, size + 2))
        pieces.append((start, start + size, chunk))
        start += size
    order = draw(st.permutations(range(len(pieces))))
    return whole, pieces, list(order)


@settings(max_examples=60, deadline=None)
@given(splits())
def test_concat_of_any_split_is_the_whole(case: Any) -> None:
    whole, pieces, order = case
    groups = [_piece(whole, *pieces[k]) for k in order]
    combined = refzarr.combine(groups, concat_dims="time")
    got = _read(combined, "v")
    assert got.dtype == whole.dtype
    np.testing.assert_array_equal(got, whole)  # NaN-aware: NaN equals NaN here
    np.testing.assert_array_equal(_read(combined, "time"), np.arange(whole.shape[0]))
    assert combined.attributes["first"] == 0  # attributes of the first file on the axis


@settings(max_examples=40, deadline=None)
@given(splits(), st.data())
def test_tree_reduction_equals_one_combine(case: Any, data: st.DataObject) -> None:
    whole, pieces, order = case
    groups = [_piece(whole, *piece) for piece in pieces]
    cut = data.draw(st.integers(1, max(1, len(groups) - 1)))
    # partial results cover consecutive ranges (as a tree reduction over sorted files does);
    # inside a partial, and among partials, any order
    parts = [part for part in (groups[:cut], groups[cut:]) if part]
    partials = [refzarr.combine(data.draw(st.permutations(p)), concat_dims="time") for p in parts]
    shuffled = [groups[k] for k in order]
    assert refzarr.combine(partials[::-1], concat_dims="time") == refzarr.combine(
        shuffled, concat_dims="time"
    )


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3))
def test_stack_is_numpy_stack(members: int, length: int, chunk: int) -> None:
    arrays = [
        (np.arange(length * WIDTH).reshape(length, WIDTH) + 100 * m).astype("<i4")
        for m in range(members)
    ]
    groups = [
        RefGroup({}, {"v": _inlined_array(a, min(chunk, length), ("time", "x"))}) for a in arrays
    ]
    combined = refzarr.combine(groups, concat_dims="member")
    np.testing.assert_array_equal(_read(combined, "v"), np.stack(arrays))
