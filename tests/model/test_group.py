"""RefArray and RefGroup: construction checks, immutability, equality, navigation."""

from __future__ import annotations

import datetime
import pickle
from dataclasses import FrozenInstanceError
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from refzarr import ArrayMeta, ChunkManifest, RefArray, RefFormatError, RefGroup
from strategies import ref_groups


def _array(shape: tuple[int, ...] = (4,), chunks: tuple[int, ...] = (2,)) -> RefArray:
    meta = ArrayMeta(shape, chunks, np.dtype("<i2"))
    return RefArray(meta, ChunkManifest.missing(meta.grid_shape))


def _tree() -> RefGroup:
    """/a (array), /g/b (array), /g/h (empty group), /z (array)."""
    inner = RefGroup(members={"b": _array(), "h": RefGroup()})
    return RefGroup(attributes={"title": "t"}, members={"z": _array(), "a": _array(), "g": inner})


# -- RefArray -----------------------------------------------------------------------------------


def test_array_manifest_must_match_the_chunk_grid() -> None:
    meta = ArrayMeta((5, 4), (2, 4), np.dtype("u1"))
    with pytest.raises(
        RefFormatError,
        match=r"manifest grid \(2, 1\) does not match the chunk grid \(3, 1\) of shape \(5, 4\) "
        r"with chunks \(2, 4\)",
    ):
        RefArray(meta, ChunkManifest.missing((2, 1)))


@pytest.mark.parametrize(
    ("meta", "manifest", "message"),
    [
        ({"shape": (1,)}, ChunkManifest.missing((1,)), "meta must be an ArrayMeta, got dict"),
        (None, "manifest", "manifest must be a ChunkManifest, got str"),
    ],
)
def test_array_parts_must_have_the_right_types(meta: Any, manifest: Any, message: str) -> None:
    meta = meta if meta is not None else ArrayMeta((1,), (1,), np.dtype("u1"))
    with pytest.raises(TypeError, match=message):
        RefArray(meta, manifest)


def test_array_is_frozen_and_unhashable() -> None:
    array = _array()
    assert array.shape == (4,)
    with pytest.raises(FrozenInstanceError):
        array.meta = array.meta  # type: ignore[misc]
    with pytest.raises(TypeError):
        hash(array)


def test_arrays_compare_meta_and_manifest() -> None:
    assert _array() == _array()
    assert _array() != _array(chunks=(4,))
    other = RefArray(_array().meta, ChunkManifest.from_arrays(["u"], [0, -1], [0, 0], [1, 0]))
    assert _array() != other
    assert _array() != "array"


# -- RefGroup construction ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "a/b", "/a", ".", ".."])
def test_member_names_must_be_plain(name: str) -> None:
    with pytest.raises(RefFormatError, match="member name must be a non-empty str without '/'"):
        RefGroup(members={name: _array()})


@pytest.mark.parametrize(
    "name", [".zarray", ".zgroup", ".zattrs", ".zmetadata", ".zx", "zarr.json"]
)
def test_member_names_must_not_look_like_metadata(name: str) -> None:
    with pytest.raises(RefFormatError, match=f"member name '{name}' collides with Zarr metadata"):
        RefGroup(members={name: _array()})


def test_member_names_must_be_str() -> None:
    with pytest.raises(RefFormatError, match="member name must be a non-empty str"):
        RefGroup(members={1: _array()})  # type: ignore[dict-item]


@pytest.mark.parametrize("member", [{"shape": [1]}, _array().meta, None])
def test_members_must_be_arrays_or_groups(member: Any) -> None:
    with pytest.raises(TypeError, match="member 'm' must be a RefArray or RefGroup"):
        RefGroup(members={"m": member})


def test_group_attributes_must_be_json() -> None:
    with pytest.raises(TypeError, match=r"attributes\['when'\]: date is not a JSON value"):
        RefGroup(attributes={"when": datetime.date(2000, 1, 1)})


@pytest.mark.parametrize("name", ["ü", "données 1", "0", "a.b", ".hidden", "日本", "z" * 200])
def test_unusual_but_valid_member_names(name: str) -> None:
    assert RefGroup(members={name: _array()})[name] == _array()


# -- immutability -------------------------------------------------------------------------------


def test_group_is_frozen() -> None:
    group = _tree()
    with pytest.raises(FrozenInstanceError):
        group.members = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        group.members["new"] = _array()  # type: ignore[index]
    with pytest.raises(TypeError):
        group.attributes["title"] = "changed"  # type: ignore[index]


def test_group_copies_its_inputs() -> None:
    members: dict[str, Any] = {"a": _array()}
    attributes: dict[str, Any] = {"tags": ["x"]}
    group = RefGroup(attributes=attributes, members=members)
    members["b"] = _array()
    attributes["tags"].append("y")
    assert list(group.members) == ["a"]
    assert group.attributes == {"tags": ["x"]}


