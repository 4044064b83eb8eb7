"""Icechunk's edges on both sides (1.x and 2.x): a repository at a bucket's root, chunks of
0 bytes, the CLI's Rust warnings about local repositories, local paths through symbolic
links."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import refzarr
from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup, UnsupportedFeatureError
from refzarr.cli import main
from refzarr.errors import ChunkDecodeError
from refzarr.model import WHOLE_FILE
from sourceskit import write_day

icechunk = pytest.importorskip("icechunk")

from refzarr.formats.icechunk.reading import is_icechunk_repository  # noqa: E402
from refzarr.formats.icechunk.repository import (  # noqa: E402
    commit_icechunk,
    container_credentials,
    open_repository,
)
from refzarr.formats.icechunk.write import absolute_url, to_icechunk  # noqa: E402

_MAJOR_MINOR = tuple(int(part) for part in icechunk.__version__.split(".")[:2])
ROOT_REFUSED = _MAJOR_MINOR >= (2, 1)
"""Icechunk 2.1+ creates no repository at a bucket's root (its InvalidInputError says so)."""


def _local_repo(repo: Path, folder: Path) -> Any:
    prefix = folder.resolve().as_uri() + "/"
    storage = icechunk.local_filesystem_storage(str(repo))
    credentials = container_credentials([prefix])
    return icechunk.Repository.open(storage, authorize_virtual_chunk_access=credentials)


# -- a repository at a bucket's root ---------------------------------------------------------


