"""Small manifests and chunk grids are checked in plain Python: same verdicts as numpy's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refzarr.errors import ScanError
from refzarr.model import MISSING, WHOLE_FILE, ChunkManifest
from refzarr.scan.hdf5 import layout as hdf5_layout
from refzarr.scan.hdf5 import source as hdf5_source
from refzarr.scan.hdf5.source import check_within_file

_URL = "/data/a.nc"
_SIZE = 1000


def _verdict(manifest: ChunkManifest, *, overlaps: bool) -> str:
    try:
        check_within_file(manifest, _URL, _SIZE, "where", overlaps=overlaps)
    except ScanError as exc:
        return str(exc)
    return "fine"


entries = st.tuples(
    st.sampled_from([MISSING, 0, 1]),
    st.integers(0, 1100) | st.sampled_from([2**63 - 1]),
    st.integers(0, 300) | st.sampled_from([int(WHOLE_FILE), 2**63 - 1]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(entries, min_size=1, max_size=12), st.booleans())
def test_small_manifests_are_checked_as_numpy_checks_them(
    columns: list[Any], overlaps: bool
) -> None:
    ids = np.asarray([c[0] for c in columns], np.int32)
    whole = int(WHOLE_FILE)
    offsets = np.asarray([0 if c[0] < 0 or c[2] == whole else c[1] for c in columns], np.uint64)
    lengths = np.asarray([0 if c[0] < 0 else c[2] for c in columns], np.uint64)
    manifest = ChunkManifest.from_arrays([_URL, "/data/b.nc"], ids, offsets, lengths)
    small = _verdict(manifest, overlaps=overlaps)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hdf5_source, "SMALL_MANIFEST", 0)
        assert small == _verdict(manifest, overlaps=overlaps)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 3), min_size=0, max_size=3),
    st.lists(st.lists(st.integers(-1, 3), min_size=3, max_size=3), max_size=30),
    st.booleans(),
)
def test_small_grids_are_found_complete_as_numpy_finds_them(
    grid: list[int], coords: list[list[int]], in_order: bool
) -> None:
    ndim = len(grid)
    if in_order:
        coords = [list(index) for index in np.ndindex(*grid)]
    array = np.asarray([c[:ndim] for c in coords], np.int64).reshape(len(coords), ndim)
    small = hdf5_layout._complete_in_order(array, tuple(grid))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hdf5_layout, "_SMALL_GRID", 0)
        assert small == hdf5_layout._complete_in_order(array, tuple(grid))
