"""The record of sources inside Icechunk repositories: written (hidden from xarray), merged on
append, read by ``validate --sources`` / `check_sources`, and `refresh` committing rescanned
files' new references."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

import refzarr
from refzarr import IncompatibleError, RefFormatError, RefGroup, SourceNotFoundError
from refzarr.cli import main
from sourceskit import SOURCES_ATTR, touch_later, write_day

icechunk = pytest.importorskip("icechunk")

from refzarr.formats.icechunk.reading import is_icechunk_repository  # noqa: E402
from refzarr.formats.icechunk.record import REGIONS_ATTR  # noqa: E402
from refzarr.formats.icechunk.refresh import refresh_icechunk  # noqa: E402
from refzarr.formats.icechunk.repository import commit_icechunk, container_credentials  # noqa: E402


def _rewrite(path: Path, day: int, **kwargs: Any) -> None:
    write_day(path, day, **kwargs)
    touch_later(path)


def _repo(repo: Path, folder: Path) -> Any:
    prefix = folder.resolve().as_uri() + "/"
    credentials = container_credentials([prefix])
    storage = icechunk.local_filesystem_storage(str(repo))
    return icechunk.Repository.open(storage, authorize_virtual_chunk_access=credentials)


def _open(repo: Path, folder: Path) -> xr.Dataset:
    store = _repo(repo, folder).readonly_session("main").store
    return xr.open_zarr(store, consolidated=False).load()


def _root_attrs(repo: Path, folder: Path) -> dict[str, Any]:
    store = _repo(repo, folder).readonly_session("main").store
    return dict(zarr.open_group(store, mode="r").attrs.asdict())


def _messages(repo: Path, folder: Path) -> list[str]:
    return [s.message for s in _repo(repo, folder).ancestry(branch="main")]


def _expected(days: list[Path]) -> xr.Dataset:
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as ds:
        return ds.load()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "data"
    out.mkdir()
    return out


@pytest.fixture
def days(folder: Path) -> list[Path]:
    return [write_day(folder / f"d{k}.nc", k) for k in range(3)]


def _scan_to_repo(days: list[Path], repo: Path) -> None:
    argv = ["scan", *map(str, days), "-o", str(repo), "--format", "icechunk"]
    assert main([*argv, "--concat-dim", "time"]) == 0


def test_the_record_is_in_the_root_attributes_and_hidden_from_xarray(
    tmp_path: Path, folder: Path, days: list[Path]
) -> None:
    repo = tmp_path / "repo"
    _scan_to_repo(days, repo)
    attrs = _root_attrs(repo, folder)
    scans = attrs[SOURCES_ATTR]["scans"]
    assert [s["url"] for s in scans] == [str(p.resolve()) for p in days]
    regions = attrs[REGIONS_ATTR]["scans"]
    assert regions[str(days[1].resolve())] == {"v": [[2, 0], [4, 2]]}
    ds = _open(repo, folder)
    assert SOURCES_ATTR not in ds.attrs
    assert REGIONS_ATTR not in ds.attrs
    xr.testing.assert_identical(ds, _expected(days))
    assert is_icechunk_repository(str(repo))
    assert not is_icechunk_repository(str(days[0]))
    assert refzarr.check_sources(repo) == []


def test_a_rewritten_source_is_reported_refreshed_and_read_anew(
    tmp_path: Path, folder: Path, days: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    _scan_to_repo(days, repo)
    _rewrite(days[1], 1, scale=2.0)
    capsys.readouterr()
    assert main(["validate", str(repo), "--sources"]) == 1
    out = capsys.readouterr()
    assert f"CHANGED {days[1].resolve()}: changed: size" in out.out
    assert "1 of 3 source files changed" in out.err
    with pytest.raises(icechunk.IcechunkError, match="checksum"):
        _open(repo, folder)
    assert main(["refresh", str(repo)]) == 0
    out = capsys.readouterr()
    assert f"refreshed {days[1].resolve()}" in out.out
    assert "committed snapshot" in out.out
    xr.testing.assert_identical(_open(repo, folder), _expected(days))
    assert _messages(repo, folder)[0] == "refzarr refresh: 1 changed source(s) scanned again: d1.nc"
    assert main(["validate", str(repo), "--sources"]) == 0
    assert "OK (3 source files as scanned)" in capsys.readouterr().out
    assert main(["refresh", str(repo)]) == 0  # nothing changed: nothing committed
    assert "nothing to do" in capsys.readouterr().out
    assert len(_messages(repo, folder)) == 3


def test_a_single_scan_repository_is_written_again_whole(tmp_path: Path, folder: Path) -> None:
    path = write_day(folder / "a.nc", 0)
    repo = tmp_path / "repo"
    commit_icechunk(refzarr.scan(path), repo, message="first")
    _rewrite(path, 5, scale=3.0)  # other values, other time coordinate (loaded: inlined)
    done = refresh_icechunk(repo, message="mine")
    assert [c.url for c in done.changes] == [str(path.resolve())]
    assert done.snapshot is not None
    with xr.open_dataset(path) as expected:
        xr.testing.assert_identical(_open(repo, folder), expected.load())
    assert _messages(repo, folder)[:2] == ["mine", "first"]


def test_appends_merge_the_record_and_refresh_finds_each_region(
    tmp_path: Path, folder: Path, days: list[Path]
) -> None:
    repo = tmp_path / "repo"
    for k, path in enumerate(days):
        commit_icechunk(
            refzarr.scan(path), repo, message=f"day {k}", append_dim="time" if k else None
        )
    attrs = _root_attrs(repo, folder)
    assert len(attrs[SOURCES_ATTR]["scans"]) == 3
    assert attrs[REGIONS_ATTR]["scans"][str(days[2].resolve())] == {"v": [[4, 0], [6, 2]]}
    _rewrite(days[0], 0, scale=-1.0)
    _rewrite(days[2], 2, scale=0.5)
    changed = {c.url for c in refzarr.refresh(repo)}
    assert changed == {str(days[0].resolve()), str(days[2].resolve())}
    xr.testing.assert_identical(_open(repo, folder), _expected(days))
    assert refzarr.check_sources(repo) == []


def test_a_changed_layout_is_refused_and_nothing_committed(
    tmp_path: Path, folder: Path, days: list[Path]
) -> None:
    repo = tmp_path / "repo"
    _scan_to_repo(days, repo)
    _rewrite(days[1], 1, chunks=(4, 8))
    with pytest.raises(IncompatibleError, match=r"d1\.nc: array 'v': the store has chunks"):
        refzarr.refresh(repo)
    assert len(_messages(repo, folder)) == 2


def _sparse(path: Path, k: int, *, full: bool) -> Path:
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", 4)
        ds.createDimension("x", 8)
        t = ds.createVariable("time", "f8", ("time",))
        t[:] = np.arange(4) + 4 * k
        v = ds.createVariable("v", "f4", ("time", "x"), chunksizes=(2, 4), fill_value=-9.0)
        if full:
            v[:] = np.arange(32).reshape(4, 8)
        else:  # the corners only: two chunks never written (missing: the fill value)
            v[0:2, 0:4] = 1.0
            v[2:4, 4:8] = 2.0
    return path


def test_chunks_missing_after_a_rewrite_read_as_fill(tmp_path: Path, folder: Path) -> None:
    """A chunk the new file no longer writes is deleted: it reads as the fill value."""
    paths = [_sparse(folder / f"m{k}.nc", k, full=True) for k in range(2)]
    repo = tmp_path / "repo"
    _scan_to_repo(paths, repo)
    _sparse(paths[1], 1, full=False)
    touch_later(paths[1])
    refzarr.refresh(repo)
    got = _open(repo, folder)
    xr.testing.assert_identical(got, _expected(paths))
    assert np.isnan(got.v.values[6:8, 0:4]).all()  # masked fill, as netCDF4 shows it


def test_vanished_sources_and_missing_records_are_named(
    tmp_path: Path, folder: Path, days: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    _scan_to_repo(days, repo)
    days[2].unlink()
    with pytest.raises(SourceNotFoundError, match=r"d2\.nc: vanished"):
        refzarr.refresh(repo)
    assert len(_messages(repo, folder)) == 2
    bare_repo = tmp_path / "bare"
    scanned = refzarr.scan(days[0])
    commit_icechunk(RefGroup(scanned.attributes, scanned.members), bare_repo)
    with pytest.raises(RefFormatError, match="records no sources"):
        refzarr.check_sources(bare_repo)
    with pytest.raises(RefFormatError, match="records no sources"):
        refzarr.refresh(bare_repo)
    capsys.readouterr()
    assert main(["validate", str(bare_repo)]) == 2
    assert "give --sources" in capsys.readouterr().err


def test_chunks_another_writer_added_are_named(
    tmp_path: Path, folder: Path, days: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    _scan_to_repo(days[:2], repo)
    other = folder / "other.nc"
    shutil.copy(days[2], other)
    session = _repo(repo, folder).writable_session("main")
    spec = icechunk.VirtualChunkSpec([0, 0], other.resolve().as_uri(), 0, 10)
    session.store.set_virtual_refs("v", [spec])
    session.commit("another writer")
    assert main(["validate", str(repo), "--sources"]) == 0
    err = capsys.readouterr().err
    assert "1 file referenced by virtual chunks the record does not name" in err
    assert "other.nc" in err


def test_an_s3_repository_with_sources_on_s3(
    s3: tuple[str, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import s3fs

    bucket, options = s3
    fs = s3fs.S3FileSystem(**options)
    days = [write_day(tmp_path / f"d{k}.nc", k) for k in range(3)]
    for path in days:
        fs.put(str(path), f"{bucket}/data/{path.name}")
    repo, shown = f"s3://{bucket}/repo", json.dumps(options)
    argv = ["scan", f"s3://{bucket}/data/d*.nc", "-o", repo, "--format", "icechunk"]
    assert main([*argv, "--concat-dim", "time", "--storage-options", shown]) == 0
    assert main(["validate", repo, "--sources", "--storage-options", shown]) == 0
    write_day(days[1], 1, scale=4.0)
    fs.put(str(days[1]), f"{bucket}/data/d1.nc")  # a new ETag
    capsys.readouterr()
    assert main(["validate", repo, "--sources", "--storage-options", shown]) == 1
    assert f"CHANGED s3://{bucket}/data/d1.nc: changed: " in capsys.readouterr().out
    assert main(["refresh", repo, "--storage-options", shown]) == 0
    assert main(["validate", repo, "--sources", "--storage-options", shown]) == 0
    storage = icechunk.s3_storage(
        bucket=bucket,
        prefix="repo",
        region="us-east-1",
        endpoint_url=options["client_kwargs"]["endpoint_url"],
        allow_http=True,
        force_path_style=True,
        access_key_id=options["key"],
        secret_access_key=options["secret"],
    )
    credentials = icechunk.s3_static_credentials(
        access_key_id=options["key"], secret_access_key=options["secret"]
    )
    found = icechunk.Repository.open(
        storage,
        authorize_virtual_chunk_access=icechunk.containers_credentials(
            {f"s3://{bucket}/": credentials}
        ),
    )
    got = xr.open_zarr(found.readonly_session("main").store, consolidated=False).load()
    xr.testing.assert_identical(got, _expected(days))


def test_regions_only_where_a_scans_box_holds_no_other_scans_chunk() -> None:
    from refzarr.formats.icechunk.record import scan_regions
    from refzarr.model import ArrayMeta, ChunkManifest, RefArray
    from refzarr.sources.record import read_record

    urls = ["/d/a.nc", "/d/b.nc", "/d/c.nc", "/d/other.nc"]
    # a 3 x 4 grid: a.nc row 0, b.nc and c.nc interleaved in rows 1-2, other.nc unrecorded
    ids = np.array([[0, 0, 0, 0], [1, 2, 1, 2], [1, 2, 1, 3]])
    zeros, ones = np.zeros((3, 4), np.uint64), np.ones((3, 4), np.uint64)
    manifest = ChunkManifest.from_arrays(urls, ids, zeros, ones)
    meta = ArrayMeta(shape=(3, 8), chunks=(1, 2), dtype=np.dtype("f4"))
    scans = [
        {"url": u, "format": "hdf5", "options": {}, "files": {u: {"size": 1}}} for u in urls[:3]
    ]
    record = read_record(RefGroup(sources={"version": 1, "scans": scans}))
    regions = scan_regions({"v": RefArray(meta, manifest)}, record, {"v": [5, 0]})
    assert regions == {"/d/a.nc": {"v": [[5, 0], [6, 4]]}}
