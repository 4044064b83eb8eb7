"""Remote reference sets on servers that fail for a while: transient failures are retried
within the read deadline, permanent ones end in a `ReferenceFetchError` naming the URL and what
was tried, in bounded time (servers on 127.0.0.1, no network)."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest

import refzarr
from httpkit import serving
from refzarr.errors import ChunkFetchError, ReferenceFetchError, SourceNotFoundError
from refzarr.io import (
    DEFAULT_DEADLINE,
    REMOTE_POLICY,
    RangeReader,
    set_read_deadline,
    set_reference_retries,
)
from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup
from timebound import finish_within

HARD_TIMEOUT = 60.0  # a hang fails the test instead of holding the suite
BOUND = 15.0  # generous: the default retries take 0.7 s of backoff


@dataclass
class Faults:
    """What the server does wrong: the first ``times`` requests (GET or HEAD) of each path
    containing ``part`` are answered ``status`` (or, with status 0, the connection is dropped
    without an answer)."""

    rules: list[tuple[str, int, int]] = field(default_factory=list)
    failed: dict[tuple[int, str], int] = field(default_factory=dict)
    log: list[tuple[str, str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, part: str, times: int, status: int = 503) -> None:
        with self.lock:
            self.rules.append((part, times, status))

    def take(self, path: str) -> int | None:
        with self.lock:
            for number, (part, times, status) in enumerate(self.rules):
                done = self.failed.get((number, path), 0)
                if part in path and done < times:
                    self.failed[number, path] = done + 1
                    return status
        return None

    def gets(self, part: str, method: str = "GET") -> int:
        with self.lock:
            return sum(part in path and verb == method for verb, path, _ in self.log)


class _Flaky(http.server.SimpleHTTPRequestHandler):
    faults: Faults

    def do_GET(self) -> None:
        if self._failed("GET"):
            return
        super().do_GET()

    def do_HEAD(self) -> None:
        if self._failed("HEAD"):
            return
        super().do_HEAD()

    def _failed(self, method: str) -> bool:
        """Answer as `faults` say (True), or leave the request to the file server."""
        status = self.faults.take(self.path)
        with self.faults.lock:
            self.faults.log.append((method, self.path, status or 200))
        if status == 0:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif status is not None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
        return status is not None

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _group() -> RefGroup:
    manifest = ChunkManifest.from_arrays(["memory://x"], np.zeros(3, np.int32), [0, 8, 16], [8] * 3)
    meta = ArrayMeta(shape=(3,), chunks=(1,), dtype=np.dtype("<i8"), dimension_names=("x",))
    return RefGroup(attributes={"title": "flaky"}, members={"v": RefArray(meta, manifest)})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the same set as JSON (``refs.json``) and Parquet (``refs.parq``,
    also as ``plain``: a Parquet set whose name does not say so)."""
    folder = tmp_path_factory.mktemp("served")
    for name in ("refs.json", "refs.parq"):
        refzarr.write(_group(), folder / name)
    refzarr.write(_group(), folder / "plain", format="parquet")
    return folder


@pytest.fixture
def flaky(served: Path) -> Iterator[tuple[str, Faults]]:
    """``(base URL, faults)`` of a fresh server over `served`."""
    faults = Faults()
    handler = type("Handler", (_Flaky,), {"faults": faults})
    fsspec.filesystem("http").clear_instance_cache()
    with serving(partial(handler, directory=served)) as base:
        yield base, faults


@pytest.fixture
def retries() -> Iterator[Callable[..., None]]:
    """`set_reference_retries` and `set_read_deadline`, put back after the test."""

    def configure(deadline: float | None = None, **options: Any) -> None:
        if deadline is not None:
            set_read_deadline(deadline)
        set_reference_retries(**options)

    yield configure
    set_reference_retries()
    set_read_deadline(DEFAULT_DEADLINE)


def _references(group: RefGroup) -> list[Any]:
    manifest = group["v"].manifest
    return [manifest[i] for i in range(3)]


