"""`refzarr.to_icechunk`: reference groups into local Icechunk repositories, read back with
``xr.open_zarr(session.store)`` and compared with xarray on the source files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr

import refzarr
from corpus import corpus_files
from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup, UnsupportedFeatureError

icechunk = pytest.importorskip("icechunk")

from refzarr.formats.icechunk.repository import container_credentials  # noqa: E402


def _repository(tmp_path: Path, sources: Path) -> Any:
    """A local repository allowed to read virtual chunks under ``sources``."""
    prefix = sources.resolve().as_uri() + "/"
    config = icechunk.RepositoryConfig.default()
    store = icechunk.local_filesystem_store(str(sources.resolve()))
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    credentials = container_credentials([prefix])
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    return icechunk.Repository.create(storage, config, authorize_virtual_chunk_access=credentials)


def _write_and_open(group: RefGroup, repo: Any, **xarray_options: Any) -> xr.Dataset:
    session = repo.writable_session("main")
    refzarr.to_icechunk(group, session.store)
    session.commit("refzarr")
    store = repo.readonly_session("main").store
    return xr.open_zarr(store, consolidated=False, **xarray_options).load()


def _netcdf(path: Path) -> Path:
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 50)
        time = ds.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time[:] = np.arange(7)
        air = ds.createVariable(
            "air",
            "f4",
            ("time", "x"),
            zlib=True,
            shuffle=True,
            chunksizes=(2, 16),
            fill_value=-9.0,
        )
        air[:] = np.random.default_rng(0).random((7, 50)).astype("f4")
        air[3, :5] = np.ma.masked
        air.scale_factor = 2.0
        big = ds.createVariable("big", ">i4", ("x",), contiguous=True, endian="big")
        big[:] = np.arange(50)
        ds.title = "icechunk test"
    return path


@pytest.mark.parametrize("inline_coordinates", [0, 65536])
def test_netcdf4_file_reads_back_identical(tmp_path: Path, inline_coordinates: int) -> None:
    sources = tmp_path / "data"
    sources.mkdir()
    path = _netcdf(sources / "a.nc")
    group = refzarr.scan(path, inline_coordinates=inline_coordinates)
    got = _write_and_open(group, _repository(tmp_path, sources))
    xr.testing.assert_identical(got, xr.open_dataset(path).load())


CORPUS = corpus_files("netcdf4", ".nc")


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_corpus_netcdf4_files(tmp_path: Path, path: Path) -> None:
    """Raw values (no CF decoding): what the references hold, byte order aside (Zarr v3
    keeps it in the ``bytes`` codec, not in the dtype)."""
    try:
        group = refzarr.scan(path, on_unsupported="skip")
        got = _write_and_open(group, _repository(tmp_path, path.parent), mask_and_scale=False)
    except UnsupportedFeatureError as exc:
        pytest.skip(f"named unsupported: {exc}")
    expected = xr.open_dataset(path, mask_and_scale=False).load()
    for name in got.variables:
        left, right = got[name].variable, expected[name].variable
        assert left.dtype == right.dtype.newbyteorder("=")
        np.testing.assert_array_equal(left.values, right.values.astype(left.dtype))


def test_irregular_grid_is_refused_before_writing(tmp_path: Path) -> None:
    from refzarr.model import RectilinearAxis

    meta = ArrayMeta(
        shape=(5,),
        chunks=(3,),
        dtype=np.dtype("<i4"),
        rectilinear=(RectilinearAxis((2, 3), (3, 3)),),
    )
    group = RefGroup(members={"v": RefArray(meta, ChunkManifest.missing((2,)))})
    session = _repository(tmp_path, tmp_path).writable_session("main")
    with pytest.raises(UnsupportedFeatureError, match=r"irregular|regular"):
        refzarr.to_icechunk(group, session.store)


def test_whole_file_references_and_missing_chunks(tmp_path: Path) -> None:
    sources = tmp_path / "data"
    sources.mkdir()
    (sources / "whole.bin").write_bytes(np.arange(4, dtype="<u2").tobytes())
    whole = np.uint64(2**64 - 1)  # WHOLE_FILE: the reference is the whole file
    manifest = ChunkManifest.from_entries(
        (2,), [[0]], [str(sources / "whole.bin")], [0], [0], [whole]
    )
    meta = ArrayMeta(
        shape=(8,), chunks=(4,), dtype=np.dtype("<u2"), fill_value=7, dimension_names=("x",)
    )
    got = _write_and_open(
        RefGroup(members={"v": RefArray(meta, manifest)}), _repository(tmp_path, sources)
    )
    expected = np.array([0, 1, 2, 3, 7, 7, 7, 7], dtype="u2")
    np.testing.assert_array_equal(got["v"].fillna(7).values.astype("u2"), expected)
    assert os.path.exists(sources / "whole.bin")


def test_appends_in_three_commits_read_back_version_by_version(tmp_path: Path) -> None:
    from dailykit import write_days

    sources = tmp_path / "days"
    sources.mkdir()
    days = write_days(sources, 7)
    scanned = [refzarr.scan(path) for path in days]
    repo = _repository(tmp_path, sources)
    snapshots = []
    for start, stop in ((0, 3), (3, 4), (4, 7)):
        session = repo.writable_session("main")
        part = refzarr.combine(scanned[start:stop], concat_dims=["time"])
        refzarr.to_icechunk(part, session.store, append_dim="time" if start else None)
        snapshots.append((stop, session.commit(f"days {start}-{stop}")))
    for stop, snapshot in snapshots:
        store = repo.readonly_session(snapshot_id=snapshot).store
        got = xr.open_zarr(store, consolidated=False).load()
        expected = refzarr.open_dataset(refzarr.combine(scanned[:stop], concat_dims=["time"]))
        xr.testing.assert_identical(got, expected.load())


def test_an_append_to_an_empty_repository_writes_the_group(tmp_path: Path) -> None:
    """As `refzarr.write` to a set that does not exist (was: "array 'time' is not in the
    Icechunk store appended to"); then appends as usual."""
    from dailykit import write_days

    sources = tmp_path / "days"
    sources.mkdir()
    scanned = [refzarr.scan(path) for path in write_days(sources, 3)]
    repo = _repository(tmp_path, sources)
    for k in (0, 1, 2):
        session = repo.writable_session("main")
        refzarr.to_icechunk(scanned[k], session.store, append_dim="time")
        session.commit(f"day {k}")
    got = xr.open_zarr(repo.readonly_session("main").store, consolidated=False).load()
    expected = refzarr.open_dataset(refzarr.combine(scanned, concat_dims=["time"])).load()
    xr.testing.assert_identical(got, expected)


def test_appending_what_does_not_fit_writes_nothing(tmp_path: Path) -> None:
    from dailykit import write_days

    sources = tmp_path / "days"
    sources.mkdir()
    scanned = [refzarr.scan(path) for path in write_days(sources, 3)]
    repo = _repository(tmp_path, sources)
    session = repo.writable_session("main")
    refzarr.to_icechunk(refzarr.combine(scanned[:2], concat_dims=["time"]), session.store)
    session.commit("two days")
    session = repo.writable_session("main")
    with pytest.raises(refzarr.IncompatibleError, match=r"duplicate coordinate values"):
        refzarr.to_icechunk(scanned[1], session.store, append_dim="time")
    assert not session.has_uncommitted_changes


def test_cli_scan_writes_and_appends_to_a_local_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dailykit import write_days
    from refzarr.cli import main

    sources = tmp_path / "days"
    sources.mkdir()
    days = write_days(sources, 5)
    repo_path = tmp_path / "repo"
    common = ["-o", str(repo_path), "--format", "icechunk", "--concat-dim", "time"]
    assert main(["scan", *map(str, days[:3]), *common, "--message", "first"]) == 0
    assert main(["scan", *map(str, days[3:]), *common, "--append-dim", "time"]) == 0
    capsys.readouterr()
    prefix = sources.resolve().as_uri() + "/"
    repo = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(repo_path)),
        authorize_virtual_chunk_access=container_credentials([prefix]),
    )
    messages = [snapshot.message for snapshot in repo.ancestry(branch="main")]
    assert messages[:2] == ["refzarr scan of 2 files", "first"]
    got = xr.open_zarr(repo.readonly_session("main").store, consolidated=False).load()
    scanned = [refzarr.scan(path) for path in days]
    expected = refzarr.open_dataset(refzarr.combine(scanned, concat_dims=["time"])).load()
    xr.testing.assert_identical(got, expected)
