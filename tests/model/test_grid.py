"""Rectilinear chunk grids: RectilinearAxis checks, ArrayMeta's irregular grids (normalisation of
regular-equivalent grids, bounds, stored chunk shapes), pickling, and Zarr v2's refusal."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refzarr import ArrayMeta, ChunkManifest, RefArray, RefFormatError, UnsupportedFeatureError
from refzarr.model import RectilinearAxis
from refzarr.model.grid import regular_bounds

# files of lengths 5, 3, 7 in chunks of 2, concatenated: each file's edge chunk is short
UNEVEN = RectilinearAxis((2, 2, 1, 2, 1, 2, 2, 2, 1), (2,) * 9)


def _meta(**changes: Any) -> ArrayMeta:
    fields: dict[str, Any] = {
        "shape": (15, 4),
        "chunks": (2, 3),
        "dtype": np.dtype("<f4"),
        "rectilinear": (UNEVEN, None),
    }
    fields.update(changes)
    return ArrayMeta(**fields)


# -- RectilinearAxis ----------------------------------------------------------------------------


def test_axis_length_bounds_and_regularity() -> None:
    axis = RectilinearAxis([3, 1, 2], np.array([3, 3, 2]))
    assert (axis.sizes, axis.stored) == ((3, 1, 2), (3, 3, 2))
    assert all(type(v) is int for v in axis.sizes + axis.stored)
    assert axis.length == 6
    np.testing.assert_array_equal(axis.bounds(), [0, 3, 4, 6], strict=False)
    assert axis.bounds().dtype == np.int64
    assert not axis.is_regular(3)
    assert RectilinearAxis((2, 2, 1), (2, 2, 2)).is_regular(2)
    assert not RectilinearAxis((2, 2, 1), (2, 2, 2)).is_regular(3)
    assert RectilinearAxis((), ()).length == 0


@pytest.mark.parametrize(
    ("sizes", "stored", "match"),
    [
        ((2, 1), (2,), "one stored length per chunk: 2 sizes, 1 stored"),
        ((2, 3), (2, 2), "chunk 1 .* holds 3 positions but is stored with length 2"),
        ((0, 2), (2, 2), "chunk 0 .* holds 0 positions"),
        ((-1,), (2,), "chunk 0 .* holds -1 positions"),
        ((2.5, 1), (3, 3), "must be integers, got 2.5"),
        ((2, 1), (3.0, 3), "must be integers, got 3.0"),
        ((True, 1), (3, 3), "must be integers, got True"),
        ("21", (3, 3), "must be integers, got '21'"),
        (5, (3,), "must be a sequence of integers"),
    ],
)
def test_axis_rejects_bad_lengths(sizes: Any, stored: Any, match: str) -> None:
    with pytest.raises(RefFormatError, match=match):
        RectilinearAxis(sizes, stored)


def test_axis_is_frozen_hashable_and_pickles() -> None:
    axis = RectilinearAxis((2, 1), (2, 2))
    assert pickle.loads(pickle.dumps(axis)) == axis
    assert hash(axis) == hash(RectilinearAxis([2, 1], [2, 2]))
    with pytest.raises(AttributeError):
        axis.sizes = (1,)  # type: ignore[misc]


# -- ArrayMeta with an irregular grid -----------------------------------------------------------


def test_irregular_meta_grid_bounds_and_stored_shapes() -> None:
    meta = _meta()
    assert not meta.is_regular
    assert meta.grid_shape == (9, 2)
    np.testing.assert_array_equal(meta.chunk_bounds(0), [0, 2, 4, 5, 7, 8, 10, 12, 14, 15])
    np.testing.assert_array_equal(meta.chunk_bounds(1), [0, 3, 4])
    assert meta.stored_chunk_shape((2, 1)) == (2, 3)


def test_differing_chunk_lengths_decode_to_their_own_length() -> None:
    # files of lengths 5 (chunks of 2), 3 (chunks of 3), 7 (chunks of 2)
    axis = RectilinearAxis((2, 2, 1, 3, 2, 2, 2, 1), (2, 2, 2, 3, 2, 2, 2, 2))
    meta = _meta(chunks=(3, 3), rectilinear=(axis, None))
    assert meta.grid_shape == (8, 2)
    assert meta.stored_chunk_shape((3, 0)) == (3, 3)
    assert meta.stored_chunk_shape((4, 0)) == (2, 3)
    with pytest.raises(RefFormatError, match=r"chunks\[0\] must be the longest stored chunk"):
        _meta(chunks=(2, 3), rectilinear=(axis, None))


@pytest.mark.parametrize(
    ("rectilinear", "match"),
    [
        ((UNEVEN,), "one entry per dimension"),
        ((RectilinearAxis((2, 2), (2, 2)), None), "add up to 4, not to its length 15"),
        ((UNEVEN, "x"), r"rectilinear\[1\] must be None or a RectilinearAxis"),
    ],
)
def test_meta_rejects_inconsistent_grids(rectilinear: Any, match: str) -> None:
    with pytest.raises(RefFormatError, match=match):
        _meta(rectilinear=rectilinear)


def test_regular_equivalent_grids_are_stored_as_none() -> None:
    regular = RectilinearAxis((2,) * 7 + (1,), (2,) * 8)
    meta = _meta(rectilinear=(regular, RectilinearAxis((3, 1), (3, 3))))
    assert meta.rectilinear is None
    assert meta.is_regular
    assert meta == _meta(rectilinear=None)
    assert hash(meta) == hash(_meta(rectilinear=None))
    partly = _meta(rectilinear=(UNEVEN, RectilinearAxis((3, 1), (3, 3))))
    assert partly.rectilinear == (UNEVEN, None)
    assert partly == _meta()


def test_an_edge_chunk_stored_short_is_not_regular() -> None:
    # a last chunk encoded with length 1 decodes to 1 row, not to a whole chunk's 2
    short_edge = RectilinearAxis((2,) * 7 + (1,), (2,) * 7 + (1,))
    assert _meta(rectilinear=(short_edge, None)).rectilinear == (short_edge, None)


def test_irregular_meta_pickles_compares_and_replaces() -> None:
    meta = _meta(dimension_names=("time", "x"), fill_value=-1.0)
    again = pickle.loads(pickle.dumps(meta))
    assert again == meta
    assert again.rectilinear == (UNEVEN, None)
    assert meta != _meta(dimension_names=("time", "x"), fill_value=-1.0, rectilinear=None)
    grown = meta.replace(
        shape=(17, 4), rectilinear=(RectilinearAxis((*UNEVEN.sizes, 2), (2,) * 10), None)
    )
    assert grown.grid_shape == (10, 2)


def test_zarr_v2_cannot_express_an_irregular_grid() -> None:
    with pytest.raises(UnsupportedFeatureError, match="axis 0 differ in length"):
        _meta().to_zarr_v2()


def test_ref_array_checks_the_manifest_against_the_irregular_grid() -> None:
    assert RefArray(_meta(), ChunkManifest.missing((9, 2))).meta.grid_shape == (9, 2)
    with pytest.raises(RefFormatError, match=r"manifest grid \(8, 2\) does not match"):
        RefArray(_meta(), ChunkManifest.missing((8, 2)))


# -- hypothesis ---------------------------------------------------------------------------------


@st.composite
def axes(draw: st.DrawFn) -> RectilinearAxis:
    stored = draw(st.lists(st.integers(1, 6), min_size=1, max_size=12))
    sizes = [draw(st.integers(1, s)) for s in stored]
    return RectilinearAxis(sizes, stored)


@given(axis=axes())
def test_bounds_hold_the_sizes(axis: RectilinearAxis) -> None:
    bounds = axis.bounds()
    assert bounds[0] == 0
    assert bounds[-1] == axis.length
    np.testing.assert_array_equal(np.diff(bounds), axis.sizes)


@given(axis=axes(), other=st.integers(1, 9), width=st.integers(1, 4))
def test_meta_of_any_axis_is_consistent(axis: RectilinearAxis, other: int, width: int) -> None:
    meta = ArrayMeta(
        shape=(axis.length, other),
        chunks=(max(axis.stored), width),
        dtype=np.dtype("i2"),
        rectilinear=(axis, None),
    )
    bounds = meta.chunk_bounds(0)
    assert len(bounds) == meta.grid_shape[0] + 1
    if meta.rectilinear is None:  # normalised: exactly the regular grid of that chunk length
        assert axis.is_regular(meta.chunks[0])
        np.testing.assert_array_equal(bounds, regular_bounds(axis.length, meta.chunks[0]))
    else:
        np.testing.assert_array_equal(bounds, axis.bounds())
        for k, stored in enumerate(axis.stored):
            assert meta.stored_chunk_shape((k, 0)) == (stored, width)
    assert pickle.loads(pickle.dumps(meta)) == meta


@given(length=st.integers(0, 40), chunk=st.integers(1, 9))
def test_regular_axes_normalise_to_none(length: int, chunk: int) -> None:
    count = -(-length // chunk)
    sizes = [min(chunk, length - k * chunk) for k in range(count)]
    axis = RectilinearAxis(sizes, [chunk] * count)
    assert axis.is_regular(chunk)
    np.testing.assert_array_equal(axis.bounds(), regular_bounds(length, chunk))
    meta = ArrayMeta(shape=(length,), chunks=(chunk,), dtype="u1", rectilinear=(axis,))
    assert meta.rectilinear is None
    assert meta == ArrayMeta(shape=(length,), chunks=(chunk,), dtype="u1")
