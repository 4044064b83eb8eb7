"""Icechunk 2.x's column-wise ``set_virtual_refs_arr``: the arguments `arr_calls` builds
(one call per checksum, each the box of its chunks); the writer's guarded path through a
stand-in that gives an Icechunk 1.x store the 2.x method; and, where the installed Icechunk
has it (2.x, Python 3.12+), the real method: slabs with gaps, checksums, files interleaved in
the grid (overlapping boxes; too scattered: chunk specs), appends at an offset."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

import refzarr
from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup
from refzarr.formats.icechunk.columns import MAX_BOX_RATIO, Columns, arr_calls


def _columns(numbers: list[int], ids: list[int], urls: list[str]) -> Columns:
    n = len(numbers)
    return Columns(
        np.asarray(numbers, dtype=np.int64),
        np.asarray(ids, dtype=np.int64),
        urls,
        np.arange(n, dtype=np.uint64) * 100,
        np.full(n, 10, dtype=np.uint64),
    )


WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_one_call_per_checksum_each_the_box_of_its_chunks() -> None:
    # a 4 x 2 grid: rows 0-1 from a.nc (an ETag), rows 2-3 from b.nc (a time)
    columns = _columns(list(range(8)), [0, 0, 0, 0, 1, 1, 1, 1], ["s3://x/a.nc", "s3://x/b.nc"])
    calls = arr_calls((4, 2), columns, {"s3://x/a.nc": '"e1"', "s3://x/b.nc": WHEN}, (10, 0))
    assert calls is not None
    first, second = calls
    assert (first.chunk_grid_shape, first.arr_offset, first.checksum) == ((2, 2), (10, 0), '"e1"')
    assert first.locations == ["s3://x/a.nc"] * 4
    assert first.offsets.tolist() == [0, 100, 200, 300]
    assert (second.chunk_grid_shape, second.arr_offset, second.checksum) == ((2, 2), (12, 0), WHEN)
    assert second.offsets.tolist() == [400, 500, 600, 700]
    assert second.lengths.dtype == np.uint64
    assert not first.has_gaps


def test_files_of_one_checksum_share_a_call_and_gaps_are_empty() -> None:
    columns = _columns([0, 3], [0, 1], ["file:///d/a.nc", "file:///d/b.nc"])
    (call,) = arr_calls((2, 2), columns, {})  # no record: no checksum for either
    assert call.checksum is None
    assert call.locations == ["file:///d/a.nc", "", "", "file:///d/b.nc"]
    assert call.offsets.tolist() == [0, 0, 0, 100]
    assert call.has_gaps


def test_scattered_files_are_left_to_chunk_specs() -> None:
    n, files = 4000, MAX_BOX_RATIO + 2  # files interleaved: each box spans the whole grid
    urls = [f"s3://x/{k}" for k in range(files)]
    columns = _columns(list(range(n)), [k % files for k in range(n)], urls)
    assert arr_calls((n,), columns, {url: str(k) for k, url in enumerate(urls)}) is None
    (dense,) = arr_calls((n,), columns, {})  # one checksum: one dense box
    assert not dense.has_gaps


def test_zero_dimensional_and_empty_arrays() -> None:
    (call,) = arr_calls((), _columns([0], [0], ["s3://x/a"]), {}, ())
    assert (call.chunk_grid_shape, call.arr_offset, call.locations) == ((), (), ["s3://x/a"])
    assert arr_calls((3,), _columns([], [], []), {}) == []


# -- the writer's guarded path ---------------------------------------------------------------

icechunk = pytest.importorskip("icechunk")

from refzarr.formats.icechunk.repository import (  # noqa: E402
    commit_icechunk,
    container_credentials,
    open_repository,
    source_prefixes,
)
from refzarr.formats.icechunk.write import to_icechunk  # noqa: E402


def _day(path: Path, day: int) -> Path:
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 8)
        time = ds.createVariable("time", "f8", ("time",))
        time[:] = np.arange(4) + 4 * day
        v = ds.createVariable("v", "f4", ("time", "x"), chunksizes=(2, 4), zlib=True)
        values = np.arange(32, dtype="f4").reshape(4, 8) + 4 * day
        if day == 1:  # two chunks never written: the box of its chunks has gaps
            v[0:2, 0:4], v[2:4, 4:8] = values[0:2, 0:4], values[2:4, 4:8]
        else:
            v[:] = values
    os.utime(path, (1_700_000_000 + day, 1_700_000_000 + day))  # one checksum per file
    return path


class _Columnar:
    """Gives an Icechunk 1.x store the 2.x ``set_virtual_refs_arr`` (empty locations
    skipped, as from Icechunk 2.0's fix; ``skips=False``: refused, as before it)."""

    def __init__(self, store: Any, *, skips: bool = True) -> None:
        self.store, self.skips, self.calls = store, skips, []

    def __call__(
        self,
        array_path: str,
        chunk_grid_shape: list[int],
        locations: list[str],
        offsets: Any,
        lengths: Any,
        *,
        validate_containers: bool = True,
        arr_offset: list[int] | None = None,
        checksum: Any = None,
    ) -> Any:
        assert len(locations) == len(offsets) == len(lengths) == int(np.prod(chunk_grid_shape))
        assert offsets.dtype == lengths.dtype == np.uint64
        self.calls.append((array_path, tuple(chunk_grid_shape), checksum))
        if "" in locations and not self.skips:
            raise ValueError("cannot parse URL ''")
        corner = np.asarray(arr_offset or [0] * len(chunk_grid_shape))
        specs = [
            icechunk.VirtualChunkSpec(
                (np.unravel_index(k, chunk_grid_shape) + corner).tolist(),
                location,
                int(offsets[k]),
                int(lengths[k]),
                etag_checksum=checksum if isinstance(checksum, str) else None,
                last_updated_at_checksum=checksum if isinstance(checksum, datetime) else None,
            )
            for k, location in enumerate(locations)
            if location
        ]
        return self.store.set_virtual_refs(
            array_path, specs, validate_containers=validate_containers
        )


@pytest.mark.parametrize("skips", [True, False], ids=["skips-gaps", "refuses-gaps"])
def test_the_writer_uses_columns_where_icechunk_has_them(tmp_path: Path, skips: bool) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    days = [_day(folder / f"d{k}.nc", k) for k in range(3)]
    group = refzarr.combine([refzarr.scan(p) for p in days], concat_dims="time")
    commit_icechunk(group, tmp_path / "repo")  # a repository with the containers
    prefix = folder.resolve().as_uri() + "/"
    repo = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        authorize_virtual_chunk_access=container_credentials([prefix]),
    )
    session = repo.writable_session("main")
    writable = session.store  # a new object at each access: keep this one
    columnar = _Columnar(writable, skips=skips)
    writable.set_virtual_refs_arr = columnar  # type: ignore[attr-defined]
    to_icechunk(group, writable)
    session.commit("columns")
    calls = [c[1:] for c in columnar.calls if c[0] == "v"]
    days_written = 3 if skips else 2  # refused at day 1's gaps: chunk specs from there on
    assert calls == [
        ((2, 2), datetime(2023, 11, 14, 22, 13, 20 + k, tzinfo=UTC)) for k in range(days_written)
    ]
    store = repo.readonly_session("main").store
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as expected:
        xr.testing.assert_equal(xr.open_zarr(store, consolidated=False).load(), expected.load())
    with netCDF4.Dataset(days[1], "a") as ds:
        ds["v"][0, 0] = -1.0  # a chunk written: the file changed
    with pytest.raises(icechunk.IcechunkError, match="checksum"):
        xr.open_zarr(repo.readonly_session("main").store, consolidated=False).v.values  # noqa: B018


