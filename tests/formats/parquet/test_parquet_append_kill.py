"""An append to a Parquet set killed at every step: the target holds the old set, byte for
byte, or the appended one (readable by refzarr and by fsspec + zarr), never a mix; the next
append recycles or removes what the dead writer left, puts back a set it had moved aside, and
succeeds."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from appendkit import leftovers, synthetic_file

import refzarr
from childkit import run_python
from roundtrip import open_zarr_group

STEPS = {
    "exchange": ["linked", "appended", "written", "exchanged"],
    # without an atomic exchange (the steps before "written" are the same in both modes)
    "fallback": ["set aside", "moved in"],
}
AFTER = {"exchanged", "moved in"}  # steps after which the appended set stands at the target

CHILD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    import refzarr
    from refzarr.formats import atomic
    from appendkit import synthetic_file

    folder, target, step = sys.argv[1:4]
    def die(name):
        if name == step:
            os._exit(17)
    atomic.fault_hook = die
    refzarr.write(synthetic_file(Path(folder), 3, 2), target, append_dim="time")
    """
)


def snapshot(target: Path) -> dict[str, bytes]:
    return {
        str(Path(folder, name).relative_to(target)): Path(folder, name).read_bytes()
        for folder, _, names in os.walk(target)
        for name in names
    }


def held_length(target: Path) -> int:
    """The length of ``time`` at ``target``, read by refzarr and by fsspec + zarr alike."""
    ours = refzarr.read(target)["x"].shape[0]  # type: ignore[union-attr]
    assert open_zarr_group(str(target))["x"].shape[0] == ours
    return int(ours)


@pytest.mark.filterwarnings(
    "ignore:The 'fastparquet' engine is deprecated:pandas.errors.Pandas4Warning"
)
@pytest.mark.parametrize(("mode", "step"), [(m, s) for m, steps in STEPS.items() for s in steps])
def test_killed_append_leaves_a_whole_set(tmp_path: Path, mode: str, step: str) -> None:
    target = tmp_path / "refs.parq"
    data = tmp_path / "data"
    data.mkdir()
    old = refzarr.combine(
        [synthetic_file(data, 0, 2), synthetic_file(data, 2, 1)], concat_dims=["time"]
    )
    refzarr.write(old, target, record_size=2)
    before = snapshot(target)
    env = {"REFZARR_NO_EXCHANGE": "1"} if mode == "fallback" else {}
    done = run_python("-c", CHILD, str(data), str(target), step, env=env)
    assert done.returncode == 17, done.stderr[-2000:]  # died at that step
    assert leftovers(tmp_path)
    if mode == "fallback" and step == "set aside":
        assert not target.exists()  # only without an atomic exchange: the old set aside
    elif step in AFTER:
        assert held_length(target) == 5
    else:
        assert snapshot(target) == before  # the old set, not one byte changed
        assert held_length(target) == 3
    # the next append cleans up (and puts back a set moved aside) before it reads the set
    added = synthetic_file(data, 3, 2) if step not in AFTER else synthetic_file(data, 5, 1)
    refzarr.write(added, target, append_dim="time")
    assert leftovers(tmp_path, spare=True) == []  # the dead writer's directory recycled
    assert held_length(target) == (5 if step not in AFTER else 6)
    parts = [synthetic_file(data, 0, 2), synthetic_file(data, 2, 1), synthetic_file(data, 3, 2)]
    if step in AFTER:
        parts.append(synthetic_file(data, 5, 1))
    assert refzarr.read(target) == refzarr.combine(parts, concat_dims=["time"])
