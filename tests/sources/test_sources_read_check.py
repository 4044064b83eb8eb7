"""Reads compare each source file with its scan's record (``check_sources``): a file rewritten
since its scan raises `SourceChangedError` instead of giving other bytes; one ``stat`` per
file per opened set, only for files read; remote files on request (``"all"``)."""

from __future__ import annotations

import json
import multiprocessing
import pickle
import re
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

import refzarr
import refzarr.sources.guard as guard_module
from refzarr import ChunkFetchError, SourceChangedError
from refzarr.cli import main
from sourceskit import touch_later, write_day

SIZE = 64


def write_plain(path: Path, scale: float) -> Path:
    """A netCDF4 file with one contiguous, uncompressed ``v(x)``: rewriting its values in
    place keeps its size and every offset (what a reference cannot tell)."""
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", SIZE)
        ds.createVariable("v", "f4", ("x",))[:] = np.arange(SIZE) * scale
    return path


def rewrite_in_place(path: Path, scale: float) -> None:
    """Other values at the same offsets, the size unchanged, the modification time later."""
    size = path.stat().st_size
    with netCDF4.Dataset(path, "r+") as ds:
        ds["v"][:] = np.arange(SIZE) * scale
    touch_later(path)
    assert path.stat().st_size == size


@pytest.fixture
def plain(tmp_path: Path) -> tuple[Path, Path]:
    """A plain file and its JSON reference set (with its record of sources)."""
    source = write_plain(tmp_path / "plain.nc", 1.0)
    target = tmp_path / "refs.json"
    refzarr.write(refzarr.scan(source), target)
    return source, target


def _read_dataset(target: Path, **kwargs: Any) -> np.ndarray:
    return np.asarray(refzarr.open_dataset(target, **kwargs)["v"].values)


def _read_engine(target: Path, **kwargs: Any) -> np.ndarray:
    with xr.open_dataset(target, engine="refzarr", **kwargs) as ds:
        return np.asarray(ds["v"].values)


def _read_store(target: Path, **kwargs: Any) -> np.ndarray:
    store = refzarr.ReferenceStore(target, **kwargs)
    return np.asarray(zarr.open_group(store, mode="r", zarr_format=2)["v"][:])


def _read_tree(target: Path, **kwargs: Any) -> np.ndarray:
    return np.asarray(refzarr.open_datatree(target, **kwargs)["v"].values)


def _read_dask(target: Path, **kwargs: Any) -> np.ndarray:
    return np.asarray(refzarr.open_dataset(target, chunks={}, **kwargs)["v"].compute().values)


READS = [_read_dataset, _read_engine, _read_store, _read_tree, _read_dask]


@pytest.mark.parametrize("read", READS, ids=lambda f: f.__name__.removeprefix("_read_"))
def test_a_rewritten_file_raises_naming_it_and_the_refresh(
    plain: tuple[Path, Path], read: Callable[..., np.ndarray]
) -> None:
    source, target = plain
    np.testing.assert_array_equal(read(target), np.arange(SIZE, dtype="f4"))
    rewrite_in_place(source, 2.0)
    with pytest.raises(SourceChangedError) as caught:
        read(target)
    message = str(caught.value)
    assert message.startswith(f"{source.resolve()}: changed since it was scanned")
    size = f"size {source.stat().st_size:,} bytes"
    assert re.search(f"recorded {size}, modified .*Z; found {size}, modified .*Z", message)
    assert f"`refzarr refresh {target}`" in message
    assert isinstance(caught.value, ChunkFetchError)  # what callers already catch
    # unchecked, the rewrite reads other values in silence: what the check is for
    np.testing.assert_array_equal(read(target, check_sources="none"), np.arange(SIZE) * 2.0)
    assert refzarr.refresh(target)
    np.testing.assert_array_equal(read(target), np.arange(SIZE) * 2.0)


def test_a_group_read_names_the_set_generically(plain: tuple[Path, Path]) -> None:
    source, target = plain
    group = refzarr.read(target)
    rewrite_in_place(source, 2.0)
    with pytest.raises(SourceChangedError, match="`refzarr refresh REFS` on the reference set"):
        refzarr.open_dataset(group)["v"].load()
    with pytest.raises(SourceChangedError, match=re.escape(str(source.resolve()))):
        refzarr.ReferenceStore(group).reader.read([str(source.resolve())], [0], [8])


