"""An S3 endpoint nothing answers at (a wrong ``endpoint_url``: connection refused) fails at
once with one error naming the endpoint and what to check: botocore has retried the connection
already, refzarr's tries on top only multiplied the wait (validate: 37 s for 9 files). A
reachable endpoint's transient failures are still retried."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import fsspec
import pytest

import refzarr
from refzarr.cli import main
from refzarr.errors import ChunkFetchError, ReferenceFetchError
from refzarr.io import FetchPolicy, RangeReader

QUICK = FetchPolicy(max_gap=0, max_block=2**20, concurrency=2, attempts=4, backoff=0.05)
"""Four tries a few hundredths of a second apart (without the fix: four failures, quickly)."""


@pytest.fixture
def nowhere(s3: tuple[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """``(endpoint, storage_options)`` of an endpoint where nothing listens (a port free a
    moment ago, on 127.0.0.1), botocore told to try once (its own waits take 5-10 s)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{sock.getsockname()[1]}"
    _, options = s3  # the fixture's environment without AWS settings, fake credentials
    client = {**options["client_kwargs"], "endpoint_url": endpoint}
    once = {"retries": {"max_attempts": 1}}
    return endpoint, {**options, "client_kwargs": client, "config_kwargs": once}


def _named(endpoint: str) -> str:
    return (
        rf"cannot connect to the S3 endpoint {endpoint} .*check the endpoint_url.*\(not retried\)"
    )


def test_chunks_and_sizes(nowhere: tuple[str, dict[str, Any]]) -> None:
    endpoint, options = nowhere
    reader = RangeReader(storage_options=options, remote_policy=QUICK)
    with pytest.raises(ChunkFetchError, match=_named(endpoint)):
        reader.read(["s3://bucket/a.nc"], [0], [10], keys=["x/0"])
    with pytest.raises(ChunkFetchError, match=_named(endpoint)):
        reader.size("s3://bucket/a.nc")


def test_a_reference_set(nowhere: tuple[str, dict[str, Any]]) -> None:
    endpoint, options = nowhere
    with pytest.raises(ReferenceFetchError, match=_named(endpoint)):
        refzarr.read("s3://bucket/refs.json", storage_options=options)


def _five_files(tmp_path: Path) -> Path:
    """A reference set of five arrays, each one chunk of its own file on S3."""
    refs: dict[str, Any] = {".zgroup": json.dumps({"zarr_format": 2})}
    for i in range(5):
        meta = {"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<f4", "compressor": None,
                "filters": None, "fill_value": None, "order": "C"}  # fmt: skip
        refs[f"v{i}/.zarray"] = json.dumps(meta)
        refs[f"v{i}/0"] = [f"s3://bucket/f{i}.nc", 100, 16]
    (tmp_path / "refs.json").write_text(json.dumps(refs))
    return tmp_path / "refs.json"


def test_validate_says_it_once(
    nowhere: tuple[str, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint, options = nowhere
    code = main(["validate", str(_five_files(tmp_path)), "--storage-options", json.dumps(options)])
    out, err = capsys.readouterr()
    assert code == 1
    assert "FAILED" not in out
    assert len(err.splitlines()) == 1, err
    assert f"cannot connect to the S3 endpoint {endpoint}" in err


def test_a_dropped_connection_is_still_retried(
    s3: tuple[str, dict[str, Any]], s3_proxy: tuple[str, dict[str, Any], Any]
) -> None:
    """botocore trying once, the proxy dropping the first two GETs: refzarr's tries read it."""
    bucket, options, proxy = s3_proxy
    fsspec.filesystem("s3", **s3[1]).pipe(f"{bucket}/data.bin", b"0123456789")
    proxy.fail("GET", f"/{bucket}/data.bin", times=2, how="drop")
    once = {**options, "config_kwargs": {"retries": {"max_attempts": 1}}}
    reader = RangeReader(storage_options=once, remote_policy=QUICK)
    assert [bytes(b) for b in reader.read([f"s3://{bucket}/data.bin"], [2], [3])] == [b"234"]
    assert proxy.count("GET", f"/{bucket}/data.bin") == 3


def test_validate_asks_the_first_file_alone(
    nowhere: tuple[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first file's state is asked before the others: an unreachable endpoint costs one of
    botocore's waits (5-10 s), not the longest of many at once."""
    _, options = nowhere
    asked: list[str] = []
    info = RangeReader.info

    def counted(self: RangeReader, url: str) -> Mapping[str, Any]:
        asked.append(url)
        return info(self, url)

    monkeypatch.setattr(RangeReader, "info", counted)
    code = main(["validate", str(_five_files(tmp_path)), "--storage-options", json.dumps(options)])
    assert code == 1
    assert asked == ["s3://bucket/f0.nc"]


def test_scan_names_the_endpoint(
    nowhere: tuple[str, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scan reaches S3 through fsspec, not the reader: its failure is told the same way."""
    endpoint, options = nowhere
    out = tmp_path / "refs.json"
    argv = ["scan", "s3://bucket/a.nc", "-o", str(out), "--storage-options", json.dumps(options)]
    assert main(argv) != 0
    assert not out.exists()
    err = capsys.readouterr().err
    assert "s3://bucket/a.nc" in err
    assert re.search(rf"cannot connect to the S3 endpoint {endpoint} .*check the endpoint_url", err)