def test_group_pickles() -> None:
    group = _tree()
    assert pickle.loads(pickle.dumps(group)) == group


@settings(max_examples=15, deadline=None)
@given(ref_groups())
def test_any_group_pickles(group: RefGroup) -> None:
    assert pickle.loads(pickle.dumps(group)) == group


def test_dask_token_is_kept_per_group_and_never_pickles_the_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dask.base import tokenize

    sources = {"files": {f"/d/{k}.nc": {"size": k} for k in range(50)}}
    group = RefGroup(attributes={"t": 1}, members={"a": _array()}, sources=sources)
    other = RefGroup(attributes={"t": 1}, members={"a": _array()}, sources=sources)

    def no_pickling(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the group was pickled to be tokenized")

    monkeypatch.setattr(pickle, "dumps", no_pickling)
    token = tokenize(group)
    assert tokenize(group) == token  # the same group: the same token
    assert tokenize(other) != token  # another group, even an equal one: another token
    monkeypatch.undo()
    copy = pickle.loads(pickle.dumps(group))  # a new object: a token of its own
    assert copy == group
    assert tokenize(copy) != token
    assert pickle.loads(pickle.dumps(group)) == group  # once tokenized, it still pickles


def test_groups_made_without_init_pickle_and_tokenize() -> None:
    """Scanners build groups as unpickling does (no ``__init__``): the token is unset there,
    and neither pickling nor tokenizing may ask for it."""
    from dask.base import tokenize

    from refzarr.scan.result import ScannedGroup

    made = object.__new__(ScannedGroup)
    made.__setstate__({"attributes": {}, "members": {}, "sources": None, "skipped": ()})  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(made)) == RefGroup()
    assert tokenize(made) == tokenize(made)


# -- equality -----------------------------------------------------------------------------------


def test_member_and_attribute_order_do_not_matter() -> None:
    a = RefGroup(attributes={"x": 1, "y": 2}, members={"p": _array(), "q": RefGroup()})
    b = RefGroup(attributes={"y": 2, "x": 1}, members={"q": RefGroup(), "p": _array()})
    assert a == b


@pytest.mark.parametrize(
    "other",
    [
        RefGroup(attributes={"x": 1.0}, members={"p": _array()}),
        RefGroup(attributes={"x": True}, members={"p": _array()}),
        RefGroup(attributes={"x": 1}, members={"p": RefGroup()}),
        RefGroup(attributes={"x": 1}, members={"P": _array()}),
        RefGroup(attributes={"x": 1}, members={"p": _array(), "q": RefGroup()}),
        RefGroup(attributes={"x": 1}),
    ],
)
def test_any_difference_makes_groups_unequal(other: RefGroup) -> None:
    assert RefGroup(attributes={"x": 1}, members={"p": _array()}) != other


def test_nan_attributes_are_equal() -> None:
    assert RefGroup(attributes={"v": float("nan")}) == RefGroup(attributes={"v": np.nan})


def test_groups_are_unhashable() -> None:
    with pytest.raises(TypeError):
        hash(RefGroup())


# -- navigation ---------------------------------------------------------------------------------


def test_getitem_reaches_into_subgroups() -> None:
    group = _tree()
    assert group["a"] == _array()
    assert group["g/b"] == _array()
    assert group["/g/h/"] == RefGroup()
    assert isinstance(group["g"], RefGroup)


@pytest.mark.parametrize("path", ["missing", "g/missing", "a/b", "g/b/c", "", "g//b"])
def test_getitem_raises_key_error_for_absent_paths(path: str) -> None:
    with pytest.raises(KeyError):
        _tree()[path]


def test_contains() -> None:
    group = _tree()
    assert "g/b" in group
    assert "g/x" not in group
    assert "a/0" not in group


def test_arrays_are_listed_depth_first_in_member_order() -> None:
    assert [path for path, _ in _tree().arrays()] == ["z", "a", "g/b"]


def test_groups_are_listed_with_the_root_first() -> None:
    assert [path for path, _ in _tree().groups()] == ["", "g", "g/h"]


def test_repr_summarises() -> None:
    lines = repr(_tree()).splitlines()
    assert lines[0] == "<RefGroup: 3 arrays, 2 groups>"
    assert [line.split()[0] for line in lines[1:4]] == ["z", "a", "g/"]


def test_repr_stays_short() -> None:
    """A scan's repr is a summary (issue 13: it printed 2,000 characters)."""
    many = RefGroup({f"a{k}": k for k in range(50)}, {f"v{k}": _array() for k in range(40)})
    text = repr(many)
    assert len(text.splitlines()) == 15
    assert "... and 28 more members" in text
    assert len(text) < 1500
