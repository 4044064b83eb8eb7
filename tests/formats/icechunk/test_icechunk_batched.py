"""Icechunk at archive scale: a refresh of several changed files writes each array once (the
rescans batched before zarr starts its I/O thread, so a process pool can fork); the record
of sources read and written through the store's key-value API; every scan's region found in
one pass; many one-chunk checksums written as chunk specs rather than one call each."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

import refzarr
from refzarr import RefFormatError, RefGroup
from refzarr.formats.icechunk.columns import MIN_CHUNKS_PER_CALL, Columns, arr_calls
from refzarr.formats.icechunk.record import scan_regions
from refzarr.formats.icechunk.rootdoc import add_attributes, group_attributes, holds_group
from refzarr.model import ArrayMeta, ChunkManifest, RefArray
from refzarr.sources.record import read_record, record_of_document
from sourceskit import touch_later

icechunk = pytest.importorskip("icechunk")

from refzarr.formats.icechunk.repository import container_credentials  # noqa: E402


def _day(path: Path, day: int, *, scale: float = 1.0, sparse: bool = False) -> Path:
    """Two arrays of 2 x 2 chunks (``v``, ``w``) and ``time``; ``sparse``: two chunks of
    ``w`` never written (missing: the fill value)."""
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 8)
        ds.createVariable("time", "f8", ("time",))[:] = np.arange(4) + 4 * day
        values = (np.arange(32, dtype="f4").reshape(4, 8) + 4 * day) * scale
        v = ds.createVariable("v", "f4", ("time", "x"), chunksizes=(2, 4), zlib=True)
        v[:] = values
        w = ds.createVariable("w", "f4", ("time", "x"), chunksizes=(2, 4), fill_value=-9.0)
        if sparse:
            w[0:2, 0:4], w[2:4, 4:8] = -values[0:2, 0:4], -values[2:4, 4:8]
        else:
            w[:] = -values
    return path


def _read(repo: Path, folder: Path) -> xr.Dataset:
    prefix = folder.resolve().as_uri() + "/"
    found = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(repo)),
        authorize_virtual_chunk_access=container_credentials([prefix]),
    )
    return xr.open_zarr(found.readonly_session("main").store, consolidated=False).load()


def _expected(days: list[Path]) -> xr.Dataset:
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as ds:
        return ds.load()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "data"
    out.mkdir()
    return out


def test_refresh_of_several_files_writes_each_array_once(
    tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    days = [_day(folder / f"d{k}.nc", k) for k in range(5)]
    repo = tmp_path / "repo"
    group = refzarr.combine([refzarr.scan(p) for p in days], concat_dims="time")
    refzarr.commit_icechunk(group, repo)
    for k, kwargs in ((0, {"scale": -1.0}), (2, {"sparse": True}), (4, {"scale": 3.0})):
        _day(days[k], k, **kwargs)
        touch_later(days[k])
    from refzarr.sources import refresh as sources_refresh

    opened: Counter[str] = Counter()
    batches: list[list[str]] = []
    real_open, real_rescan = zarr.open_array, sources_refresh.rescan_many

    def counting_open(*args: Any, **kwargs: Any) -> Any:
        opened[kwargs["path"]] += 1
        return real_open(*args, **kwargs)

    def spying_rescan(scans: Any, options: Any) -> Any:
        batches.append([scan.url for scan in scans])
        return real_rescan(scans, options)

    monkeypatch.setattr(zarr, "open_array", counting_open)
    monkeypatch.setattr(sources_refresh, "rescan_many", spying_rescan)
    changed = refzarr.refresh(repo)
    assert sorted(c.url for c in changed) == sorted(str(days[k].resolve()) for k in (0, 2, 4))
    assert [sorted(b) for b in batches] == [sorted(c.url for c in changed)]  # one batch
    assert opened == {"v": 1, "w": 1}  # not once per file
    got = _read(repo, folder)
    xr.testing.assert_identical(got, _expected(days))
    assert np.isnan(got.w.values[8:10, 4:8]).all()  # deleted: missing now, masked fill
    assert refzarr.check_sources(repo) == []


_RESCAN_THREADS = """
import sys, threading
from refzarr.formats.icechunk.refresh import refresh_icechunk
from refzarr.sources import refresh

real = refresh.rescan_many
def spy(scans, options):
    print("threads:", sorted(t.name for t in threading.enumerate()))
    return real(scans, options)
