"""Property tests: any RefGroup written as JSON or Parquet reads back identical."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refzarr
from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup
from roundtrip import assert_groups_identical
from strategies import ref_arrays, ref_groups

_names = itertools.count()


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for every example (hypothesis runs many per test function)."""
    return tmp_path_factory.mktemp("hypothesis-formats")


def _target(directory: Path, suffix: str) -> Path:
    return directory / f"set-{next(_names)}{suffix}"


def _round_trip(group: RefGroup, target: Path, **options: Any) -> RefGroup:
    refzarr.write(group, target, **options)
    return refzarr.read(target)


# -- JSON ---------------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(ref_groups(), st.sampled_from([".json", ".json.zst", ".json.gz"]))
def test_json_round_trip(out_dir: Path, group: RefGroup, suffix: str) -> None:
    assert_groups_identical(_round_trip(group, _target(out_dir, suffix)), group)


@settings(max_examples=20, deadline=None)
@given(ref_groups())
def test_json_version_1_round_trip(out_dir: Path, group: RefGroup) -> None:
    assert_groups_identical(_round_trip(group, _target(out_dir, ".json"), version=1), group)


# -- Parquet ------------------------------------------------------------------------------------

# The Parquet layout cannot hold a zero-length byte range: size 0 means "the whole file".
_parquet_arrays = ref_arrays(min_length=1)


def _dot_separated(group: RefGroup) -> RefGroup:
    """The group with every array's chunk keys ``.``-separated, as the Parquet layout has them.

    fsspec's LazyReferenceMapper finds a chunk's record by splitting its key on ``.``, so the
    Parquet writer stores ``/``-separated arrays as ``.``-separated ones (same chunks).
    """
    members: dict[str, RefArray | RefGroup] = {}
    for name, member in group.members.items():
        if isinstance(member, RefGroup):
            members[name] = _dot_separated(member)
        else:
            meta = member.meta.replace(dimension_separator=".")
            members[name] = RefArray(meta, member.manifest)
    return RefGroup(attributes=group.attributes, members=members)


@settings(max_examples=30, deadline=None)
@given(ref_groups(arrays=_parquet_arrays), st.integers(1, 5))
def test_parquet_round_trip(out_dir: Path, group: RefGroup, record_size: int) -> None:
    target = _target(out_dir, ".parq")
    expected = _dot_separated(group)
    assert_groups_identical(_round_trip(group, target, record_size=record_size), expected)


def test_parquet_splits_references_into_record_files(tmp_path: Path) -> None:
    meta = ArrayMeta((10, 1), (1, 1), np.dtype("<f8"))
    manifest = ChunkManifest.from_arrays(
        ["file:///data/ünï.nc"],
        np.zeros((10, 1), int),
        np.arange(10)[:, None] * 8,
        np.full((10, 1), 8),
    )
    group = RefGroup(members={"g": RefGroup(members={"v": RefArray(meta, manifest)})})
    target = tmp_path / "refs.parq"
    assert_groups_identical(_round_trip(group, target, record_size=3), group)
    files = sorted(p.name for p in (target / "g" / "v").iterdir())
    assert files == ["refs.0.parq", "refs.1.parq", "refs.2.parq", "refs.3.parq"]


# -- awkward names and URLs, in both formats -----------------------------------------------------

_AWKWARD_NAMES = [
    "a b",
    "ünïcödé",
    "日本語",
    "#hash",
    "50%",
    "semi;colon",
    "[x]",
    "star*",
    "q?",
    "-",
]


@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_awkward_member_names(tmp_path: Path, suffix: str) -> None:
    meta = ArrayMeta((2,), (1,), np.dtype("u1"))
    manifest = ChunkManifest.from_arrays(["s3://b/k"], [0, -1], [7, 0], [1, 0])
    members = {name: RefGroup(members={name: RefArray(meta, manifest)}) for name in _AWKWARD_NAMES}
    group = RefGroup(members=members)
    assert_groups_identical(_round_trip(group, tmp_path / f"refs{suffix}"), group)


_AWKWARD_URLS = [
    "s3://bucket/with space/ü.nc",
    "https://host/a%20b?x=1&y=2#frag",
    "file:///tmp/日本/データ.h5",
    "gs://b/{braces}/{{double}}",
    'C:\\windows\\path "quoted".nc',
    "memory://\u2028line separator",
    "relative/path.nc",
]


@pytest.mark.parametrize(
    ("suffix", "options"),
    [(".json", {}), (".json", {"version": 1}), (".json.zst", {}), (".parq", {})],
)
def test_awkward_urls_and_huge_offsets(
    tmp_path: Path, suffix: str, options: dict[str, Any]
) -> None:
    n = len(_AWKWARD_URLS)
    offsets = [2**63 - 1 - k for k in range(n)]
    manifest = ChunkManifest.from_arrays(_AWKWARD_URLS, np.arange(n), offsets, offsets[::-1])
    group = RefGroup(members={"v": RefArray(ArrayMeta((n,), (1,), np.dtype("u1")), manifest)})
    assert_groups_identical(_round_trip(group, tmp_path / f"refs{suffix}", **options), group)