def _read_all(url: str) -> tuple[RefGroup, list[Any]]:
    group = refzarr.read(url)
    return group, _references(group)


@pytest.mark.parametrize("name", ["refs.json", "refs.parq", "plain"])
@pytest.mark.parametrize("how", [503, 502, 429, 0], ids=["503", "502", "429", "dropped"])
def test_transient_failures_are_retried(flaky: tuple[str, Faults], name: str, how: int) -> None:
    """Every request of the set fails twice first (JSON: the file; Parquet: the listing,
    .zmetadata and the record files): the set reads as written."""
    base, faults = flaky
    faults.fail(name if name.endswith(".json") else f"{name}/", times=2, status=how)
    started = time.monotonic()
    result, error = finish_within(HARD_TIMEOUT, lambda: _read_all(f"{base}/{name}"))
    assert error is None, error
    group, references = result
    assert group.attributes["title"] == "flaky"
    assert references == _references(_group())
    assert faults.gets(name) > 2
    assert time.monotonic() - started < BOUND


@pytest.mark.parametrize(
    ("name", "asked"),
    [("refs.json", "reading it"), ("refs.parq", "reading .zmetadata")],
)
def test_a_permanent_failure_names_the_url_and_the_attempts(
    flaky: tuple[str, Faults], name: str, asked: str
) -> None:
    base, faults = flaky
    faults.fail(name, times=10**6)
    url = f"{base}/{name}"
    started = time.monotonic()
    _, error = finish_within(HARD_TIMEOUT, lambda: refzarr.read(url))
    assert isinstance(error, ReferenceFetchError), error
    assert isinstance(error, ChunkFetchError)
    message = str(error)
    assert message.startswith(f"{url}: {asked}: ClientResponseError: 503"), message
    assert "(after 4 attempt(s); set how often with refzarr.io.set_reference_retries)" in message
    assert faults.gets(name) == 4
    assert time.monotonic() - started < BOUND


def test_a_permanent_failure_of_a_record_file(flaky: tuple[str, Faults]) -> None:
    base, faults = flaky
    group = refzarr.read(f"{base}/refs.parq")
    faults.fail("refs.0.parq", times=10**6)
    _, error = finish_within(HARD_TIMEOUT, lambda: group["v"].manifest[0])
    assert isinstance(error, ReferenceFetchError), error
    assert str(error).startswith(f"{base}/refs.parq/v/refs.0.parq: reading it: ")
    assert "after 4 attempt(s)" in str(error)
    assert faults.gets("refs.0.parq") == 4


@pytest.mark.parametrize("status", [403, 400, 410])
def test_a_client_error_is_not_retried(flaky: tuple[str, Faults], status: int) -> None:
    base, faults = flaky
    faults.fail("refs.parq", times=10**6, status=status)
    _, error = finish_within(HARD_TIMEOUT, lambda: refzarr.read(f"{base}/refs.parq"))
    assert isinstance(error, ReferenceFetchError), error
    assert f"ClientResponseError: {status}" in str(error)
    assert str(error).endswith("(not retried)")
    assert faults.gets("refs.parq") == 1


def test_a_missing_set_is_not_retried(flaky: tuple[str, Faults]) -> None:
    base, faults = flaky
    _, error = finish_within(HARD_TIMEOUT, lambda: refzarr.read(f"{base}/absent.parq"))
    assert isinstance(error, SourceNotFoundError), error
    assert f"{base}/absent.parq: no such reference set" in str(error)
    assert faults.gets("absent.parq") <= 2  # .zmetadata, then whether it is a folder


@pytest.mark.parametrize("read", [refzarr.read, refzarr.expand_references])
def test_a_json_set_is_one_request(flaky: tuple[str, Faults], read: Callable[[str], Any]) -> None:
    """Telling JSON from Parquet costs a JSON set no request of its own (fsspec's HTTP
    ``isdir`` downloaded the file to look for links in it, before it was read again)."""
    base, faults = flaky
    _, error = finish_within(HARD_TIMEOUT, lambda: read(f"{base}/refs.json"))
    assert error is None, error
    assert [(method, path) for method, path, _ in faults.log] == [("GET", "/refs.json")]