refresh.rescan_many = spy
print(len(refresh_icechunk(sys.argv[1]).changes), "refreshed")
"""


def test_the_rescans_run_before_zarr_starts_its_thread(tmp_path: Path, folder: Path) -> None:
    """With zarr's I/O thread running, a process pool cannot fork its workers (it would
    start fresh ones, each importing everything again): in a fresh process, the refresh
    reads the record and rescans before zarr starts that thread."""
    days = [_day(folder / f"d{k}.nc", k) for k in range(3)]
    repo = tmp_path / "repo"
    refzarr.commit_icechunk(
        refzarr.combine([refzarr.scan(p) for p in days], concat_dims="time"), repo
    )
    for path in days[:2]:
        touch_later(path)
    done = subprocess.run(
        [sys.executable, "-c", _RESCAN_THREADS, str(repo)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "threads: ['MainThread']" in done.stdout
    assert "2 refreshed" in done.stdout


# -- the record through the store --------------------------------------------------------------


def test_attributes_added_through_the_store_read_back_through_zarr() -> None:
    store = zarr.storage.MemoryStore()
    zarr.create_group(store, attributes={"a": 1, "b": "old"})
    zarr.create_array(store, name="x", shape=(2,), dtype="i4")
    add_attributes(store, "", {"b": {"new": [1, 2]}, "c": None}, "memory")
    root = zarr.open_group(store, mode="r")
    assert list(root.attrs.asdict().items()) == [("a", 1), ("b", {"new": [1, 2]}), ("c", None)]
    assert root["x"].shape == (2,)
    assert group_attributes(store, "", "memory") == root.attrs.asdict()
    assert holds_group(store, "")
    assert not holds_group(store, "x")
    with pytest.raises(RefFormatError, match=r"memory: no Zarr v3 group at 'x'"):
        group_attributes(store, "x", "memory")


def test_attributes_added_from_inside_a_running_event_loop() -> None:
    """A notebook runs an event loop: the store is then driven from a thread of its own."""
    store = zarr.storage.MemoryStore()
    zarr.create_group(store, path="g", attributes={"a": 1})

    async def inside() -> dict[str, Any]:
        add_attributes(store, "g", {"b": 2}, "memory")
        return group_attributes(store, "/g/", "memory")

    assert asyncio.run(inside()) == {"a": 1, "b": 2}


def test_a_record_document_is_read_as_the_group_record_reads_it() -> None:
    doc = {
        "version": 1,
        "scans": [
            {
                "url": "/d/a.nc",
                "format": "hdf5",
                "options": {"x": [1]},
                "files": {"/d/a.nc": {"size": 3}},
            }
        ],
    }
    assert record_of_document(doc, "here") == read_record(RefGroup(sources=doc), "here")
    assert record_of_document(None, "here") == []
    with pytest.raises(RefFormatError, match="here: its record of sources is no JSON object"):
        record_of_document(["scans"], "here")  # type: ignore[arg-type]


# -- regions in one pass -----------------------------------------------------------------------


def _naive_regions(grid: tuple[int, ...], ids: Any, urls: list[str], recorded: int) -> Any:
    """Each recorded file's box of chunks where no other file's (nor an unrecorded one's)
    chunk is inside it, scan by scan."""
    out = {}
    for k in range(recorded):
        mine = np.argwhere(ids == k)
        if not len(mine):
            continue
        start, stop = mine.min(axis=0), mine.max(axis=0) + 1
        inside = ids[tuple(slice(a, b) for a, b in zip(start, stop, strict=True))]
        if np.isin(inside, (k, -1)).all():
            out[urls[k]] = {"v": [start.tolist(), stop.tolist()]}
    return out


@pytest.mark.parametrize("seed", range(6))
def test_regions_equal_a_scan_by_scan_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(40):
        ndim = int(rng.integers(1, 4))
        grid = tuple(int(n) for n in rng.integers(1, 7, ndim))
        count = int(rng.integers(1, 7))
        urls = [f"/d/f{k}.nc" for k in range(count)]
        if rng.random() < 0.5:  # files in slabs along an axis, as combine lays them out
            axis = int(rng.integers(0, ndim))
            ids = np.indices(grid)[axis] * count // grid[axis]
        else:  # files anywhere
            ids = rng.integers(0, count, grid)
        ids[rng.random(grid) < 0.2] = -1
        lengths = (ids >= 0).astype(np.uint64)
        manifest = ChunkManifest.from_arrays(urls, ids, np.zeros(grid, np.uint64), lengths)
        meta = ArrayMeta(shape=tuple(2 * n for n in grid), chunks=(2,) * ndim, dtype=np.dtype("f4"))
        recorded = int(rng.integers(1, count + 1))  # the others: files no scan recorded
        scans = [
            {"url": u, "format": "hdf5", "options": {}, "files": {u: {"size": 1}}}
            for u in urls[:recorded]
        ]
        record = read_record(RefGroup(sources={"version": 1, "scans": scans}))
        found = scan_regions({"v": RefArray(meta, manifest)}, record)
        assert found == _naive_regions(grid, ids, urls, recorded)


# -- many checksums of one chunk each ------------------------------------------------------------


def test_many_one_chunk_checksums_are_left_to_chunk_specs() -> None:
    def columns(n: int) -> Columns:
        return Columns(
            np.arange(n, dtype=np.int64),
            np.arange(n, dtype=np.int64),
            [f"s3://x/{k}" for k in range(n)],
            np.zeros(n, dtype=np.uint64),
            np.full(n, 10, dtype=np.uint64),
        )

    few, many = 16, 200  # a file of one chunk each, each file its own ETag
    assert len(arr_calls((few,), columns(few), {f"s3://x/{k}": str(k) for k in range(few)})) == few
    assert arr_calls((many,), columns(many), {f"s3://x/{k}": str(k) for k in range(many)}) is None
    slabs = Columns(  # the same files with MIN_CHUNKS_PER_CALL chunks each: boxes
        np.arange(many * MIN_CHUNKS_PER_CALL, dtype=np.int64),
        np.repeat(np.arange(many, dtype=np.int64), MIN_CHUNKS_PER_CALL),
        [f"s3://x/{k}" for k in range(many)],
        np.zeros(many * MIN_CHUNKS_PER_CALL, dtype=np.uint64),
        np.full(many * MIN_CHUNKS_PER_CALL, 10, dtype=np.uint64),
    )
    etags = {f"s3://x/{k}": str(k) for k in range(many)}
    calls = arr_calls((many * MIN_CHUNKS_PER_CALL,), slabs, etags)
    assert calls is not None
    assert len(calls) == many