# -- the real set_virtual_refs_arr (Icechunk 2.x) ----------------------------------------------

HAS_COLUMNS = hasattr(icechunk.IcechunkStore, "set_virtual_refs_arr")
needs_columns = pytest.mark.skipif(
    not HAS_COLUMNS, reason="the installed Icechunk has no store.set_virtual_refs_arr"
)


class _Spy:
    """Counts the writer's ``set_virtual_refs_arr`` calls, passing them to the real method."""

    def __init__(self, method: Any) -> None:
        self.method, self.calls = method, []

    def __call__(self, array_path: str, chunk_grid_shape: list[int], *args: Any, **kw: Any) -> Any:
        self.calls.append((array_path, tuple(chunk_grid_shape), kw.get("checksum")))
        return self.method(array_path, chunk_grid_shape, *args, **kw)


def _spied(repo: Any) -> tuple[Any, Any, _Spy]:
    session = repo.writable_session("main")
    store = session.store  # a new object at each access: keep this one
    spy = _Spy(store.set_virtual_refs_arr)
    store.set_virtual_refs_arr = spy
    return session, store, spy


@needs_columns
def test_real_columns_slabs_with_gaps_and_checksums(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    days = [_day(folder / f"d{k}.nc", k) for k in range(3)]
    group = refzarr.combine([refzarr.scan(p) for p in days], concat_dims="time")
    commit_icechunk(group, tmp_path / "repo")  # a repository with the containers
    repo = open_repository(str(tmp_path / "repo"), None, None, source_prefixes(group))
    session, store, spy = _spied(repo)
    to_icechunk(group, store)
    session.commit("columns")
    assert [c[1:] for c in spy.calls if c[0] == "v"] == [
        ((2, 2), datetime(2023, 11, 14, 22, 13, 20 + k, tzinfo=UTC)) for k in range(3)
    ]
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as expected:
        xr.testing.assert_equal(_read(repo), expected.load())
    with netCDF4.Dataset(days[2], "a") as ds:
        ds["v"][0, 0] = -1.0  # a chunk written: the file changed
    with pytest.raises(icechunk.IcechunkError, match="checksum"):
        _read(repo).v.values  # noqa: B018


@needs_columns
def test_real_columns_append_at_an_offset(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    days = [_day(folder / f"d{k}.nc", k) for k in (0, 2)]
    groups = [refzarr.scan(p) for p in days]
    commit_icechunk(groups[0], tmp_path / "repo")
    repo = open_repository(str(tmp_path / "repo"), None, None, source_prefixes(groups[1]))
    session, store, spy = _spied(repo)
    to_icechunk(groups[1], store, append_dim="time")
    session.commit("append")
    assert [c[1] for c in spy.calls if c[0] == "v"] == [(2, 2)]
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as expected:
        xr.testing.assert_equal(_read(repo), expected.load())


def _plain(repo: Any) -> tuple[Any, Any, None]:
    session = repo.writable_session("main")
    return session, session.store, None


def _read(repo: Any) -> xr.Dataset:
    return xr.open_zarr(repo.readonly_session("main").store, consolidated=False).load()


def _interleaved(
    folder: Path, owner: np.ndarray[Any, Any]
) -> tuple[RefGroup, np.ndarray[Any, Any]]:
    """An int32 array of one-element chunks whose chunk (i, j) is in file ``owner[i, j]``, each
    file with its own modification time (so its own checksum) in the group's record."""
    values = np.arange(owner.size, dtype="<i4").reshape(owner.shape)
    count = int(owner.max()) + 1
    urls = [str(folder / f"part{k}.bin") for k in range(count)]
    offsets = np.zeros(owner.shape, dtype=np.uint64)
    scans = []
    for k, url in enumerate(urls):
        mine = owner == k
        offsets[mine] = np.arange(int(mine.sum()), dtype=np.uint64) * 4
        Path(url).write_bytes(values[mine].tobytes())
        os.utime(url, (1_700_000_000 + k, 1_700_000_000 + k))
        when = datetime.fromtimestamp(1_700_000_000 + k, UTC).isoformat()
        files = {url: {"size": int(mine.sum()) * 4, "mtime": when}}
        scans.append({"url": url, "format": "raw", "options": {}, "files": files})
    manifest = ChunkManifest.from_arrays(urls, owner, offsets, np.full(owner.shape, 4, np.uint64))
    meta = ArrayMeta(
        shape=owner.shape,
        chunks=(1, 1),
        dtype=np.dtype("<i4"),
        fill_value=-1,
        dimension_names=("y", "x"),
    )
    array = RefArray(meta, manifest)
    return RefGroup(members={"v": array}, sources={"version": 1, "scans": scans}), values


@pytest.mark.parametrize(
    ("files", "by_columns"),
    [(2, True), (16, False)],
    ids=["checkerboard-overlapping-boxes", "round-robin-too-scattered"],
)
def test_files_interleaved_in_the_grid(tmp_path: Path, files: int, by_columns: bool) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    y, x = np.indices((40, 40))
    owner = (y + x) % 2 if files == 2 else (y * 40 + x) % files
    group, values = _interleaved(folder, owner)
    repo = open_repository(str(tmp_path / "repo"), None, None, source_prefixes(group), create=True)
    session, store, spy = _spied(repo) if HAS_COLUMNS else _plain(repo)
    to_icechunk(group, store)
    session.commit("interleaved")
    if spy is not None:
        assert len(spy.calls) == (files if by_columns else 0)
    got = zarr.open_array(repo.readonly_session("main").store, path="v", mode="r")[:]
    np.testing.assert_array_equal(got, values)