def test_cli_cat_checks_the_chunks_file(
    plain: tuple[Path, Path], capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    source, target = plain
    assert main(["cat", str(target), "v/0"]) == 0
    before = capsysbinary.readouterr().out
    rewrite_in_place(source, 2.0)
    assert main(["cat", str(target), "v/0"]) == 1
    err = capsysbinary.readouterr().err.decode()
    assert "changed since it was scanned" in err
    assert f"refzarr refresh {target}" in err
    assert main(["cat", str(target), "v/0", "--check-sources", "none"]) == 0
    assert capsysbinary.readouterr().out != before


def test_unchanged_files_read_with_one_stat_each_only_for_files_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    days = [write_day(tmp_path / f"day{k}.nc", k) for k in range(6)]
    group = refzarr.combine([refzarr.scan(p) for p in days], concat_dims="time")
    target = tmp_path / "refs.parq"
    refzarr.write(group, target)
    stats: list[str] = []
    real_state = guard_module._local_state

    def counting_state(url: str) -> Any:
        stats.append(url)
        return real_state(url)

    monkeypatch.setattr(guard_module, "_local_state", counting_state)
    ds = refzarr.open_dataset(target)  # loads `time` (inlined by the combine): no file
    assert stats == []
    for _ in range(3):
        ds["v"][4:12].load()  # days 1 and 2, a chunk at a time and again
        ds["v"][5, 2].load()
    assert sorted(stats) == [str(days[1].resolve()), str(days[2].resolve())]
    expected = xr.concat([xr.open_dataset(p) for p in days], dim="time")
    xr.testing.assert_equal(ds.load(), expected.load())
    assert len(stats) == 6  # every file once
    stats.clear()
    refzarr.open_dataset(target)["v"].load()  # another opened set checks again
    assert len(stats) == 6


def test_threads_share_one_check_per_file(plain: tuple[Path, Path]) -> None:
    source, target = plain
    ds = refzarr.open_dataset(target)
    with ThreadPoolExecutor(8) as pool:
        values = list(pool.map(lambda k: ds["v"][k].values, range(SIZE)))
    np.testing.assert_array_equal(values, np.arange(SIZE, dtype="f4"))
    rewrite_in_place(source, 3.0)
    # checked once per open set: a rewrite while it is open is not seen (open it again)
    assert ds["v"][3].values == 9.0
    fresh = refzarr.open_dataset(target)
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda k: _raised(lambda: fresh["v"][k].values), range(16)))
    assert all(isinstance(e, SourceChangedError) for e in outcomes), outcomes


def _raised(call: Callable[[], object]) -> BaseException | None:
    try:
        call()
    except BaseException as exc:  # returned for the assertion
        return exc
    return None


def test_a_pickled_store_checks_again(plain: tuple[Path, Path]) -> None:
    source, target = plain
    store = refzarr.ReferenceStore(target)
    np.testing.assert_array_equal(
        zarr.open_group(store, mode="r", zarr_format=2)["v"][:], np.arange(SIZE, dtype="f4")
    )
    rewrite_in_place(source, 2.0)
    copy = pickle.loads(pickle.dumps(store))  # a dask worker's
    with pytest.raises(SourceChangedError):
        zarr.open_group(copy, mode="r", zarr_format=2)["v"][:]
    unchecked = pickle.loads(pickle.dumps(refzarr.ReferenceStore(target, check_sources=False)))
    assert zarr.open_group(unchecked, mode="r", zarr_format=2)["v"][1] == 2.0


def test_a_forked_child_checks_with_the_reader_it_was_given(plain: tuple[Path, Path]) -> None:
    source, target = plain
    store = refzarr.ReferenceStore(target)
    url = str(source.resolve())
    assert bytes(store.reader.read([url], [0], [8])[0])  # the parent found the file unchanged
    rewrite_in_place(source, 2.0)
    context = multiprocessing.get_context("fork")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12)
        with context.Pool(1) as pool:
            outcome = pool.apply_async(_read_in_child, (store.reader, url)).get(timeout=60)
    assert outcome.startswith(f"SourceChangedError: {url}: changed since it was scanned")


def _read_in_child(reader: refzarr.io.RangeReader, url: str) -> str:
    try:
        reader.read([url], [0], [8])
    except Exception as exc:  # told to the parent as text
        return f"{type(exc).__name__}: {exc}"
    return "read"


def test_sets_without_record_and_inlined_chunks_read_as_before(
    plain: tuple[Path, Path], tmp_path: Path
) -> None:
    source, _ = plain
    foreign = tmp_path / "foreign.json"  # as another tool writes it: no record
    foreign.write_text(json.dumps(refzarr.to_kerchunk(refzarr.scan(source))))
    inlined = tmp_path / "inlined.json"
    refzarr.write(refzarr.scan(source, inline_threshold=10_000), inlined)
    rewrite_in_place(source, 2.0)
    np.testing.assert_array_equal(_read_dataset(foreign), np.arange(SIZE) * 2.0)
    np.testing.assert_array_equal(_read_dataset(inlined), np.arange(SIZE))


def test_a_vanished_file_is_named_by_the_read(plain: tuple[Path, Path]) -> None:
    source, target = plain
    source.unlink()
    with pytest.raises(ChunkFetchError, match="No such file") as caught:
        _read_dataset(target)
    assert not isinstance(caught.value, SourceChangedError)


