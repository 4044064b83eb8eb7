"""A Parquet set's record of sources in a file of its own (`SOURCES_FILE`), read when first
used: sets written before (the record in the root ``.zattrs``) still open and are checked,
a lazily read record still refuses changed sources, a set rewritten between opening and the
first read is refused, and every reader reads the same values."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
import xarray as xr

import refzarr
from refzarr import RefFormatError, SourceChangedError
from refzarr.formats.parquet.sources_file import SOURCES_FILE, SOURCES_KEY
from refzarr.model.frozen import DeferredJSON
from sourceskit import SOURCES_ATTR, touch_later, write_day


@pytest.fixture
def days(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "data"
    folder.mkdir()
    return [write_day(folder / f"day{k}.nc", k) for k in range(3)]


def _combined(days: list[Path]) -> refzarr.RefGroup:
    return refzarr.combine([refzarr.scan(p) for p in days], concat_dims="time")


def _zmetadata(target: Path) -> dict:
    return json.loads((target / ".zmetadata").read_text())


def as_written_before(target: Path) -> None:
    """Move a set's record back into its root ``.zattrs`` (the layout of sets written before
    `SOURCES_FILE`), as refzarr 0.1 of session 13 wrote them."""
    document = _zmetadata(target)
    record = refzarr.read(target).sources
    assert isinstance(record, DeferredJSON)
    document.pop(SOURCES_KEY)
    document["metadata"][".zattrs"][SOURCES_ATTR] = record.raw()
    (target / ".zmetadata").write_text(json.dumps(document))
    (target / SOURCES_FILE).unlink()


@pytest.fixture
def written(tmp_path: Path, days: list[Path]) -> Path:
    target = tmp_path / "refs.parq"
    refzarr.write(_combined(days), target)
    return target


@pytest.fixture
def old_layout(tmp_path: Path, days: list[Path]) -> Path:
    target = tmp_path / "old.parq"
    refzarr.write(_combined(days), target)
    as_written_before(target)
    return target


def test_the_record_is_a_file_of_its_own(written: Path, days: list[Path]) -> None:
    document = _zmetadata(written)
    assert SOURCES_ATTR not in document["metadata"][".zattrs"]
    assert set(document[SOURCES_KEY]) == {"version", "blake2b"}
    assert (written / SOURCES_FILE).is_file()
    group = refzarr.read(written)
    assert isinstance(group.sources, DeferredJSON)
    assert not group.sources.loaded  # opening does not read it
    assert group.sources == _combined(days).sources
    assert group.sources.loaded


def test_sets_written_before_still_open(old_layout: Path, days: list[Path]) -> None:
    group = refzarr.read(old_layout)
    assert group.sources == _combined(days).sources
    assert SOURCES_ATTR not in group.attributes
    assert group == _combined(days)


# fsspec's LazyReferenceMapper reads Parquet references with pandas' fastparquet engine
@pytest.mark.filterwarnings(
    "ignore:The 'fastparquet' engine is deprecated:pandas.errors.Pandas4Warning"
)
@pytest.mark.parametrize("layout", ["written", "old_layout"])
def test_every_reader_reads_the_same(
    request: pytest.FixtureRequest, tmp_path: Path, days: list[Path], layout: str
) -> None:
    target: Path = request.getfixturevalue(layout)
    json_set = tmp_path / "refs.json"
    refzarr.write(_combined(days), json_set)
    ours = refzarr.open_dataset(target).load()
    xr.testing.assert_identical(ours, refzarr.open_dataset(json_set).load())
    xr.testing.assert_identical(ours, xr.open_dataset(target, engine="refzarr").load())
    with xr.open_dataset(
        "reference://",
        engine="zarr",
        backend_kwargs={"consolidated": False, "storage_options": {"fo": str(target)}},
    ) as theirs:
        xr.testing.assert_equal(theirs.load(), ours)
        assert SOURCES_ATTR not in theirs.attrs


@pytest.mark.parametrize("layout", ["written", "old_layout"])
def test_a_lazily_read_record_still_refuses_a_changed_source(
    request: pytest.FixtureRequest, days: list[Path], layout: str
) -> None:
    target: Path = request.getfixturevalue(layout)
    ds = refzarr.open_dataset(target)
    touch_later(days[1])
    ds["v"].isel(time=0).to_numpy()  # day 0: as scanned
    with pytest.raises(SourceChangedError, match=r"day1\.nc: changed since it was scanned"):
        ds["v"].isel(time=5).to_numpy()
    with pytest.raises(SourceChangedError, match="day1"):
        refzarr.open_dataset(target)["v"].to_numpy()


def test_a_set_rewritten_after_its_opening_is_refused(written: Path, days: list[Path]) -> None:
    ds = refzarr.open_dataset(written)  # the record is not read yet
    touch_later(days[1])
    refzarr.refresh(written)  # a new record (day 1's new time), the same references
    with pytest.raises(RefFormatError, match="rewritten since it was opened"):
        ds["v"].isel(time=5).to_numpy()
    again = refzarr.open_dataset(written)
    assert float(again["v"].isel(time=5, x=0)) == 12.0


def test_a_missing_record_file_is_an_error_when_used(written: Path) -> None:
    (written / SOURCES_FILE).unlink()
    ds = refzarr.open_dataset(written)  # opening does not need it
    with pytest.raises(RefFormatError, match="record of this set's sources is absent"):
        ds["v"].to_numpy()


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"version": 1, "blake2b": 12}, SOURCES_KEY),
        ({"blake2b": "0" * 40}, SOURCES_KEY),
        ({"version": 2, "blake2b": "0" * 40}, r"file layout 2; this refzarr reads layout 1"),
    ],
)
def test_a_malformed_entry_is_refused_at_opening(written: Path, entry: dict, match: str) -> None:
    document = _zmetadata(written)
    document[SOURCES_KEY] = entry
    (written / ".zmetadata").write_text(json.dumps(document))
    with pytest.raises(RefFormatError, match=match):
        refzarr.read(written)


def test_a_read_set_pickles_with_its_record(written: Path, days: list[Path]) -> None:
    group = refzarr.read(written)
    back = pickle.loads(pickle.dumps(group))
    assert back.sources == _combined(days).sources


def test_expanded_references_hold_the_record(written: Path, days: list[Path]) -> None:
    refs = refzarr.expand_references(written)
    record = refs[".zattrs"][SOURCES_ATTR]
    assert [s["url"] for s in record["scans"]] == [str(p) for p in days]


@pytest.mark.parametrize("layout", ["written", "old_layout"])
def test_appending_writes_the_merged_record_file(
    request: pytest.FixtureRequest, tmp_path: Path, days: list[Path], layout: str
) -> None:
    target: Path = request.getfixturevalue(layout)
    new = write_day(tmp_path / "data" / "day3.nc", 3)
    refzarr.write(refzarr.scan(new), target, append_dim="time")
    assert SOURCES_ATTR not in _zmetadata(target)["metadata"][".zattrs"]
    group = refzarr.read(target)
    urls = [s["url"] for s in group.sources["scans"]]
    assert urls == [str(p) for p in [*days, new]]
    touch_later(new)
    with pytest.raises(SourceChangedError, match="day3"):
        refzarr.open_dataset(target)["v"].to_numpy()


def test_a_copied_set_keeps_its_record(written: Path, tmp_path: Path, days: list[Path]) -> None:
    copy = tmp_path / "copy.parq"
    shutil.copytree(written, copy)
    assert refzarr.read(copy).sources == _combined(days).sources


def test_a_read_looks_up_only_the_scans_of_its_files(
    written: Path, days: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from refzarr.formats.parquet import sources_file

    parsed: list[int] = []
    getitem = sources_file.FileStates.__getitem__

    def counted(self: sources_file.FileStates, url: str) -> object:
        parsed.append(len(self._parsed))
        return getitem(self, url)

    monkeypatch.setattr(sources_file.FileStates, "__getitem__", counted)
    group = refzarr.read(written)
    ds = refzarr.open_dataset(group)
    ds["v"].isel(time=5).to_numpy()  # day 1 alone
    assert parsed == [0]
    assert not group.sources.loaded  # type: ignore[union-attr]
    touch_later(days[2])
    with pytest.raises(SourceChangedError, match="day2"):
        ds["v"].isel(time=9).to_numpy()


def test_a_record_of_no_scans_is_kept_whole(tmp_path: Path, days: list[Path]) -> None:
    group = refzarr.RefGroup(
        _combined(days).attributes,
        _combined(days).members,
        sources={"version": 1, "scans": []},
    )
    target = tmp_path / "empty.parq"
    refzarr.write(group, target)
    back = refzarr.read(target)
    assert back.sources == {"version": 1, "scans": ()}
    assert refzarr.open_dataset(target)["v"].shape == (12, 8)
