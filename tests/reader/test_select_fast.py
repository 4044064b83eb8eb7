"""The arithmetic mappings of a regular axis (`Axis.one`, `Axis.run`) equal the general one."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from refzarr.reader.select import Axis, normalize_selection


def _same(fast: Axis, general: Axis) -> None:
    for field in fields(Axis):
        got, want = getattr(fast, field.name), getattr(general, field.name)
        if isinstance(want, np.ndarray):
            assert got.dtype == want.dtype, field.name
            np.testing.assert_array_equal(got, want, err_msg=field.name)
        else:
            assert got == want, field.name
            assert type(got) is type(want), field.name


@st.composite
def _axis_and_chunk(draw: Any) -> tuple[int, int]:
    size = draw(st.integers(1, 200))
    return size, draw(st.integers(1, size + 3))


@given(_axis_and_chunk(), st.data())
def test_one_position_as_general(axis: tuple[int, int], data: Any) -> None:
    size, chunk = axis
    index = data.draw(st.integers(0, size - 1))
    general = Axis.of(np.array([index], dtype=np.int64), 1, chunk, 0)
    _same(Axis.one(index, chunk, 0), general)


@given(_axis_and_chunk(), st.data())
def test_run_as_general(axis: tuple[int, int], data: Any) -> None:
    size, chunk = axis
    start = data.draw(st.integers(0, size - 1))
    stop = data.draw(st.integers(start + 1, size))
    general = Axis.of(np.arange(start, stop, dtype=np.int64), 1, chunk, slice(None))
    _same(Axis.run(start, stop, chunk), general)


def test_selection_uses_them_on_regular_axes_only() -> None:
    bounds = np.array([0, 3, 10], dtype=np.int64)  # a rectilinear second axis
    axes = normalize_selection((4, slice(2, 9)), (10, 10), (4, 5), [None, bounds])
    _same(axes[0], Axis.of(np.array([4], dtype=np.int64), 1, 4, 0))
    _same(axes[1], Axis.of(np.arange(2, 9, dtype=np.int64), 1, 5, slice(None), bounds))