def test_a_repository_at_a_bucket_root(
    s3: tuple[str, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2.1+: a named refzarr error saying to use a prefix, through the API and the CLI, and
    nothing written to the bucket; 1.x: the repository is made there and reads back."""
    import s3fs

    bucket, options = s3
    fs = s3fs.S3FileSystem(**options)
    day = write_day(tmp_path / "d0.nc", 0)
    fs.put(str(day), f"{bucket}/data/d0.nc")
    group = refzarr.scan(f"s3://{bucket}/data/d0.nc", storage_options=options)
    argv = ["scan", f"s3://{bucket}/data/d0.nc", "-o", f"s3://{bucket}/", "--format", "icechunk"]
    argv += ["--storage-options", json.dumps(options)]
    if not ROOT_REFUSED:
        commit_icechunk(group, f"s3://{bucket}", storage_options=options, message="at root")
        repo = open_repository(f"s3://{bucket}", options, options, [f"s3://{bucket}/"])
        got = xr.open_zarr(repo.readonly_session("main").store, consolidated=False)
        with xr.open_dataset(day) as expected:
            xr.testing.assert_equal(got.load(), expected.load())
        return
    for root in (f"s3://{bucket}", f"s3://{bucket}/"):
        with pytest.raises(UnsupportedFeatureError) as refused:
            commit_icechunk(group, root, storage_options=options)
        message = str(refused.value)
        assert message.startswith(f"{root}: Icechunk {icechunk.__version__} creates no ")
        assert f"give a prefix inside the bucket, e.g. s3://{bucket}/repo" in message
        assert isinstance(refused.value.__cause__, icechunk.IcechunkError)
    capsys.readouterr()
    assert main(argv) == 1
    shown = capsys.readouterr().err
    assert shown.startswith(f"refzarr: error: s3://{bucket}/: Icechunk ")
    assert "give a prefix inside the bucket" in shown
    assert fs.ls(bucket, refresh=True) == [f"{bucket}/data"]  # nothing written


# -- chunks of 0 bytes -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("empty")
    path = folder / "values.bin"
    path.write_bytes(np.arange(8, dtype="<i4").tobytes())
    (folder / "empty.bin").write_bytes(b"")
    return path


def _group(manifest: ChunkManifest) -> RefGroup:
    meta = ArrayMeta(
        shape=(8,), chunks=(4,), dtype=np.dtype("<i4"), fill_value=-1, dimension_names=("x",)
    )
    return RefGroup(members={"inner": RefGroup(members={"v": RefArray(meta, manifest)})})


def _empty_cases(source: Path) -> Iterator[tuple[str, RefGroup, str]]:
    url = str(source)
    referenced = ChunkManifest.from_arrays([url], [0, 0], [0, 16], [16, 0])
    yield "referenced", _group(referenced), f"({url} at byte 16; 1 such chunk(s))"
    inlined = ChunkManifest.from_arrays([url], [0, -2], [0, 0], [16, 0], {(1,): b""})
    yield "inlined", _group(inlined), "(inlined; 1 such chunk(s))"


@pytest.mark.parametrize("case", ["referenced", "inlined"])
def test_a_chunk_of_zero_bytes_is_named_and_nothing_is_written(
    source: Path, tmp_path: Path, case: str
) -> None:
    """Every reader fails on it (refzarr here; fsspec + zarr in test_zero_length_everywhere);
    the Icechunk writer names it on 1.x and 2.x alike, before the repository is made."""
    group, where = next((g, w) for name, g, w in _empty_cases(source) if name == case)
    with pytest.raises(ChunkDecodeError, match="decoded to 0 bytes"):
        refzarr.open_dataset(group, group="inner").load()
    with pytest.raises(UnsupportedFeatureError) as refused:
        commit_icechunk(group, tmp_path / "repo")
    assert str(refused.value).startswith(f"array 'inner/v': chunk (1,) is 0 bytes long {where}")
    assert "rescan the source" in str(refused.value)
    assert not (tmp_path / "repo").exists()


@pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")
def test_zero_length_everywhere(source: Path, tmp_path: Path) -> None:
    """The JSON and Parquet outputs keep such a chunk as it is: fsspec + zarr fail on it too
    (never fill values), which is why Icechunk gets no "missing" chunk in its place."""
    import zarr

    from roundtrip import open_zarr_group

    for name, group, _ in _empty_cases(source):
        for suffix in ("json", "parq"):
            target = tmp_path / f"{name}.{suffix}"
            refzarr.write(group, target)
            array = open_zarr_group(str(target), "inner")["v"]
            assert isinstance(array, zarr.Array)
            assert array[:4].tolist() == [0, 1, 2, 3]
            with pytest.raises(ValueError, match="size 0"):
                array[4:]


def test_an_empty_file_referenced_whole(source: Path, tmp_path: Path) -> None:
    empty = str(source.parent / "empty.bin")
    whole = ChunkManifest.from_arrays(
        [str(source), empty], [0, 1], [0, 0], np.array([16, WHOLE_FILE], dtype=np.uint64)
    )
    group = _group(whole)
    commit_icechunk(_group(ChunkManifest.missing((2,))), tmp_path / "repo")  # containers
    repo = open_repository(str(tmp_path / "repo"), None, None, [source.parent.as_uri() + "/"])
    session = repo.writable_session("main")
    with pytest.raises(UnsupportedFeatureError, match=f"the whole of {empty}, an empty file"):
        to_icechunk(group, session.store)


# -- the CLI's Rust warnings -----------------------------------------------------------------


@pytest.fixture
def icechunk_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Icechunk's logging as a fresh process has it (ICECHUNK_LOG unset), restored after."""
    monkeypatch.delenv("ICECHUNK_LOG", raising=False)
    icechunk.set_logs_filter(None)
    yield
    monkeypatch.undo()
    icechunk.set_logs_filter(None)


def _scan_twice(folder: Path, repo: Path) -> list[list[str]]:
    days = [write_day(folder / f"d{k}.nc", k) for k in range(2)]
    common = ["-o", str(repo), "--format", "icechunk"]
    first = ["scan", str(days[0]), *common]
    return [first, ["scan", str(days[1]), *common, "--append-dim", "time"]]


@pytest.mark.usefixtures("icechunk_logs")
def test_the_cli_prints_no_rust_warning_for_a_local_repository(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Icechunk writes its logs to the file descriptors itself (2.x to stderr, 1.x to
    stdout): a library call shows its local storage warning (refzarr leaves a library user's
    logging alone); the CLI, scanning, appending and validating, shows none on either."""
    folder = tmp_path / "days"
    folder.mkdir()
    library = refzarr.scan(write_day(folder / "lib.nc", 9))
    commit_icechunk(library, tmp_path / "library")
    commit_icechunk(library, tmp_path / "library", message="again")
    assert " WARN" in "".join(capfd.readouterr())
    for argv in [*_scan_twice(folder, tmp_path / "repo"), ["validate", str(tmp_path / "repo")]]:
        status = main([*argv, "--sources"] if argv[0] == "validate" else argv)
        assert status == 0
        captured = capfd.readouterr()
        assert "WARN" not in captured.err + captured.out, argv
    assert captured.out.startswith(f"{tmp_path / 'repo'}: OK")


@pytest.mark.usefixtures("icechunk_logs")
def test_icechunk_log_set_by_the_user_wins(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ICECHUNK_LOG", "warn")
    icechunk.set_logs_filter(None)
    folder = tmp_path / "days"
    folder.mkdir()
    for argv in _scan_twice(folder, tmp_path / "repo"):
        assert main(argv) == 0
    assert " WARN" in "".join(capfd.readouterr())


# -- local paths name what the system opens --------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
def test_local_paths_through_a_symbolic_link_and_dotdot(tmp_path: Path) -> None:
    """``link/..`` is the parent of the link's target, as the system opens it (not the
    folder holding the link, as text would have it): for the repository and the sources."""
    real = tmp_path / "real"
    (real / "inner").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real / "inner")
    day = write_day(real / "d0.nc", 0)
    through = f"{tmp_path}/link/../d0.nc"
    assert absolute_url(through, "v") == day.as_uri()
    assert absolute_url(f"file://{through}", "v") == day.as_uri()
    commit_icechunk(refzarr.scan(day), f"{tmp_path}/link/../repo")
    assert is_icechunk_repository(f"{tmp_path}/link/../repo")
    assert (real / "repo").is_dir()
    assert not (tmp_path / "repo").exists()
    got = xr.open_zarr(_local_repo(real / "repo", real).readonly_session("main").store)
    with xr.open_dataset(day) as expected:
        xr.testing.assert_equal(got.load(), expected.load())


# -- an append after a partial last chunk ----------------------------------------------------


def test_an_append_after_a_partial_last_chunk_is_named(tmp_path: Path) -> None:
    """Refused on 1.x and 2.x alike: the stored last chunk is padded (netCDF-4/HDF5 store
    edge chunks full-size), which a rectilinear grid (zarr 3.4 + Icechunk 2.x) cannot say."""
    days = [write_day(tmp_path / f"d{k}.nc", k, chunks=(3, 4)) for k in range(2)]
    commit_icechunk(refzarr.scan(days[0]), tmp_path / "repo", message="first")
    with pytest.raises(UnsupportedFeatureError) as refused:
        commit_icechunk(refzarr.scan(days[1]), tmp_path / "repo", append_dim="time")
    assert str(refused.value).startswith(
        "array 'v': the store's 4 values along 'time' end inside a chunk of 3, which the "
        "source stores padded to 3 values: no stored chunk grid can say that only 1 of them"
    )
    repo = _local_repo(tmp_path / "repo", tmp_path)
    assert next(s.message for s in repo.ancestry(branch="main")) == "first"
