"""`refzarr refresh` of a set combined along a dimension its files lack (ensemble members
stacked by a coordinate from their names): the rescanned file gets the axis back."""

from __future__ import annotations

from pathlib import Path

import xarray as xr

import refzarr
from refzarr.cli import main
from sourceskit import touch_later, write_day


def test_refresh_a_stack_along_a_new_dimension(tmp_path: Path) -> None:
    members = [write_day(tmp_path / f"m{m}.nc", 0, scale=m + 1.0) for m in range(3)]
    out = tmp_path / "members.json"
    args = ["scan", str(tmp_path / "m*.nc"), "--concat-dim", "member", "-o", str(out)]
    assert main([*args, "--coord-regex", r"member=m(\d+)\.nc$"]) == 0
    before = refzarr.read(str(out))
    write_day(members[1], 0, scale=7.0)  # member 1 reprocessed in place
    touch_later(members[1])
    assert main(["refresh", str(out)]) == 0
    with refzarr.open_dataset(out) as ours:
        assert ours["v"].dims == ("member", "time", "x")
        truth = xr.open_dataset(members[1])
        got = ours["v"].isel(member=1, drop=True).load()
        xr.testing.assert_equal(got, truth["v"].load())
        assert ours["member"].values.tolist() == [0, 1, 2]
    assert refzarr.read(str(out))["v"].meta.shape == before["v"].meta.shape
