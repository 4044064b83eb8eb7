"""Appending to Parquet reference sets: only the changed record files are written (the others
stay the same files, hard-linked), the result equals combining everything at once and reads
alike through refzarr and through fsspec + zarr; what the fast path cannot do falls back to
rewriting the whole set, and what does not fit raises with the old set untouched."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xarray as xr
from appendkit import PATH_LOGGER, leftovers, path_taken, synthetic_file

import refzarr
from dailykit import write_days
from refzarr import RefArray, RefGroup
from roundtrip import open_zarr_group

pytestmark = pytest.mark.filterwarnings(
    # fsspec's LazyReferenceMapper reads Parquet references with pandas' fastparquet engine
    "ignore:The 'fastparquet' engine is deprecated:pandas.errors.Pandas4Warning"
)


@pytest.fixture(autouse=True)
def _log_paths(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=PATH_LOGGER)


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory) -> list[RefGroup]:
    return [refzarr.scan(p) for p in write_days(tmp_path_factory.mktemp("days"), 12)]


def combined(groups: list[RefGroup]) -> RefGroup:
    return refzarr.combine(groups, concat_dims=["time"])


def files(target: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of a set: relative path -> (inode, bytes)."""
    out = {}
    for folder, _, names in os.walk(target):
        for name in names:
            path = Path(folder, name)
            out[str(path.relative_to(target))] = (path.stat().st_ino, path.read_bytes())
    return out


def assert_reads_like(target: Path, expected: RefGroup, tmp_path: Path) -> None:
    """refzarr reads ``expected`` back; fsspec + zarr read what they read from a JSON set
    written from ``expected``."""
    assert refzarr.read(target) == expected
    xr.testing.assert_identical(
        refzarr.open_dataset(target).load(), refzarr.open_dataset(expected).load()
    )
    reference = tmp_path / "expected.json"
    refzarr.write(expected, reference)
    got, want = open_zarr_group(str(target)), open_zarr_group(str(reference))
    assert sorted(got.array_keys()) == sorted(want.array_keys())
    for name in want.array_keys():
        np.testing.assert_array_equal(got[name][:], want[name][:])  # NaN equals NaN
        assert got[name].dtype == want[name].dtype


# -- the fast path ----------------------------------------------------------------------------


