"""Atomic outputs through a path holding a symbolic link and ``..``: the leftovers judged
are those beside the target the system opens, not those beside the text-collapsed path."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import refzarr
from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup

pytestmark = pytest.mark.skipif(os.name != "posix", reason="symbolic links and flock")


def _group(value: int) -> RefGroup:
    manifest = ChunkManifest.from_arrays(["memory://x"], np.zeros(2, np.int32), [0, 8], [8, 8])
    meta = ArrayMeta(shape=(2,), chunks=(1,), dtype=np.dtype("<i8"))
    return RefGroup(attributes={"v": value}, members={"x": RefArray(meta, manifest)})


def test_leftovers_beside_the_target_the_system_opens(tmp_path: Path) -> None:
    """``b/link/../x.parq`` is ``a/x.parq`` when ``b/link`` points at ``a/real``: a dead
    writer's temporary beside ``a/x.parq`` is removed; ``b/x.parq``'s set aside by another
    dead writer is left alone (it was put back at ``a/x.parq`` and then replaced: lost)."""
    (tmp_path / "a" / "real").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "link").symlink_to(tmp_path / "a" / "real")
    dead_temporary = tmp_path / "a" / "x.parq.tmp-0123456789ab"
    dead_temporary.mkdir()
    other = tmp_path / "b" / "x.parq.old-0123456789ab"  # another set, moved aside
    refzarr.write(_group(1), other, format="parquet")
    refzarr.write(_group(2), tmp_path / "b" / "link" / ".." / "x.parq")
    assert refzarr.read(tmp_path / "a" / "x.parq") == _group(2)
    assert not dead_temporary.exists()
    assert refzarr.read(other) == _group(1)  # no suffix: a directory holding .zmetadata
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["link", other.name]


def test_the_lock_is_on_the_target_the_system_opens(tmp_path: Path) -> None:
    """A writer reaching ``a/x.json`` as ``b/link/../x.json`` holds the lock another writer
    naming ``a/x.json`` waits for (not the lock of a ``b/x.json``)."""
    import fcntl

    from refzarr.formats.source import locate
    from refzarr.formats.target_lock import target_lock

    (tmp_path / "a" / "real").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "link").symlink_to(tmp_path / "a" / "real")
    refzarr.write(_group(1), tmp_path / "a" / "x.json")
    with target_lock(locate(str(tmp_path / "b" / "link" / ".." / "x.json"), None)):
        handle = os.open(tmp_path / "a" / "x.json", os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(handle)