def test_a_transient_failure_while_looking_for_zmetadata(flaky: tuple[str, Faults]) -> None:
    """A set whose name does not say Parquet: a 503 when asking for its ``.zmetadata`` is
    retried, not taken for "absent" (which would read the directory as JSON)."""
    base, faults = flaky
    faults.fail("plain/.zmetadata", times=1)
    result, error = finish_within(HARD_TIMEOUT, lambda: _read_all(f"{base}/plain"))
    assert error is None, error
    _, references = result
    assert references == _references(_group())
    assert faults.gets("plain/.zmetadata") >= 2


def test_retries_can_be_turned_off(flaky: tuple[str, Faults], retries: Callable[..., None]) -> None:
    base, faults = flaky
    retries(attempts=1)
    faults.fail("refs.parq", times=1)
    _, error = finish_within(HARD_TIMEOUT, lambda: refzarr.read(f"{base}/refs.parq"))
    assert isinstance(error, ReferenceFetchError), error
    assert "(after 1 attempt(s);" in str(error)
    assert faults.gets("refs.parq") == 1


def test_more_retries_are_bounded_by_the_deadline(
    flaky: tuple[str, Faults], retries: Callable[..., None]
) -> None:
    """A thousand tries a second apart: the read deadline (1.5 s) ends them."""
    base, faults = flaky
    retries(deadline=1.5, attempts=1000, backoff=0.4, max_backoff=1.0)
    faults.fail("refs.parq", times=10**6)
    started = time.monotonic()
    _, error = finish_within(HARD_TIMEOUT, lambda: refzarr.read(f"{base}/refs.parq"))
    assert isinstance(error, ReferenceFetchError), error
    message = str(error)
    assert "503" in message
    # given up between two tries, or (on a loaded machine) by the deadline during one
    assert "read deadline of 1.5 s" in message, message
    assert faults.gets("refs.parq") < 10
    assert time.monotonic() - started < 10 * 1.5 + 5


def test_retry_settings_are_checked(retries: Callable[..., None]) -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="attempts must be a positive integer"):
            set_reference_retries(attempts=bad)
    with pytest.raises(ValueError, match="backoff must be a number of seconds"):
        set_reference_retries(backoff=-1)
    with pytest.raises(ValueError, match="max_backoff must be a number of seconds"):
        set_reference_retries(max_backoff=float("nan"))


