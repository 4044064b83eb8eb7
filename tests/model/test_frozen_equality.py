"""Equality and hashing of frozen JSON values (`FrozenDict`): exact as their JSON texts are
(1, 1.0 and True differ; 0.0 and -0.0 differ), NaN equals NaN, key order ignored, lists
equal tuples; hashes agree with equality, also for values unpickled in another process."""

from __future__ import annotations

import math
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from childkit import child_env, run_python
from refzarr.model.frozen import FrozenDict, freeze_json, json_equal, json_identity

NAN = float("nan")

# (a, b, equal): each value is put under one key of a FrozenDict
CASES: list[tuple[Any, Any, bool]] = [
    (1, 1, True),
    (1, 1.0, False),
    (1, True, False),
    (1.0, True, False),
    (0, False, False),
    (0, None, False),
    (None, None, True),
    ("1", 1, False),
    ("a", "a", True),
    ("é", "é", True),
    (NAN, float("nan"), True),
    (NAN, 1.0, False),
    (math.inf, math.inf, True),
    (math.inf, -math.inf, False),
    (0.0, -0.0, False),
    (-0.0, -0.0, True),
    (0.1 + 0.2, 0.3, False),
    (10**20, 1e20, False),
    (2**70, 2**70, True),
    ((1, 2), [1, 2], True),
    ((1, 2), (1, 2.0), False),
    ((1, 2), (1, 2, 3), False),
    ((NAN,), [float("nan")], True),
    ((), [], True),
    ((), None, False),
    ({"x": 1, "y": (NAN,)}, {"y": [float("nan")], "x": 1}, True),  # key order ignored
    ({"x": 1}, {"x": 1.0}, False),
    ({"x": 1}, {"x": 1, "y": None}, False),
    ({}, (), False),
    ("x", ("x",), False),
]


@pytest.mark.parametrize(("a", "b", "equal"), CASES)
def test_equality_as_json_text(a: Any, b: Any, equal: bool) -> None:
    frozen_a, frozen_b = FrozenDict({"v": freeze_json(a)}), FrozenDict({"v": freeze_json(b)})
    assert (frozen_a == frozen_b) is equal
    assert (frozen_b == frozen_a) is equal
    assert (frozen_a != frozen_b) is not equal
    assert (frozen_a == {"v": b}) is equal  # against a plain mapping, lists and dicts
    assert (json_identity(frozen_a) == json_identity(frozen_b)) is equal  # the definition
    assert json_equal(a, b) is equal
    if equal:
        assert hash(frozen_a) == hash(frozen_b)


def test_key_order_and_nesting() -> None:
    a = FrozenDict({"a": 1, "b": FrozenDict({"c": (1.5, NAN)})})
    assert a == {"b": {"c": [1.5, float("nan")]}, "a": 1}
    assert a != {"b": {"c": [1.5, float("nan")]}, "a": 1, "d": 2}
    assert a != {"b": {"d": [1.5, float("nan")]}, "a": 1}
    assert FrozenDict() == {}
    assert (a == [1]) is False  # not a mapping: not equal (NotImplemented both ways)
    assert a != "a"


def test_subclasses_of_json_types_compare_as_their_text() -> None:
    """A float or str subclass (numpy's float64, say) in a plain mapping compares as the
    JSON text it writes, as before."""

    class Text(str):
        pass

    frozen = FrozenDict({"a": 1.5, "b": "t", "c": 3})
    assert frozen == {"a": np.float64(1.5), "b": Text("t"), "c": 3}
    assert frozen != {"a": np.float64(1.25), "b": Text("t"), "c": 3}


def test_values_that_are_not_json_are_refused() -> None:
    with pytest.raises(TypeError):
        _ = FrozenDict({"a": 1}) == {"a": b"1"}


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)


@given(_json, _json)
def test_equality_is_json_text_equality(a: Any, b: Any) -> None:
    frozen_a, frozen_b = FrozenDict({"v": freeze_json(a)}), FrozenDict({"v": freeze_json(b)})
    expected = json_identity(frozen_a) == json_identity(frozen_b)
    assert (frozen_a == frozen_b) is expected
    assert json_equal(a, freeze_json(b)) is expected
    assert (frozen_a == frozen_a) is True
    assert frozen_a == FrozenDict({"v": freeze_json(a)})
    assert hash(frozen_a) == hash(FrozenDict({"v": freeze_json(a)}))


_PICKLE = """
import pickle, sys
from refzarr.model.frozen import FrozenDict
frozen = FrozenDict({"units": "K", "valid_range": (0.0, 1.5)})
hash(frozen)  # cached in the object
sys.stdout.write(pickle.dumps(frozen, protocol=5).hex())
"""


def test_hash_unpickled_from_another_process_agrees() -> None:
    """A FrozenDict hashed in a worker (another hash seed, as forkserver or spawn workers
    have) and sent back hashes as an equal one made here: the cached hash is not pickled."""
    made = run_python("-c", _PICKLE, env=child_env(PYTHONHASHSEED="1"))
    assert made.returncode == 0, made.stderr
    check = (
        "import pickle, sys\n"
        "from refzarr.model.frozen import FrozenDict\n"
        f"got = pickle.loads(bytes.fromhex({made.stdout.strip()!r}))\n"
        "here = FrozenDict({'units': 'K', 'valid_range': (0.0, 1.5)})\n"
        "assert got == here and hash(got) == hash(here), (hash(got), hash(here))\n"
        "assert here in {got}\n"
    )
    checked = run_python("-c", check, env=child_env(PYTHONHASHSEED="2"))
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("items", [{}, {"a": 1, "b": (NAN, "x")}])
def test_pickle_and_copy_round_trip(items: dict[str, Any], protocol: int) -> None:
    import copy

    frozen = freeze_json(items)
    hash(frozen)
    for again in (
        pickle.loads(pickle.dumps(frozen, protocol=protocol)),
        copy.copy(frozen),
        copy.deepcopy(frozen),
    ):
        assert again == frozen
        assert hash(again) == hash(frozen)


def test_pickles_made_before_still_load() -> None:
    """A pickle of the former state (slots as a dict, the hash in it) loads, rehashed."""
    old = FrozenDict.__new__(FrozenDict)
    old.__setstate__((None, {"_data": {"a": 1}, "_hash": 12345}))
    assert old == {"a": 1}
    assert hash(old) == hash(FrozenDict({"a": 1}))
