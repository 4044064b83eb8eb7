"""combine runs with the cyclic garbage collector paused (its thousands of lasting objects
would set off collections walking everything the caller holds) and turns it back on after,
also when it fails, and leaves it off when the caller had turned it off."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit import daily, scan_all, write_nc

import refzarr
from refzarr import FromCallable, IncompatibleError


@pytest.fixture
def groups(tmp_path: Path) -> list[refzarr.RefGroup]:
    paths = [write_nc(daily("2000-01-01", 1, seed=d), tmp_path / f"d{d}.nc") for d in range(2)]
    return scan_all(paths)


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    yield
    gc.enable()


def _member(seen: list[bool]) -> FromCallable:
    def value(url: str | None, group: refzarr.RefGroup) -> Any:
        seen.append(gc.isenabled())
        return len(seen)

    return FromCallable(value)


def test_paused_during_and_on_after(groups: list[refzarr.RefGroup]) -> None:
    seen: list[bool] = []
    refzarr.combine(groups, concat_dims="member", coords={"member": _member(seen)})
    assert seen == [False, False]
    assert gc.isenabled()


def test_on_after_a_failure(groups: list[refzarr.RefGroup]) -> None:
    with pytest.raises(IncompatibleError):
        refzarr.combine([groups[0], groups[0]], concat_dims="time")
    assert gc.isenabled()


def test_left_off_when_the_caller_had_it_off(groups: list[refzarr.RefGroup]) -> None:
    gc.disable()
    refzarr.combine(groups, concat_dims="member", coords={"member": _member([])})
    assert not gc.isenabled()