def test_s3_without_client_retries(
    s3_proxy: tuple[str, dict[str, Any], Any], served: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On S3 with botocore's and s3fs's own retries off, refzarr's retries read the set
    through two 503s (SlowDown) of each request."""
    import s3fs

    bucket, options, proxy = s3_proxy
    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 1)
    options = {**options, "config_kwargs": {"retries": {"max_attempts": 1}}}
    fs = fsspec.filesystem("s3", **options)
    fs.put(str(served / "refs.parq"), f"{bucket}/refs.parq", recursive=True)
    fs.put_file(str(served / "refs.json"), f"{bucket}/refs.json")
    proxy.fail("GET", f"/{bucket}/refs.json", times=2)
    proxy.fail("GET", f"/{bucket}/refs.parq/.zmetadata", times=2)
    proxy.fail("GET", f"/{bucket}/refs.parq/v/refs.0.parq", times=2)
    for name in ("refs.json", "refs.parq"):
        url = f"s3://{bucket}/{name}"
        read = partial(refzarr.read, url, storage_options=options)
        result, error = finish_within(HARD_TIMEOUT, lambda read=read: _references(read()))
        assert error is None, error
        references = result
        assert references == _references(_group())
    assert sum(r.status == 503 for r in proxy.matching("GET")) == 6


# -- the size of a file (whole-file references): the same retries, the reader's policy ---------


def _size(url: str, **policy: Any) -> int:
    remote = replace(REMOTE_POLICY, **{"backoff": 0.05, **policy})
    return RangeReader(remote_policy=remote).size(url)


@pytest.mark.parametrize("status", [503, 429])
def test_the_size_of_a_file_is_retried(
    flaky: tuple[str, Faults], served: Path, status: int
) -> None:
    """fsspec asks HTTP for a size with HEAD, then GET: two failed attempts (four requests)
    are retried, the third answers."""
    base, faults = flaky
    faults.fail("refs.json", times=4, status=status)
    result, error = finish_within(HARD_TIMEOUT, lambda: _size(f"{base}/refs.json"))
    assert error is None, error
    assert result == (served / "refs.json").stat().st_size
    assert faults.gets("refs.json", "HEAD") == 3


def test_a_permanent_failure_of_the_size_names_the_attempts(flaky: tuple[str, Faults]) -> None:
    base, faults = flaky
    faults.fail("refs.json", times=10**6)
    url = f"{base}/refs.json"
    _, error = finish_within(HARD_TIMEOUT, lambda: _size(url))
    assert isinstance(error, ChunkFetchError), error
    assert not isinstance(error, ReferenceFetchError)
    message = str(error)
    assert message.startswith(f"{url}: cannot get its size: ClientResponseError: 503"), message
    assert message.endswith("(after 4 attempt(s); set how often with FetchPolicy(attempts=...))")
    assert faults.gets("refs.json", "HEAD") == 4


def test_the_size_of_a_missing_file_is_not_retried(flaky: tuple[str, Faults]) -> None:
    base, faults = flaky
    url = f"{base}/absent.bin"
    _, error = finish_within(HARD_TIMEOUT, lambda: _size(url))
    assert isinstance(error, ChunkFetchError), error
    assert str(error) == f"{url}: cannot get its size: FileNotFoundError: {url} (not retried)"
    assert faults.gets("absent.bin", "HEAD") == 1


def test_the_size_follows_the_readers_policy(flaky: tuple[str, Faults]) -> None:
    """``attempts=1``: one failed answer is the end; a deadline of 1.5 s ends a thousand."""
    base, faults = flaky
    faults.fail("refs.json", times=10**6)
    url = f"{base}/refs.json"
    _, error = finish_within(HARD_TIMEOUT, lambda: _size(url, attempts=1))
    assert isinstance(error, ChunkFetchError), error
    assert "(after 1 attempt(s);" in str(error)
    assert faults.gets("refs.json", "HEAD") == 1
    started = time.monotonic()
    many = {"attempts": 1000, "backoff": 0.4, "max_backoff": 1.0, "deadline": 1.5}
    _, error = finish_within(HARD_TIMEOUT, lambda: _size(url, **many))
    assert isinstance(error, ChunkFetchError), error
    assert "read deadline of 1.5 s" in str(error), error
    assert faults.gets("refs.json", "HEAD") < 10
    assert time.monotonic() - started < 10 * 1.5 + 5


@pytest.mark.parametrize("failing", [2, 10**6])
def test_a_client_timeout_is_a_failed_attempt(
    monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    """A TimeoutError the filesystem itself raises at once (its own client timeout) is an
    attempt that failed, retried and named as such, not "no answer within the deadline"."""
    fs = fsspec.filesystem("memory")
    fs.pipe_file("/timeouts/data.bin", b"12345")
    real_size, calls = type(fs).size, []

    def size(self: Any, path: str) -> int:
        calls.append(path)
        if len(calls) <= failing:
            raise TimeoutError("client timeout")
        return int(real_size(self, path))

    monkeypatch.setattr(type(fs), "size", size)
    try:
        result, error = finish_within(HARD_TIMEOUT, lambda: _size("memory://timeouts/data.bin"))
    finally:
        fs.rm("/timeouts", recursive=True)
    if failing == 2:
        assert (result, error, len(calls)) == (5, None, 3)
        return
    assert isinstance(error, ChunkFetchError), error
    message = str(error)
    assert "cannot get its size: TimeoutError: client timeout (after 4 attempt(s);" in message
    assert "no answer" not in message
    assert len(calls) == 4
