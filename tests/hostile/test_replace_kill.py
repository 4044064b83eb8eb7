"""Replacing a reference set, killed at every step: the target always holds the old set or the
new one (readable by refzarr and by fsspec's ReferenceFileSystem), and the next write removes
what the dead writer left (or puts back a set it had moved aside)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr

import refzarr
from childkit import run_python
from refzarr.formats import atomic
from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup
from roundtrip import open_zarr_group

STEPS = {"exchange": ["written", "exchanged"], "fallback": ["written", "set aside", "moved in"]}
SOURCE = "/data/source.nc"

# a child process writes version 2 over version 1 and dies (os._exit) at one step
CHILD = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    import refzarr
    from refzarr.formats import atomic
    from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup

    target, step = sys.argv[1], sys.argv[2]
    manifest = ChunkManifest.from_arrays(["{source}"], np.zeros(4, np.int32), [2] * 4, [8] * 4)
    meta = ArrayMeta(shape=(4,), chunks=(1,), dtype=np.dtype("<i8"))
    group = RefGroup(attributes={{"version": 2}}, members={{"x": RefArray(meta, manifest)}})
    def die(name):
        if name == step:
            os._exit(17)
    atomic.fault_hook = die
    refzarr.write(group, target, record_size=2)
    """
).format(source=SOURCE)


def version(n: int) -> RefGroup:
    manifest = ChunkManifest.from_arrays([SOURCE], np.zeros(4, np.int32), [n] * 4, [8] * 4)
    meta = ArrayMeta(shape=(4,), chunks=(1,), dtype=np.dtype("<i8"))
    return RefGroup(attributes={"version": n}, members={"x": RefArray(meta, manifest)})


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


def held_version(target: Path) -> int:
    """The version at ``target``, read by refzarr and by fsspec + zarr (they must agree)."""
    ours = refzarr.read(target).attributes["version"]
    group = open_zarr_group(str(target))
    assert isinstance(group, zarr.Group)
    assert group.attrs["version"] == ours
    return int(ours)


@pytest.mark.parametrize(("mode", "step"), [(m, s) for m, steps in STEPS.items() for s in steps])
def test_killed_replace_leaves_a_set_and_is_recovered(tmp_path: Path, mode: str, step: str) -> None:
    target = tmp_path / "refs.parq"
    refzarr.write(version(1), target, record_size=2)
    env = {"REFZARR_NO_EXCHANGE": "1"} if mode == "fallback" else {}
    done = run_python("-c", CHILD, str(target), step, env=env)
    assert done.returncode == 17, done.stderr[-2000:]  # died at that step
    assert leftovers(tmp_path)  # what it left behind
    if mode == "fallback" and step == "set aside":
        # the one moment a filesystem without an atomic exchange shows nothing at the target
        assert not target.exists()
    else:
        assert held_version(target) == (2 if step in ("exchanged", "moved in") else 1)
    refzarr.write(version(3), target, record_size=2)
    assert held_version(target) == 3
    assert leftovers(tmp_path) == []


def test_the_set_moved_aside_is_put_back_by_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "refs.parq"
    refzarr.write(version(1), target)
    os.rename(target, f"{target}.old-0123456789ab")
    atomic.clean_leftovers(str(target))
    assert held_version(target) == 1
    assert leftovers(tmp_path) == []


def test_a_live_writers_temporary_is_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "refs.parq"
    seen: list[list[str]] = []

    def meanwhile(step: str) -> None:
        if step == "written":  # another write of the same set, while this one runs
            atomic.fault_hook = None
            refzarr.write(version(5), target)
            seen.append(leftovers(tmp_path))

    refzarr.write(version(1), target)
    atomic.fault_hook = meanwhile
    try:
        refzarr.write(version(2), target)
    finally:
        atomic.fault_hook = None
    assert len(seen[0]) == 1  # the outer writer's temporary survived the inner one's cleaning
    assert refzarr.read(target).attributes["version"] == 2
    assert leftovers(tmp_path) == []


def test_a_failed_exchange_keeps_the_old_set(tmp_path: Path) -> None:
    target = tmp_path / "refs.parq"
    refzarr.write(version(1), target)

    def fail(step: str) -> None:
        if step == "written":
            raise OSError("disk full")

    atomic.fault_hook = fail
    try:
        with pytest.raises(OSError, match="disk full"):
            refzarr.write(version(2), target)
    finally:
        atomic.fault_hook = None
    assert held_version(target) == 1
    assert leftovers(tmp_path) == []


def test_a_killed_json_write_is_cleaned_on_demand(tmp_path: Path) -> None:
    target = tmp_path / "refs.json"
    refzarr.write(version(1), target)
    stale = tmp_path / "refs.json.tmp-0123456789ab"
    stale.write_bytes(b"{")
    refzarr.write(version(2), target)
    assert stale.exists()  # file writes do not list their folder
    atomic.clean_leftovers(str(target))
    assert not stale.exists()
    assert refzarr.read(target).attributes["version"] == 2
