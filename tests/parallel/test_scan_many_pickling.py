"""What `scan_many`'s workers send back: their manifests unpickle without being checked
again (within `trusted_pickling` only), equal to what was sent; any other pickle of a
manifest is still checked."""

from __future__ import annotations

import gc
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import refzarr
from refzarr import ChunkManifest, RefFormatError
from refzarr.model import ManifestBlock
from refzarr.model.manifest import trusted_pickling
from refzarr.parallel.batches import BatchScanner, Outcomes
from strategies import manifests


def _trusted_copy(m: ChunkManifest) -> ChunkManifest:
    with trusted_pickling():
        data = pickle.dumps(m)
    copy: ChunkManifest = pickle.loads(data)
    return copy


@settings(max_examples=40, deadline=None)
@given(manifests())
def test_trusted_round_trip_equals(m: ChunkManifest) -> None:
    copy = _trusted_copy(m)
    assert copy == m
    assert copy.paths == m.paths
    for block in copy.iter_blocks():
        assert not block.path_id.flags.writeable
        assert not block.offset.flags.writeable
        assert not block.length.flags.writeable
        with pytest.raises(TypeError):
            block.inlined[0] = b""  # type: ignore[index]


def _bad_block() -> ManifestBlock:
    """A block no constructor makes: a path id past its path table."""
    block = object.__new__(ManifestBlock)
    for name, value in (
        ("start", 0),
        ("paths", ("a.nc",)),
        ("path_id", np.array([3], np.int32)),
        ("offset", np.zeros(1, np.uint64)),
        ("length", np.ones(1, np.uint64)),
        ("inlined", {}),
    ):
        object.__setattr__(block, name, value)
    return block


def test_other_pickles_are_still_checked() -> None:
    data = pickle.dumps(_bad_block())
    with pytest.raises(RefFormatError, match="path ids"):
        pickle.loads(data)
    with trusted_pickling():
        pass
    with pytest.raises(RefFormatError, match="path ids"):  # the flag did not stay on
        pickle.loads(pickle.dumps(_bad_block()))


def test_outcomes_pickle_to_the_groups_scanned(daily: list[Path]) -> None:
    outcomes = BatchScanner({}, "skip")([*map(str, daily), str(daily[0]) + ".missing"])
    assert isinstance(outcomes, Outcomes)
    copy = pickle.loads(pickle.dumps(outcomes))
    assert type(copy) is list
    assert copy[:-1] == outcomes[:-1] == [refzarr.scan(p) for p in daily]
    assert [g.sources for g in copy[:-1]] == [g.sources for g in outcomes[:-1]]
    assert copy[-1].url == outcomes[-1].url
    assert gc.isenabled()
    gc.disable()
    try:
        pickle.loads(pickle.dumps(outcomes))
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()
