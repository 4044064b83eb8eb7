"""Icechunk with sources that change: chunks carry their source's scan-time checksum; S3
repositories with virtual chunks on S3 (moto); commit conflicts and unreachable sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import xarray as xr

import refzarr
from refzarr import RefGroup, UnsupportedFeatureError
from refzarr.cli import main
from sourceskit import touch_later, write_day

icechunk = pytest.importorskip("icechunk")

from refzarr.formats.icechunk.repository import (  # noqa: E402
    CommitConflictError,
    commit_icechunk,
    container_credentials,
    source_prefixes,
)


def _local_repo(repo: Path, folder: Path) -> Any:
    prefix = folder.resolve().as_uri() + "/"
    credentials = container_credentials([prefix])
    storage = icechunk.local_filesystem_storage(str(repo))
    return icechunk.Repository.open(storage, authorize_virtual_chunk_access=credentials)


def _open(repo: Any) -> xr.Dataset:
    return xr.open_zarr(repo.readonly_session("main").store, consolidated=False)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "data"
    out.mkdir()
    return out


def test_a_rewritten_source_is_refused_by_icechunk_and_validate(
    tmp_path: Path, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    days = [write_day(folder / f"d{k}.nc", k) for k in range(2)]
    repo, refs = tmp_path / "repo", tmp_path / "refs.json"
    common = ["--concat-dim", "time"]
    assert main(["scan", *map(str, days), "-o", str(repo), "--format", "icechunk", *common]) == 0
    assert main(["scan", *map(str, days), "-o", str(refs), *common]) == 0
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as expected:
        xr.testing.assert_equal(_open(_local_repo(repo, folder)).load(), expected.load())
    write_day(days[1], 1, scale=2.0)  # rewritten after the scan and the write
    touch_later(days[1])
    with pytest.raises(icechunk.IcechunkError, match="checksum of the object"):
        _open(_local_repo(repo, folder)).v.values  # noqa: B018
    capsys.readouterr()
    assert main(["validate", str(refs), "--sources"]) == 1
    assert f"CHANGED {days[1].resolve()}" in capsys.readouterr().out


def test_the_checksum_is_the_scans_not_the_writes(tmp_path: Path, folder: Path) -> None:
    """A change between scan and write is caught too (a writer recording the write time
    would miss it)."""
    path = write_day(folder / "a.nc", 0)
    group = refzarr.scan(path)
    write_day(path, 0, scale=3.0)
    touch_later(path)
    commit_icechunk(group, tmp_path / "repo")
    with pytest.raises(icechunk.IcechunkError, match="checksum"):
        _open(_local_repo(tmp_path / "repo", folder)).v.values  # noqa: B018


def test_a_group_without_record_is_written_without_checksums(tmp_path: Path, folder: Path) -> None:
    path = write_day(folder / "a.nc", 0)
    scanned = refzarr.scan(path)
    bare = RefGroup(scanned.attributes, scanned.members)
    commit_icechunk(bare, tmp_path / "repo")
    touch_later(path)  # same bytes, newer time: nothing to refuse without a checksum
    with xr.open_dataset(path) as expected:
        xr.testing.assert_equal(_open(_local_repo(tmp_path / "repo", folder)).load(), expected)


def test_a_concurrent_commit_is_reported_and_nothing_is_half_written(
    tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = write_day(folder / "a.nc", 0), write_day(folder / "b.nc", 1)
    repo_path = tmp_path / "repo"
    commit_icechunk(refzarr.scan(first), repo_path, message="first")
    from refzarr.formats.icechunk import write

    real = write.to_icechunk

    def racing(group: RefGroup, store: Any, **kwargs: Any) -> None:
        real(group, store, **kwargs)
        monkeypatch.setattr(write, "to_icechunk", real)  # the other writer writes plainly
        commit_icechunk(refzarr.scan(first), repo_path, message="the other writer")

    monkeypatch.setattr(write, "to_icechunk", racing)
    with pytest.raises(CommitConflictError, match="another writer committed to branch 'main'"):
        commit_icechunk(refzarr.scan(second), repo_path, message="ours", append_dim="time")
    repo = _local_repo(repo_path, folder)
    messages = [s.message for s in repo.ancestry(branch="main")]
    assert "ours" not in messages
    assert messages[0] == "the other writer"
    with xr.open_dataset(first) as expected:
        xr.testing.assert_equal(_open(repo).load(), expected.load())


def test_references_outside_every_container_are_named(tmp_path: Path, folder: Path) -> None:
    path = write_day(folder / "a.nc", 0)
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    repo = icechunk.Repository.create(storage)  # no virtual chunk container at all
    session = repo.writable_session("main")
    with pytest.raises(UnsupportedFeatureError, match="no virtual chunk container for file://"):
        refzarr.to_icechunk(refzarr.scan(path, inline_coordinates=0), session.store)


def test_sources_of_other_protocols_are_named() -> None:
    refs = {
        ".zgroup": '{"zarr_format":2}',
        "a/.zarray": json.dumps(
            {
                "zarr_format": 2,
                "shape": [4],
                "chunks": [4],
                "dtype": "<i4",
                "compressor": None,
                "filters": None,
                "fill_value": 0,
                "order": "C",
            }
        ),
        "a/0": ["https://example.org/a.bin", 0, 16],
    }
    with pytest.raises(UnsupportedFeatureError, match=r"https://example\.org/a\.bin"):
        source_prefixes(refzarr.from_kerchunk(refs))


def test_unreachable_sources_are_named(folder: Path) -> None:
    group = refzarr.scan(write_day(folder / "a.nc", 0))
    url = "nosuchprotocol://bucket/a.nc"
    scan = {"url": url, "format": "hdf5", "options": {}, "files": {url: {"size": 1}}}
    moved = RefGroup(group.attributes, group.members, sources={"version": 1, "scans": [scan]})
    (change,) = refzarr.check_sources(moved)
    assert change.kind == "unreachable"
    assert str(change).startswith(f"{url}: unreachable: cannot open this URL")


# -- S3 (moto on 127.0.0.1) ------------------------------------------------------------------


def _s3_repo(bucket: str, options: dict[str, Any], prefix: str = "repo") -> Any:
    endpoint = options["client_kwargs"]["endpoint_url"]
    storage = icechunk.s3_storage(
        bucket=bucket,
        prefix=prefix,
        region="us-east-1",
        endpoint_url=endpoint,
        allow_http=True,
        force_path_style=True,
        access_key_id=options["key"],
        secret_access_key=options["secret"],
    )
    credentials = icechunk.containers_credentials(
        {
            f"s3://{bucket}/": icechunk.s3_static_credentials(
                access_key_id=options["key"], secret_access_key=options["secret"]
            )
        }
    )
    return icechunk.Repository.open(storage, authorize_virtual_chunk_access=credentials)


def test_s3_repository_with_virtual_chunks_on_s3(
    s3: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    import s3fs

    bucket, options = s3
    fs = s3fs.S3FileSystem(**options)
    days = [write_day(tmp_path / f"d{k}.nc", k) for k in range(3)]
    for path in days:
        fs.put(str(path), f"{bucket}/data/{path.name}")
    argv = [
        "scan",
        f"s3://{bucket}/data/d*.nc",
        "-o",
        f"s3://{bucket}/repo",
        "--format",
        "icechunk",
        "--concat-dim",
        "time",
        "--storage-options",
        json.dumps(options),
    ]
    assert main(argv) == 0
    repo = _s3_repo(bucket, options)
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as expected:
        xr.testing.assert_equal(_open(repo).load(), expected.load())
    fs.put(str(write_day(tmp_path / "other.nc", 1, scale=2.0)), f"{bucket}/data/d1.nc")
    with pytest.raises(icechunk.IcechunkError, match="checksum"):
        _open(_s3_repo(bucket, options)).v.values  # noqa: B018


def test_python_path_appends_to_an_s3_repository(
    s3: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    import s3fs

    bucket, options = s3
    fs = s3fs.S3FileSystem(**options)
    days = [write_day(tmp_path / f"d{k}.nc", k) for k in range(2)]
    urls = []
    for path in days:
        fs.put(str(path), f"{bucket}/{path.name}")
        urls.append(f"s3://{bucket}/{path.name}")
    repository = f"s3://{bucket}/nested/repo"
    for k, url in enumerate(urls):
        group = refzarr.scan(url, storage_options=options)
        commit_icechunk(
            group,
            repository,
            message=f"day {k}",
            append_dim="time" if k else None,
            storage_options=options,
        )
    repo = _s3_repo(bucket, options, prefix="nested/repo")
    assert [s.message for s in repo.ancestry(branch="main")][:2] == ["day 1", "day 0"]
    with xr.open_mfdataset(days, combine="nested", concat_dim="time") as expected:
        xr.testing.assert_equal(_open(repo).load(), expected.load())


def test_convert_commits_a_reference_set_to_a_repository_with_its_checksums(
    tmp_path: Path, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    days = [write_day(folder / f"d{k}.nc", k) for k in range(2)]
    repo, refs = tmp_path / "repo", tmp_path / "refs.json"
    assert main(["scan", *map(str, days), "-o", str(refs), "--concat-dim", "time"]) == 0
    convert = ["convert", str(refs), str(repo), "--format", "icechunk", "--message", "moved"]
    assert main(convert) == 0
    opened = _local_repo(repo, folder)
    with refzarr.open_dataset(refs) as expected:
        xr.testing.assert_identical(_open(opened).load(), expected.load())
    assert next(s.message for s in opened.ancestry(branch="main")) == "moved"
    write_day(days[0], 0, scale=2.0)  # the scan's checksums travelled with the references
    touch_later(days[0])
    with pytest.raises(icechunk.IcechunkError, match="checksum of the object"):
        _open(_local_repo(repo, folder)).v.values  # noqa: B018
    capsys.readouterr()
    assert main(["convert", str(repo), str(tmp_path / "back.json")]) == 2
    assert "is an Icechunk repository: refzarr cannot read its chunk references back" in (
        capsys.readouterr().err
    )
    assert main(["convert", str(refs), str(tmp_path / "x.json"), "--message", "m"]) == 2
    assert "--message applies to Icechunk output only" in capsys.readouterr().err
