"""The model's fast paths for plain values take exactly the checks of the general ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from refzarr import ArrayMeta, RefFormatError
from refzarr.model.frozen import FrozenDict, freeze_json


@pytest.mark.parametrize(
    ("shape", "expected"),
    [((3, 4), (3, 4)), ((np.int64(3), 4), (3, 4)), ([3, 4], (3, 4)), ((), ())],
)
def test_shapes_of_plain_and_numpy_ints(shape: Any, expected: tuple[int, ...]) -> None:
    meta = ArrayMeta(shape=shape, chunks=(1,) * len(expected), dtype=np.dtype("f4"))
    assert meta.shape == expected
    assert all(type(n) is int for n in meta.shape)


@pytest.mark.parametrize("shape", [(True, 2), (-1, 2), (2.0, 2), ("2", 2)])
def test_shapes_that_are_not_counts_are_rejected(shape: Any) -> None:
    with pytest.raises(RefFormatError, match="shape must hold integers >= 0"):
        ArrayMeta(shape=shape, chunks=(1, 1), dtype=np.dtype("f4"))


def test_chunks_must_be_positive() -> None:
    with pytest.raises(RefFormatError, match="chunks must hold integers >= 1"):
        ArrayMeta(shape=(2,), chunks=(0,), dtype=np.dtype("f4"))


class _Text(str):
    """A str subclass: frozen through the general path, still a str."""


def test_freeze_json_of_plain_and_other_values() -> None:
    frozen = freeze_json({"a": 1, "b": "x", "c": None, "d": [np.float32(1.5)], "e": _Text("t")})
    assert frozen == FrozenDict({"a": 1, "b": "x", "c": None, "d": (1.5,), "e": "t"})
    with pytest.raises(TypeError, match=r"value\['f'\]: bytes is not a JSON value"):
        freeze_json({"f": b"x"})
    with pytest.raises(TypeError, match="mapping keys must be str"):
        freeze_json({1: 2})