@pytest.mark.parametrize("record_size", [2, 3])
def test_appends_in_steps_write_only_changed_records(
    tmp_path: Path, days: list[RefGroup], record_size: int, caplog: pytest.LogCaptureFixture
) -> None:
    # record_size 2: 3 -> 4 fills the last record, 4 -> 6 starts after an exactly full one,
    # 9 -> 12 crosses a record boundary; record_size 3 the other way round
    target = tmp_path / "refs.parq"
    refzarr.write(combined(days[:3]), target, record_size=record_size)
    held = 3
    for end in (4, 6, 9, 12):
        before = files(target)
        refzarr.write(combined(days[held:end]), target, append_dim="time")
        assert path_taken(caplog) == "fast"
        assert_reads_like(target, combined(days[:end]), tmp_path)
        after = files(target)
        unchanged = {k for k in before if k in after and before[k][0] == after[k][0]}
        first = held // record_size  # the first record of `air` the append changes
        kept = {f"air/refs.{n}.parq" for n in range(first)} | {"lat/refs.0.parq"}
        assert unchanged == kept | {"lon/refs.0.parq"}  # the same files: hard links
        assert set(after) - set(before) == {
            f"air/refs.{n}.parq" for n in range(-(-held // record_size), -(-end // record_size))
        }
        assert json.loads((target / ".zmetadata").read_bytes())["record_size"] == record_size
        # the set this append replaced stays beside it, for the next append to recycle
        assert len(leftovers(tmp_path)) == 1
        assert leftovers(tmp_path, spare=True) == []
        held = end
    refzarr.write(combined(days[:12]), target, record_size=record_size)  # not an append
    assert leftovers(tmp_path) == []


def appended_once(tmp_path: Path, days: list[RefGroup]) -> tuple[Path, Path]:
    """A set of 3 days (record_size 2) with a 4th appended: the set and the directory the
    append left beside it for the next one to recycle."""
    target = tmp_path / "refs.parq"
    refzarr.write(combined(days[:3]), target, record_size=2)
    refzarr.write(days[3], target, append_dim="time")
    (spare,) = (tmp_path / name for name in leftovers(tmp_path))
    return target, spare


def test_a_recycled_directory_keeps_only_links_to_the_set(
    tmp_path: Path, days: list[RefGroup], caplog: pytest.LogCaptureFixture
) -> None:
    target, spare = appended_once(tmp_path, days)
    # what the next append must not keep: a file of the set's name but other bytes, a symlink
    # to the set's file, the names it writes anew, a folder the set does not have
    (spare / "lat" / "refs.0.parq").unlink()
    (spare / "lat" / "refs.0.parq").write_bytes(b"not the set's file")
    (spare / "air" / "refs.0.parq").unlink()
    (spare / "air" / "refs.0.parq").symlink_to(target / "air" / "refs.0.parq")
    (spare / "air" / "refs.2.parq").write_bytes(b"junk")
    (spare / "junk" / "deeper").mkdir(parents=True)
    (spare / "junk" / "deeper" / "file").write_bytes(b"junk")
    before = files(target)
    refzarr.write(combined(days[4:6]), target, append_dim="time")
    assert path_taken(caplog) == "fast"
    assert not spare.exists() or leftovers(tmp_path) == [spare.name]
    assert_reads_like(target, combined(days[:6]), tmp_path)
    after = files(target)
    assert set(after) == set(before) | {"air/refs.2.parq"}
    for name in ("lat/refs.0.parq", "lon/refs.0.parq", "air/refs.0.parq"):
        assert after[name] == before[name]  # the same file (inode), hard-linked
    assert not any(path.is_symlink() for path in target.rglob("*"))


def test_a_directory_another_writer_holds_is_not_recycled(
    tmp_path: Path, days: list[RefGroup], caplog: pytest.LogCaptureFixture
) -> None:
    import fcntl

    target, held = appended_once(tmp_path, days)
    handle = os.open(held, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)  # as a writer still running holds its temporary
        listing = sorted(os.listdir(held))
        refzarr.write(days[4], target, append_dim="time")
        assert path_taken(caplog) == "fast"
        assert sorted(os.listdir(held)) == listing
        assert len(leftovers(tmp_path)) == 2
    finally:
        os.close(handle)
    refzarr.write(combined(days[5:7]), target, append_dim="time")
    assert leftovers(tmp_path, spare=True) == []
    assert_reads_like(target, combined(days[:7]), tmp_path)


@pytest.mark.parametrize("durable", [False, True])
def test_durable_appends_flush_the_new_set_others_nothing(
    tmp_path: Path,
    days: list[RefGroup],
    durable: bool,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    target = tmp_path / "refs.parq"
    refzarr.write(combined(days[:3]), target, record_size=2)
    flushed: list[str] = []
    fsync = os.fsync

    def spy(handle: int) -> None:
        flushed.append(os.readlink(f"/proc/self/fd/{handle}"))
        fsync(handle)

    monkeypatch.setattr(os, "fsync", spy)
    refzarr.write(days[3], target, append_dim="time", durable=durable)
    monkeypatch.undo()
    assert path_taken(caplog) == "fast"
    if durable:  # every file and directory of the new set, then the exchange
        every = [target, *target.rglob("*")]
        assert len(flushed) == len(every) + 1
        assert flushed[-1] == str(tmp_path)
    else:
        assert flushed == []
    assert_reads_like(target, combined(days[:4]), tmp_path)


def test_a_partial_last_chunk_of_the_new_data(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "refs.parq"
    refzarr.write(synthetic_file(tmp_path, 0, 4, chunk=2), target, record_size=3)
    added = synthetic_file(tmp_path, 4, 3, chunk=2)  # 3 steps in chunks of 2: the last partial
    refzarr.write(added, target, append_dim="time")
    assert path_taken(caplog) == "fast"
    everything = combined([synthetic_file(tmp_path, 0, 4, chunk=2), added])
    assert_reads_like(target, everything, tmp_path)
    # now the set's last chunk is partial: Parquet cannot express the irregular grid
    before = files(target)
    with pytest.raises(refzarr.UnsupportedFeatureError, match="chunks of one length") as got:
        refzarr.write(synthetic_file(tmp_path, 7, 2, chunk=2), target, append_dim="time")
    assert path_taken(caplog).startswith("whole: the existing set's last chunk of 'x'")
    with pytest.raises(refzarr.UnsupportedFeatureError) as want:
        refzarr.write(
            combined([everything, synthetic_file(tmp_path, 7, 2, chunk=2)]), tmp_path / "a.parq"
        )
    assert str(got.value) == str(want.value)
    assert files(target) == before
    assert leftovers(tmp_path, spare=True) == []


def test_chunks_longer_than_one_step_in_many_appends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "refs.parq"
    parts = [synthetic_file(tmp_path, 2 * k, 2, chunk=2) for k in range(6)]
    refzarr.write(parts[0], target, record_size=2)
    for k in range(1, 6):
        refzarr.write(parts[k], target, append_dim="time")
        assert path_taken(caplog) == "fast"
    assert_reads_like(target, combined(parts), tmp_path)


def test_other_time_units_and_bounds(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # the new data's times (and their CF bounds) are re-encoded into the set's units
    target = tmp_path / "refs.parq"
    parts = [synthetic_file(tmp_path, 0, 3), synthetic_file(tmp_path, 3, 2, hours=True)]
    # (another file in days would fail, both ways: combine writes re-encoded bounds as one
    # inlined chunk, and the next file's chunk of 1 makes their grid irregular)
    parts.append(synthetic_file(tmp_path, 5, 1, hours=True))
    refzarr.write(parts[0], target, record_size=2)
    for part in parts[1:]:
        refzarr.write(part, target, append_dim="time")
        assert path_taken(caplog) == "fast"
    assert_reads_like(target, combined(parts), tmp_path)
    assert refzarr.read(target)["time"].meta.attributes["units"] == "days since 2000-01-01"  # type: ignore[union-attr]


def test_arrays_in_a_subgroup(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def nested(group: RefGroup) -> RefGroup:
        return RefGroup({"root": True}, {"sub": group}, sources=group.sources)

    target = tmp_path / "refs.parq"
    parts = [nested(synthetic_file(tmp_path, 2 * k, 2)) for k in range(3)]
    refzarr.write(parts[0], target, record_size=3)
    for part in parts[1:]:
        refzarr.write(part, target, append_dim="time")
        assert path_taken(caplog) == "fast"
    assert refzarr.read(target) == combined(parts)


def test_inlined_chunks_on_both_sides_of_a_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the last record file mixes references and inlined chunks, old ones and new ones
    target = tmp_path / "refs.parq"
    parts = [synthetic_file(tmp_path, 0, 2), synthetic_file(tmp_path, 2, 2, inline=True)]
    parts += [synthetic_file(tmp_path, 4, 3), synthetic_file(tmp_path, 7, 2, inline=True)]
    refzarr.write(parts[0], target, record_size=3)
    for part in parts[1:]:
        refzarr.write(part, target, append_dim="time")
        assert path_taken(caplog) == "fast"
    assert_reads_like(target, combined(parts), tmp_path)


@pytest.mark.parametrize("form", ["other column types", "damaged"])
def test_a_last_record_file_in_another_form(
    tmp_path: Path, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    # the partial last record file's rows are copied as they are only when they are in
    # refzarr's own form; else they are decoded and checked (as any record file read)
    target = tmp_path / "refs.parq"
    parts = [synthetic_file(tmp_path, 0, 3), synthetic_file(tmp_path, 3, 2)]
    refzarr.write(parts[0], target, record_size=2)
    last = target / "x" / "refs.1.parq"  # chunk 2 only
    table = pq.read_table(last)
    if form == "damaged":  # a second row: a reference to a chunk the grid does not have
        table = pa.concat_tables([table, table])
    else:  # as another writer may type them
        table = pa.table(
            {
                "path": table["path"].cast(pa.large_string()),
                "offset": table["offset"].cast(pa.uint64()),
                "size": table["size"].cast(pa.uint64()),
                "raw": table["raw"].cast(pa.large_binary()),
            }
        )
    pq.write_table(table, last)
    before = files(target)
    if form == "damaged":
        with pytest.raises(refzarr.RefFormatError, match="holds a reference"):
            refzarr.write(parts[1], target, append_dim="time")
        assert files(target) == before
        assert leftovers(tmp_path) == []
        return
    refzarr.write(parts[1], target, append_dim="time")
    assert path_taken(caplog) == "fast"
    assert_reads_like(target, combined(parts), tmp_path)
    assert pq.read_schema(target / "x" / "refs.1.parq").field("offset").type == pa.int64()


# -- falling back to the whole set ------------------------------------------------------------


def test_a_leading_dimension_that_is_not_the_append_dimension(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "refs.parq"
    parts = [synthetic_file(tmp_path, 2 * k, 2, leading=False) for k in range(3)]
    refzarr.write(parts[0], target)
    for part in parts[1:]:
        refzarr.write(part, target, append_dim="time")
        assert path_taken(caplog).startswith("whole: 'time' is not the leading dimension of 'x'")
    assert_reads_like(target, combined(parts), tmp_path)


def test_new_data_before_the_existing_set(
    tmp_path: Path, days: list[RefGroup], caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "refs.parq"
    refzarr.write(combined(days[2:5]), target)
    refzarr.write(combined(days[:2]), target, append_dim="time")
    assert path_taken(caplog).startswith("whole: the new data does not follow")
    assert_reads_like(target, combined(days[:5]), tmp_path)


def test_another_record_size_rewrites(
    tmp_path: Path, days: list[RefGroup], caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "refs.parq"
    refzarr.write(combined(days[:3]), target, record_size=2)
    refzarr.write(days[3], target, append_dim="time", record_size=5)
    assert path_taken(caplog) == "whole: record_size changes from 2 to 5"
    assert json.loads((target / ".zmetadata").read_bytes())["record_size"] == 5
    refzarr.write(days[4], target, append_dim="time", record_size=5)
    assert path_taken(caplog) == "fast"
    assert refzarr.read(target) == combined(days[:5])


def test_a_set_without_every_record_file_marked(
    tmp_path: Path, days: list[RefGroup], caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "refs.parq"
    refzarr.write(combined(days[:3]), target)
    document = json.loads((target / ".zmetadata").read_bytes())
    del document["every_record_written"]  # as fsspec and kerchunk write it
    (target / ".zmetadata").write_text(json.dumps(document))
    refzarr.write(days[3], target, append_dim="time")
    assert path_taken(caplog).startswith("whole: the set was not written by refzarr")
    assert refzarr.read(target) == combined(days[:4])


def test_a_set_in_memory_is_rewritten(
    days: list[RefGroup], caplog: pytest.LogCaptureFixture
) -> None:
    target = "memory://parqappend/refs.parq"
    refzarr.write(combined(days[:3]), target)
    try:
        refzarr.write(days[3], target, append_dim="time")
        assert path_taken(caplog).startswith("whole: the set is not on the local disk")
        assert refzarr.read(target) == combined(days[:4])
    finally:
        import fsspec

        fsspec.filesystem("memory").rm("/parqappend", recursive=True)


# -- refused appends ----------------------------------------------------------------------------


def _with_units(group: RefGroup, name: str, units: str) -> RefGroup:
    node = group.members[name]
    assert isinstance(node, RefArray)
    attributes = {**node.meta.attributes, "units": units}
    members = {
        **group.members,
        name: RefArray(node.meta.replace(attributes=attributes), node.manifest),
    }
    return RefGroup(group.attributes, members, sources=group.sources)


@pytest.mark.parametrize("conflict", ["duplicate", "units", "identical", "variables"])
def test_a_refused_append_leaves_the_old_set(
    tmp_path: Path, conflict: str, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "refs.parq"
    existing = combined([synthetic_file(tmp_path, 0, 2), synthetic_file(tmp_path, 2, 2)])
    refzarr.write(existing, target, record_size=3)
    added = {
        "duplicate": synthetic_file(tmp_path, 3, 2),
        "units": _with_units(synthetic_file(tmp_path, 4, 2), "x", "K"),
        "identical": synthetic_file(tmp_path, 4, 2, mask=0),
        "variables": RefGroup(
            {}, dict(synthetic_file(tmp_path, 4, 2).members) | {"z": existing["y"]}
        ),  # type: ignore[dict-item]
    }[conflict]
    before = files(target)
    with pytest.raises(refzarr.IncompatibleError) as got:
        refzarr.write(added, target, append_dim="time")
    assert path_taken(caplog).startswith("whole: ")
    with pytest.raises(refzarr.IncompatibleError) as want:  # exactly combine's error
        refzarr.combine(
            [refzarr.read(target), added],
            concat_dims=["time"],
            urls=[f"{target} (existing set)", "the appended data"],
        )
    assert str(got.value) == str(want.value)
    assert "existing set" in str(got.value)
    assert files(target) == before
    assert leftovers(tmp_path) == []
