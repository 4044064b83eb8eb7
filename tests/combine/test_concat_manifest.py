"""Concatenated manifests, entry by entry: whatever each piece's URL table (one file, several,
none, URLs shared between pieces), missing and inlined chunks, every chunk of the combined
array resolves to the same reference, bytes or nothing as in its piece."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from refzarr import ArrayMeta, ChunkManifest, RefArray
from refzarr.combine.concat import Placement, concat_arrays
from refzarr.model import INLINED, MISSING

URLS = ["a.tif", "b.tif", "c.tif", "d.tif"]
WIDTH = 2


@st.composite
def pieces(draw: st.DrawFn) -> RefArray:
    """A (rows, WIDTH) chunk grid of one-element chunks, its entries drawn."""
    rows = draw(st.integers(0, 4))
    paths = draw(st.lists(st.sampled_from(URLS), max_size=3, unique=True))
    n = rows * WIDTH
    kinds = [MISSING, INLINED, *range(len(paths))]
    ids = np.array(draw(st.lists(st.sampled_from(kinds), min_size=n, max_size=n)), np.int32)
    offsets = np.array(draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n)), np.uint64)
    lengths = np.array(draw(st.lists(st.integers(1, 2**20), min_size=n, max_size=n)), np.uint64)
    offsets[ids < 0] = 0
    lengths[ids < 0] = 0
    grid = (rows, WIDTH)
    inlined = {
        tuple(int(i) for i in np.unravel_index(k, grid)): bytes([k % 256, 7])
        for k in np.flatnonzero(ids == INLINED).tolist()
    }
    manifest = ChunkManifest.from_arrays(
        paths, ids.reshape(grid), offsets.reshape(grid), lengths.reshape(grid), inlined
    )
    meta = ArrayMeta((rows, WIDTH), (1, 1), np.dtype("u2"), None, (), {}, ("y", "x"))
    return RefArray(meta, manifest)


def _entries(array: RefArray) -> list[Any]:
    manifest = array.manifest
    return [manifest[index] for index in np.ndindex(*manifest.grid_shape)]


@settings(max_examples=100, deadline=None)
@given(st.lists(pieces(), min_size=1, max_size=5), st.booleans())
def test_every_entry_resolves_as_in_its_piece(arrays: list[RefArray], stack: bool) -> None:
    if stack:  # along a new first dimension: the pieces must have one shape
        arrays = [arrays[0]] * len(arrays) if arrays[0].shape[0] else arrays[:1]
        placement = Placement((len(arrays),), (0,), ("time",))
    else:
        placement = Placement((len(arrays),), (0,))
    combined = concat_arrays(arrays, placement, lambda ix: f"pieces {list(ix)}", "variable 'v'")
    expected = [entry for array in arrays for entry in _entries(array)]
    assert _entries(combined) == expected
    used = {entry.url for entry in expected if entry is not None and not isinstance(entry, bytes)}
    assert set(combined.manifest.paths) >= used
    assert len(combined.manifest.paths) == len(set(combined.manifest.paths))


def test_one_file_per_piece_with_missing_and_inlined_chunks() -> None:
    """The fast path (one URL per piece): MISSING and INLINED entries keep their meaning."""
    grid = (2, WIDTH)
    ids = np.array([[0, MISSING], [INLINED, 0]], np.int32)
    offsets = np.array([[10, 0], [0, 30]], np.uint64)
    lengths = np.array([[5, 0], [0, 6]], np.uint64)
    meta = ArrayMeta(grid, (1, 1), np.dtype("u2"), None, (), {}, ("y", "x"))
    arrays = [
        RefArray(meta, ChunkManifest.from_arrays([url], ids, offsets, lengths, {(1, 0): b"zz"}))
        for url in ("p.tif", "q.tif", "p.tif")
    ]
    combined = concat_arrays(arrays, Placement((3,), (0,)), str, "v")
    assert combined.manifest.paths == ("p.tif", "q.tif")
    assert _entries(combined) == [entry for array in arrays for entry in _entries(array)]
    assert combined.manifest.inlined == {(1, 0): b"zz", (3, 0): b"zz", (5, 0): b"zz"}