def test_another_spelling_of_a_recorded_file_is_checked(plain: tuple[Path, Path]) -> None:
    source, target = plain
    group = refzarr.read(target)
    guard = guard_module.source_guard(group, "local")
    assert guard is not None
    spelled = f"file://{source.parent.resolve()}/./{source.name}"
    recorded = guard.recorded(str(source.resolve()))
    assert recorded is not None
    assert guard.recorded(spelled) == recorded
    rewrite_in_place(source, 2.0)
    with pytest.raises(SourceChangedError, match=re.escape(spelled)):
        guard(refzarr.io.RangeReader(), [spelled])


@pytest.mark.parametrize("value", ["yes", True, None, "remote"])
def test_check_sources_values_are_checked(plain: tuple[Path, Path], value: Any) -> None:
    _, target = plain
    with pytest.raises(ValueError, match="check_sources must be 'local'"):
        refzarr.open_dataset(target, check_sources=value)


# -- remote sources: on request ---------------------------------------------------------------


@pytest.fixture
def on_s3(
    tmp_path: Path, s3: tuple[str, dict[str, Any]], s3_proxy: tuple[str, dict[str, Any], Any]
) -> tuple[refzarr.RefGroup, str, dict[str, Any], Any, Callable[[], None]]:
    """A plain file scanned on S3 (its ETag recorded); yields the group, the object's URL,
    proxied options, the proxy, and a function that uploads a rewrite of the object."""
    import s3fs

    bucket, direct = s3
    _, options, proxy = s3_proxy
    fs = s3fs.S3FileSystem(**direct)
    url = f"s3://{bucket}/plain.nc"
    fs.put(str(write_plain(tmp_path / "plain.nc", 1.0)), url)
    group = refzarr.scan(url, storage_options=direct)
    assert group.sources["scans"][0]["files"][url]["etag"]

    def rewrite() -> None:
        fs.put(str(write_plain(tmp_path / "other.nc", 2.0)), url)

    return group, url, options, proxy, rewrite


def test_a_rewritten_s3_object_raises_with_all_and_reads_silently_by_default(
    on_s3: tuple[refzarr.RefGroup, str, dict[str, Any], Any, Callable[[], None]],
) -> None:
    group, url, options, proxy, rewrite = on_s3
    path = url.removeprefix("s3:/")
    proxy.reset()
    ds = refzarr.open_dataset(group, storage_options=options, check_sources="all")
    np.testing.assert_array_equal(ds["v"].values, np.arange(SIZE))
    ds["v"][:4].load()
    assert proxy.count("HEAD", path) == 1  # one metadata request per file per open set
    rewrite()
    with pytest.raises(SourceChangedError, match=f"{re.escape(url)}: changed .* ETag") as caught:
        refzarr.open_dataset(group, storage_options=options, check_sources="all")["v"].load()
    assert "refzarr refresh" in str(caught.value)
    proxy.reset()
    got = refzarr.open_dataset(group, storage_options=options)["v"].values  # default: local
    np.testing.assert_array_equal(got, np.arange(SIZE) * 2.0)
    assert proxy.count("HEAD") == 0


def test_plain_validate_reports_a_rewritten_s3_object_without_more_requests(
    on_s3: tuple[refzarr.RefGroup, str, dict[str, Any], Any, Callable[[], None]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    group, url, options, proxy, rewrite = on_s3
    target = tmp_path / "refs.json"
    refzarr.write(group, target)
    given = ["--storage-options", json.dumps(options)]
    proxy.reset()
    assert main(["validate", str(target), *given]) == 0
    requests = proxy.count()
    rewrite()
    proxy.reset()
    assert main(["validate", str(target), *given]) == 1
    assert proxy.count() == requests == 1  # the size's own request gives the ETag
    out, err = capsys.readouterr()
    assert f"CHANGED {url}: changed: ETag" in out
    assert f"`refzarr refresh {target}` scans them again" in err


# -- plain validate ---------------------------------------------------------------------------


def test_plain_validate_reports_a_rewritten_local_file(
    plain: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = plain
    assert main(["validate", str(target)]) == 0
    assert "OK (1 array, 1 file)" in capsys.readouterr().out
    rewrite_in_place(source, 2.0)
    assert main(["validate", str(target)]) == 1
    out, err = capsys.readouterr()
    assert out.startswith(f"CHANGED {source.resolve()}: changed: modified ")
    assert "FAILED" not in out  # every range still inside the file
    assert err == (
        f"refzarr: error: {target}: 1 of 1 source file changed since scanned "
        f"(`refzarr refresh {target}` scans them again)\n"
    )
    assert main(["refresh", str(target)]) == 0
    capsys.readouterr()
    assert main(["validate", str(target), "--decode"]) == 0
