"""Sources that change: what scans record (size, modification time, ETag), where it travels
(JSON v0/v1, Parquet, combine), `check_sources` / ``validate --sources``, and `refresh`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

import refzarr
from refzarr import IncompatibleError, RefFormatError, SourceNotFoundError
from refzarr.cli import main
from sourceskit import SOURCES_ATTR, touch_later, write_day


@pytest.fixture
def days(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "data"
    folder.mkdir()
    return [write_day(folder / f"day{k}.nc", k) for k in range(3)]


def _combined(days: list[Path]) -> refzarr.RefGroup:
    return refzarr.combine([refzarr.scan(p) for p in days], concat_dims="time")


def _expected(days: list[Path]) -> xr.Dataset:
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as ds:
        return ds.load()


def test_a_scan_records_its_file(days: list[Path]) -> None:
    group = refzarr.scan(days[0])
    assert group.sources is not None
    (scan,) = group.sources["scans"]
    stat = os.stat(days[0])
    assert scan["url"] == str(days[0].resolve())
    assert scan["format"] == "hdf5"
    state = scan["files"][str(days[0].resolve())]
    assert state["size"] == stat.st_size
    assert state["mtime"].endswith("Z")
    assert "etag" not in state  # local files have none
    assert SOURCES_ATTR not in group.attributes
    assert refzarr.check_sources(group) == []


def test_options_that_differ_from_defaults_are_recorded(days: list[Path]) -> None:
    group = refzarr.scan(days[0], inline_threshold=100, inline_coordinates=0)
    assert dict(group.sources["scans"][0]["options"]) == {
        "inline_threshold": 100,
        "inline_coordinates": 0,
    }


@pytest.mark.parametrize("name", ["refs.json", "refs.json.zst", "refs.parq"])
@pytest.mark.parametrize("version", [0, 1])
def test_the_record_survives_writers_and_readers(
    tmp_path: Path, days: list[Path], name: str, version: int
) -> None:
    group = _combined(days)
    target = tmp_path / name
    refzarr.write(group, target, version=version)  # type: ignore[arg-type]
    back = refzarr.read(target)
    assert back.sources == group.sources
    assert back == group
    assert len(back.sources["scans"]) == 3
    assert SOURCES_ATTR not in back.attributes


def test_independent_readers_ignore_the_record(tmp_path: Path, days: list[Path]) -> None:
    target = tmp_path / "refs.json"
    refzarr.write(_combined(days), target)
    options = {"fo": str(target)}
    with xr.open_dataset(
        "reference://",
        engine="zarr",
        backend_kwargs={"consolidated": False, "storage_options": options},
    ) as ds:
        assert SOURCES_ATTR not in ds.attrs  # xarray hides ``_nc*`` attributes
        xr.testing.assert_equal(ds.load(), _expected(days))
    import fsspec

    root = zarr.open_group(
        fsspec.get_mapper("reference://", fo=str(target)), mode="r", zarr_format=2
    )
    assert json.loads(json.dumps(root.attrs[SOURCES_ATTR]))["version"] == 1  # shown, not used
    xr.testing.assert_equal(refzarr.open_dataset(refzarr.read(target)).load(), _expected(days))


def test_combine_merges_every_files_record(days: list[Path]) -> None:
    group = _combined(days)
    urls = [s["url"] for s in group.sources["scans"]]
    assert sorted(urls) == sorted(str(p.resolve()) for p in days)
    again = refzarr.merge([group, group])  # each scan once
    assert len(again.sources["scans"]) == 3


def test_check_names_changed_and_vanished_files(tmp_path: Path, days: list[Path]) -> None:
    target = tmp_path / "refs.json"
    refzarr.write(_combined(days), target)
    write_day(days[1], 1, scale=2.0)
    touch_later(days[1])
    days[2].unlink()
    changes = refzarr.check_sources(target)
    assert [(c.url, c.kind) for c in changes] == [
        (str(days[1].resolve()), "changed"),
        (str(days[2].resolve()), "vanished"),
    ]
    assert "modified" in changes[0].detail


def test_same_size_rewrite_is_seen_by_its_time(tmp_path: Path, days: list[Path]) -> None:
    group = refzarr.scan(days[0])
    data = bytearray(days[0].read_bytes())
    data[-1] ^= 1
    days[0].write_bytes(bytes(data))
    touch_later(days[0])
    (change,) = refzarr.check_sources(group)
    assert change.kind == "changed"
    assert "size" not in change.detail


def test_a_set_without_record_is_named(tmp_path: Path, days: list[Path]) -> None:
    bare = refzarr.RefGroup(refzarr.scan(days[0]).attributes, refzarr.scan(days[0]).members)
    with pytest.raises(RefFormatError, match="records no sources"):
        refzarr.check_sources(bare)


@pytest.mark.parametrize("name", ["refs.json", "refs.parq"])
def test_refresh_rescans_only_what_changed(tmp_path: Path, days: list[Path], name: str) -> None:
    target = tmp_path / name
    refzarr.write(_combined(days), target)
    before = {s["url"]: s for s in refzarr.read(target).sources["scans"]}
    write_day(days[1], 1, scale=3.7)  # other bytes, other offsets and lengths
    touch_later(days[1])
    changes = refzarr.refresh(target)
    assert [c.url for c in changes] == [str(days[1].resolve())]
    after = refzarr.read(target)
    assert refzarr.check_sources(after) == []
    scans = {s["url"]: s for s in after.sources["scans"]}
    assert scans[str(days[0].resolve())] == before[str(days[0].resolve())]
    xr.testing.assert_equal(refzarr.open_dataset(after).load(), _expected(days))
    assert refzarr.refresh(target) == []  # nothing changed: nothing written


def test_refresh_of_a_file_holding_a_scalar(tmp_path: Path) -> None:
    """A 0-d array referenced in the first file (kept once when files are combined): its
    file rewritten, refresh splices the scalar's one chunk (crashed on numpy's 0-d index)."""
    folder = tmp_path / "data"
    folder.mkdir()
    days = [write_day(folder / f"day{k}.nc", k) for k in range(2)]
    for path in days:
        with netCDF4.Dataset(path, "a") as ds:
            ds.createVariable("station", "i4", ())[...] = 7
    target = tmp_path / "refs.json"
    refzarr.write(_combined(days), target)
    with netCDF4.Dataset(days[0], "a") as ds:
        ds["v"][0, 0] = -1.0
    touch_later(days[0])
    assert [c.url for c in refzarr.refresh(target)] == [str(days[0].resolve())]
    minimal = {"data_vars": "minimal", "coords": "minimal", "compat": "override"}
    with xr.open_mfdataset(days, combine="nested", concat_dim="time", **minimal) as expected:
        xr.testing.assert_equal(refzarr.open_dataset(target).load(), expected.load())


def test_refresh_of_a_single_scan_takes_the_new_scan(tmp_path: Path, days: list[Path]) -> None:
    target = tmp_path / "one.json"
    refzarr.write(refzarr.scan(days[0]), target)
    write_day(days[0], 7, scale=0.5, chunks=(4, 8))
    touch_later(days[0])
    assert len(refzarr.refresh(target)) == 1
    with xr.open_dataset(days[0]) as ds:
        xr.testing.assert_identical(refzarr.open_dataset(refzarr.read(target)).load(), ds.load())


def test_refresh_refuses_vanished_sources_and_leaves_the_set(
    tmp_path: Path, days: list[Path]
) -> None:
    target = tmp_path / "refs.json"
    refzarr.write(_combined(days), target)
    old = target.read_bytes()
    write_day(days[0], 0, scale=2.0)
    touch_later(days[0])
    days[2].unlink()
    with pytest.raises(SourceNotFoundError, match=r"day2\.nc: vanished"):
        refzarr.refresh(target)
    assert target.read_bytes() == old


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_refresh_refuses_a_changed_layout_and_leaves_the_set(
    tmp_path: Path, days: list[Path]
) -> None:
    target = tmp_path / "refs.parq"
    refzarr.write(_combined(days), target)
    old = _tree(target)
    with netCDF4.Dataset(days[1], "w") as ds:  # v is now int16
        ds.createDimension("time", None)
        ds.createDimension("x", 8)
        ds.createVariable("time", "f8", ("time",))[:] = np.arange(4) + 4
        ds.createVariable("v", "i2", ("time", "x"), chunksizes=(2, 4))[:] = 1
    touch_later(days[1])
    with pytest.raises(IncompatibleError, match=r"day1\.nc: array 'v' has dtype int16"):
        refzarr.refresh(target)
    assert _tree(target) == old


def test_cli_validate_sources_and_refresh(
    tmp_path: Path, days: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "refs.json"
    assert main(["scan", *map(str, days), "-o", str(target), "--concat-dim", "time"]) == 0
    capsys.readouterr()
    assert main(["validate", str(target), "--sources"]) == 0
    assert "3 source files as scanned" in capsys.readouterr().out
    write_day(days[2], 2, scale=5.0)
    touch_later(days[2])
    assert main(["validate", str(target), "--sources"]) == 1
    out, err = capsys.readouterr()
    assert f"CHANGED {days[2].resolve()}" in out
    assert "1 of 3 source files changed" in err
    assert main(["refresh", str(target)]) == 0
    assert "1 changed source scanned again" in capsys.readouterr().out
    assert main(["validate", str(target), "--sources"]) == 0
    xr.testing.assert_equal(refzarr.open_dataset(refzarr.read(target)).load(), _expected(days))
    shutil.rmtree(days[0].parent)
    assert main(["refresh", str(target)]) == 1
    assert "cannot scan again 3 source(s)" in capsys.readouterr().err


def test_zarr_store_records_its_chunk_files(tmp_path: Path) -> None:
    store = tmp_path / "store.zarr"
    array = zarr.create_array(
        str(store), shape=(8,), chunks=(2,), dtype="i4", zarr_format=2, compressors=None
    )
    array[:] = np.arange(8)
    group = refzarr.scan(store)
    files = group.sources["scans"][0]["files"]
    assert len(files) == 4
    assert all(Path(f).parent == store for f in files)
    (store / "2").unlink()  # a chunk file deleted: that chunk reads as fill now
    (change,) = refzarr.check_sources(group)
    assert change.kind == "vanished"
    assert change.scan == str(store.resolve())
    target = tmp_path / "refs.json"
    refzarr.write(group, target)
    refzarr.refresh(target)
    root = zarr.open_group(refzarr.ReferenceStore(refzarr.read(target)), mode="r")
    got = root["store"][:]
    np.testing.assert_array_equal(got, [0, 1, 2, 3, 0, 0, 6, 7])


def test_s3_sources_record_etags(s3: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    import s3fs

    bucket, options = s3
    fs = s3fs.S3FileSystem(**options)
    local = write_day(tmp_path / "a.nc", 0)
    fs.put(str(local), f"{bucket}/a.nc")
    url = f"s3://{bucket}/a.nc"
    group = refzarr.scan(url, storage_options=options)
    state = group.sources["scans"][0]["files"][url]
    assert state["etag"]
    assert state["size"] == local.stat().st_size
    assert refzarr.check_sources(group, options) == []
    fs.put(str(write_day(tmp_path / "b.nc", 1, scale=2.0)), f"{bucket}/a.nc")
    (change,) = refzarr.check_sources(group, options)
    assert change.kind == "changed"
    assert "ETag" in change.detail
    target = f"s3://{bucket}/refs.json"
    refzarr.write(group, target, storage_options=options)
    assert main(["refresh", target, "--storage-options", json.dumps(options)]) == 0
    assert refzarr.check_sources(target, options, refs_options=options) == []
    assert refzarr.refresh(target, options, refs_options=options) == []


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (5, "attribute '_nc_refzarr_sources' is no object"),
        ({"version": 2, "scans": []}, "record of sources has version 2"),
        ({"version": 1, "scans": [{"url": 1}]}, "malformed scan entry"),
        (
            {"version": 1, "scans": [{"url": "a", "format": "hdf5", "files": {"a": {}}}]},
            "source a: a source record must be",
        ),
    ],
)
def test_malformed_records_are_named(tmp_path: Path, record: Any, message: str) -> None:
    target = tmp_path / "refs.json"
    refs = {".zgroup": '{"zarr_format":2}', ".zattrs": json.dumps({SOURCES_ATTR: record})}
    target.write_text(json.dumps(refs))
    with pytest.raises(RefFormatError, match=message):
        refzarr.check_sources(target)


def test_cli_names_a_set_without_record(
    tmp_path: Path, days: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "refs.json"
    target.write_text(json.dumps(refzarr.to_kerchunk(refzarr.scan(days[0]))))  # no record
    assert main(["validate", str(target), "--sources"]) == 1
    assert "records no sources" in capsys.readouterr().err
    assert main(["validate", str(target)]) == 0  # the byte ranges are fine
