"""Datasets read by refzarr under dask: what a task carries to a worker process, and what the
worker does with it (reads the set once, keeps the allow-list, source checks and credentials)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pytest
import xarray as xr

import refzarr
import refzarr.reader.array as array_module
import refzarr.reader.shared as shared
from dailykit import write_days
from refzarr.reader.xarray_backend import RefzarrBackendArray

S3Bucket = tuple[str, dict[str, Any]]

DAYS = 40


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """40 daily files combined along time, written as JSON and Parquet in one folder."""
    folder = tmp_path_factory.mktemp("dask-archive")
    files = write_days(folder / "files", DAYS)
    group = _combined(files)
    refzarr.write(group, str(folder / "refs.json"))
    refzarr.write(group, str(folder / "refs.parq"))
    return folder, files


@pytest.fixture(autouse=True)
def _no_opened_sets() -> None:
    shared._OPENED.clear()


def _task_array(ds: xr.Dataset, name: str = "air") -> Any:
    """The value of the graph key dask tasks of ``name`` read from (xarray's ``original-``)."""
    graph = dict(ds[name].data.__dask_graph__())
    (key,) = [k for k in graph if str(k).startswith("original-")]
    return graph[key]


def _combined(files: list[Path]) -> refzarr.RefGroup:
    return refzarr.combine([refzarr.scan(str(f)) for f in files], concat_dims="time")


def _backend(wrapped: Any) -> RefzarrBackendArray:
    """The backend array inside xarray's lazy wrappers."""
    while not isinstance(wrapped, RefzarrBackendArray):
        wrapped = wrapped.array
    return wrapped


@pytest.mark.parametrize("suffix", [".json", ".parq"])
def test_a_task_carries_the_sets_location_not_its_references(
    archive: tuple[Path, list[Path]], suffix: str
) -> None:
    folder, _ = archive
    refs = folder / f"refs{suffix}"
    ds = xr.open_dataset(refs, engine="refzarr", chunks={})
    # the set's references of 40 files weigh ~12 kB as JSON; pickled whole they were more
    assert os.path.getsize(folder / "refs.json") > 10_000
    assert len(pickle.dumps(_task_array(ds))) < 2_000
    with dask.config.set(scheduler="sync"):
        expected = ds.air.values
    copy = pickle.loads(pickle.dumps(ds))  # a Parquet set's lazy manifest pickles too
    with dask.config.set(scheduler="sync"):
        np.testing.assert_array_equal(copy.air.values, expected)


def test_a_worker_reads_the_set_once(
    archive: tuple[Path, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, _ = archive
    ds = refzarr.open_dataset(folder / "refs.parq", chunks={})
    task = pickle.dumps(_task_array(ds))
    reads: list[str] = []
    real_read = shared.read
    monkeypatch.setattr(shared, "read", lambda url, opts: reads.append(url) or real_read(url, opts))
    first, second = pickle.loads(task), pickle.loads(task)
    assert reads == [str(folder / "refs.parq")]
    assert _backend(first).reader is _backend(second).reader


def test_a_set_rewritten_since_opened_is_refused_in_workers(
    archive: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    _, files = archive
    refs = tmp_path / "refs.json"
    refzarr.write(_combined(files[:3]), refs)
    task = pickle.dumps(_task_array(refzarr.open_dataset(refs, chunks={})))
    refzarr.write(_combined(files[:4]), refs)  # a day appended
    with pytest.raises(refzarr.RefFormatError, match=r"changed since the dataset was open.*shape"):
        pickle.loads(task)


def test_source_checks_and_the_allow_list_hold_in_workers(
    archive: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    _, files = archive
    copies = []
    for f in files[:2]:
        copies.append(tmp_path / f.name)
        copies[-1].write_bytes(f.read_bytes())
    refs = tmp_path / "refs.json"
    refzarr.write(_combined(copies), refs)
    allowed = [tmp_path.as_uri() + "/"]
    ds = xr.open_dataset(refs, engine="refzarr", chunks={}, allowed_protocols=allowed)
    task = pickle.dumps(_task_array(ds))
    os.utime(copies[1], ns=(0, 0))  # touched since the scan
    worker = _backend(pickle.loads(task)).reader
    assert list(worker.reader.allowed) == allowed
    worker.read((0, slice(None), slice(None)))  # unchanged file: read
    with pytest.raises(refzarr.SourceChangedError, match=copies[1].name):
        worker.read((1, slice(None), slice(None)))


def test_processes_scheduler_reads_a_parquet_set_on_s3(
    archive: tuple[Path, list[Path]], s3: S3Bucket
) -> None:
    """Credentials given as storage options reach the worker processes."""
    import fsspec

    _, files = archive
    bucket, options = s3
    fs = fsspec.filesystem("s3", **options)
    urls = [f"s3://{bucket}/data/{f.name}" for f in files[:3]]
    for f, url in zip(files, urls, strict=False):
        fs.put_file(str(f), url)
    scans = [refzarr.scan(url, storage_options=options) for url in urls]
    refs = f"s3://{bucket}/refs.parq"
    refzarr.write(refzarr.combine(scans, concat_dims="time"), refs, storage_options=options)
    ds = refzarr.open_dataset(refs, storage_options=options, chunks={})
    expected = refzarr.open_dataset(refs, storage_options=options).air.values
    with dask.config.set(scheduler="processes", num_workers=1):
        np.testing.assert_array_equal(ds.air.mean("time").values, expected.mean(axis=0))


def test_a_one_task_read_starts_no_threads(
    archive: tuple[Path, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dask task's chunk is decoded in the task's thread (a pool per read cost 2-3 ms)."""
    folder, _ = archive
    ds = refzarr.open_dataset(folder / "refs.json")
    expected = ds.air.values
    pools: list[int] = []
    real = array_module.ThreadPoolExecutor

    def counted(*args: Any, **kwargs: Any) -> Any:
        pools.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(array_module, "ThreadPoolExecutor", counted)
    ds = refzarr.open_dataset(folder / "refs.json", chunks={})
    with dask.config.set(scheduler="sync"):
        np.testing.assert_array_equal(ds.air.values, expected)
    assert pools == []
    np.testing.assert_array_equal(refzarr.open_dataset(folder / "refs.json").air.values, expected)
    assert pools  # 40 files, 40 blocks: decoded on a pool


def test_a_store_opened_by_path_pickles_as_its_location(
    archive: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    folder, files = archive
    store = refzarr.ReferenceStore(folder / "refs.parq")
    assert len(pickle.dumps(store)) < 1_000  # the group pickled whole: ~12 kB
    first, second = pickle.loads(pickle.dumps(store)), pickle.loads(pickle.dumps(store))
    assert first is second  # one per process
    expected = refzarr.open_dataset(folder / "refs.parq").air.values
    with dask.config.set(scheduler="sync"):
        got = xr.open_zarr(first, zarr_format=2).air.values
    np.testing.assert_array_equal(got, expected)
    refs = tmp_path / "refs.json"
    refzarr.write(_combined(files[:2]), refs)
    task = pickle.dumps(refzarr.ReferenceStore(refs))
    refzarr.write(_combined(files[:3]), refs)
    with pytest.raises(refzarr.RefFormatError, match="changed since it was opened"):
        pickle.loads(task)


def test_a_long_lived_worker_reads_a_set_opened_again(
    archive: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    """A set rewritten with the same shape (refreshed, say) and opened again is read again
    by a worker that still holds the first opening's copy."""
    _, files = archive
    refs = tmp_path / "refs.json"
    refzarr.write(_combined(files[:2]), refs)
    first = pickle.loads(pickle.dumps(_task_array(refzarr.open_dataset(refs, chunks={}))))
    refzarr.write(_combined(files[2:4]), refs)
    ds = refzarr.open_dataset(refs, chunks={})
    second = pickle.loads(pickle.dumps(_task_array(ds)))
    expected = refzarr.open_dataset(refs).air.values
    np.testing.assert_array_equal(_backend(second).reader.read(...), expected)
    assert _backend(first).reader is not _backend(second).reader


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_virtual_dataset_copies_to_zarr(
    archive: tuple[Path, list[Path]], tmp_path: Path, zarr_format: int
) -> None:
    """Materialising: to_zarr chunk by chunk (the engine's encoding once held the reference
    set's codecs as dicts under "filters", which zarr refused)."""
    folder, _ = archive
    ds = refzarr.open_dataset(folder / "refs.parq", chunks={})
    assert ds.air.encoding["codecs"]
    with dask.config.set(scheduler="threads"):
        ds.to_zarr(tmp_path / "copy.zarr", zarr_format=zarr_format)
    copy = xr.open_zarr(tmp_path / "copy.zarr", zarr_format=zarr_format)
    xr.testing.assert_identical(copy.load(), refzarr.open_dataset(folder / "refs.parq").load())
