"""`refzarr.write`, `refzarr.to_icechunk` and the CLI's Icechunk commit say what they wrote
(`refzarr.WriteResult`): the target, the format, the set's dimension lengths after the
write, the references given, whether it was an append; JSON, Parquet (only the changed
record files, and the whole set rewritten) and Icechunk, new sets and appends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import refzarr
from dailykit import GRID, write_days
from refzarr import RefGroup, WriteResult

LAT, LON = GRID


def _references(group: RefGroup) -> int:
    return sum(array.manifest.count_written() for _, array in group.arrays())


def _days(tmp_path: Path, count: int) -> list[RefGroup]:
    return [refzarr.scan(path) for path in write_days(tmp_path / "archive", count)]


def _write(kind: str, group: RefGroup, target: Path, **how: Any) -> WriteResult:
    if kind == "icechunk":
        from refzarr.formats.icechunk.repository import commit_written

        _, result = commit_written(group, target, **how)
        return result
    return refzarr.write(group, target, **how)


def _length_read_back(kind: str, target: Path) -> int:
    if kind == "icechunk":
        import zarr

        from refzarr.formats.icechunk.repository import open_repository

        session = open_repository(str(target), None).readonly_session(branch="main")
        return int(zarr.open_array(session.store, path="time", mode="r").shape[0])
    time = refzarr.read(target)["time"]
    assert isinstance(time, refzarr.RefArray)
    return time.meta.shape[0]


KINDS = ["json", "parquet", "icechunk"]
TARGETS = {"json": "set.json", "parquet": "set.parq", "icechunk": "repo"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_set(tmp_path: Path, kind: str) -> None:
    if kind == "icechunk":
        pytest.importorskip("icechunk")
    group = refzarr.combine(_days(tmp_path, 3), concat_dims="time")
    target = tmp_path / TARGETS[kind]
    result = _write(kind, group, target)
    assert result == WriteResult(
        target=str(target),
        format=kind,  # type: ignore[arg-type]
        dims={"time": 3, "lat": LAT, "lon": LON},
        references=_references(group),
    )
    assert result.references >= 3  # air's three chunks at least
    assert _length_read_back(kind, target) == 3


@pytest.mark.parametrize(
    ("kind", "record_size"),
    [("json", None), ("parquet", None), ("parquet", 2), ("icechunk", None)],
)
def test_an_append_reports_the_new_length(
    tmp_path: Path, kind: str, record_size: int | None
) -> None:
    """Parquet with one record file per array and with several (record_size 2: the
    appended chunks go into the last, partial record file and a new one)."""
    if kind == "icechunk":
        pytest.importorskip("icechunk")
    days = _days(tmp_path, 5)
    target = tmp_path / TARGETS[kind]
    sized = {} if record_size is None else {"record_size": record_size}
    _write(kind, refzarr.combine(days[:3], concat_dims="time"), target, **sized)
    more = refzarr.combine(days[3:], concat_dims="time")
    result = _write(kind, more, target, append_dim="time")
    assert result == WriteResult(
        target=str(target),
        format=kind,  # type: ignore[arg-type]
        dims={"time": 5, "lat": LAT, "lon": LON},
        references=_references(more),
        append_dim="time",
        appended=True,
    )
    assert _length_read_back(kind, target) == 5


@pytest.mark.parametrize("kind", KINDS)
def test_an_append_to_nothing_is_a_new_set(tmp_path: Path, kind: str) -> None:
    if kind == "icechunk":
        pytest.importorskip("icechunk")
    group = refzarr.combine(_days(tmp_path, 2), concat_dims="time")
    target = tmp_path / TARGETS[kind]
    result = _write(kind, group, target, append_dim="time")
    assert result.dims["time"] == 2
    assert (result.append_dim, result.appended) == ("time", False)


def test_parquet_rewritten_whole_says_the_same(tmp_path: Path) -> None:
    """An append Parquet cannot make by new record files alone (a different record_size)
    rewrites the set: its result is the same as the fast path's."""
    from refzarr.formats.api import locate
    from refzarr.formats.parquet.append import append_parquet

    days = _days(tmp_path, 4)
    target = tmp_path / "set.parq"
    refzarr.write(refzarr.combine(days[:2], concat_dims="time"), target)
    more = refzarr.combine(days[2:], concat_dims="time")
    outcome = append_parquet(
        more,
        locate(str(target), None),
        target=str(target),
        append_dim="time",
        record_size=None,
        storage_options=None,
        fast=False,
    )
    assert not outcome.fast
    assert outcome.result.dims == {"time": 4, "lat": LAT, "lon": LON}
    assert (outcome.result.appended, outcome.result.references) == (True, _references(more))


def test_to_icechunk_returns_what_it_wrote(tmp_path: Path) -> None:
    """`refzarr.to_icechunk` into a session: ``target`` is the path in the store."""
    pytest.importorskip("icechunk")
    from refzarr.formats.icechunk.repository import open_repository, source_prefixes

    days = _days(tmp_path, 3)
    group = refzarr.combine(days[:2], concat_dims="time")
    repo = open_repository(str(tmp_path / "repo"), None, None, source_prefixes(group), create=True)
    session = repo.writable_session("main")
    result = refzarr.to_icechunk(group, session.store, path="daily")
    assert (result.target, result.format, result.dims["time"]) == ("daily", "icechunk", 2)
    result = refzarr.to_icechunk(days[2], session.store, path="daily", append_dim="time")
    assert (result.dims["time"], result.appended) == (3, True)


def test_dims_prefer_the_coordinate() -> None:
    """In a hierarchy whose groups give one name different lengths, the coordinate's length
    (the shallowest) is the dimension's."""
    from refzarr.formats.written import dimension_lengths

    shapes = [
        ("a/b/x", ("x",), (9,)),
        ("g/data", ("x", "y"), (7, 2)),
        ("g/x", ("x",), (4,)),
        ("x", ("x",), (5,)),
        ("y2", ("y",), (3,)),
        ("nameless", (), (6,)),
    ]
    assert dimension_lengths(shapes) == {"x": 5, "y": 3}


def test_a_result_is_read_only_hashable_and_picklable() -> None:
    import pickle

    result = WriteResult("set.json", "json", {"time": 3}, 6, "time", True)
    assert pickle.loads(pickle.dumps(result)) == result
    assert hash(result) == hash(WriteResult("set.json", "json", {"time": 3}, 6, "time", True))
    with pytest.raises(TypeError):
        result.dims["time"] = 4  # type: ignore[index]
