"""Servers that never answer or always fail: reads end within their deadline with a
`ChunkFetchError` naming the URL and what was tried (servers on 127.0.0.1, no network)."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import refzarr
from httpkit import serving
from refzarr.errors import ChunkFetchError, ReferenceFetchError
from refzarr.io import (
    DEFAULT_DEADLINE,
    REMOTE_POLICY,
    FetchPolicy,
    RangeReader,
    set_read_deadline,
)
from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup
from timebound import raised_within

DEADLINE = 1.5
HARD_TIMEOUT = 60.0  # a hang fails the test instead of holding the suite


@pytest.fixture
def stalled_url() -> Iterator[str]:
    """A server that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/data.bin"
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


class _Unavailable(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def failing_url() -> Iterator[str]:
    """A server that answers every request with 503 Service Unavailable."""
    with serving(_Unavailable) as base:
        yield f"{base}/data.bin"


def patient_policy() -> FetchPolicy:
    """Retries that alone would take minutes: only the deadline ends them."""
    return FetchPolicy(
        max_gap=0, max_block=2**20, concurrency=2, attempts=1000, backoff=0.2, deadline=DEADLINE
    )


def test_a_stalled_server_fails_at_the_deadline(stalled_url: str) -> None:
    reader = RangeReader(remote_policy=patient_policy())
    started = time.monotonic()
    error = raised_within(HARD_TIMEOUT, lambda: reader.read([stalled_url], [0], [8], ["v/0"]))
    assert isinstance(error, ChunkFetchError), error
    message = str(error)
    assert stalled_url in message
    assert "v/0" in message
    assert f"read deadline of {DEADLINE:g} s" in message
    assert "attempt(s) started" in message
    assert "set_read_deadline" in message
    assert time.monotonic() - started < 10 * DEADLINE + 5


def test_a_failing_server_fails_at_the_deadline(failing_url: str) -> None:
    reader = RangeReader(remote_policy=patient_policy())
    started = time.monotonic()
    error = raised_within(HARD_TIMEOUT, lambda: reader.read([failing_url], [0], [8], ["v/0"]))
    assert isinstance(error, ChunkFetchError), error
    message = str(error)
    assert failing_url in message
    assert "v/0" in message
    # given up between two tries, or (on a loaded machine) by the watchdog during one
    assert "read deadline of 1.5 s" in message
    assert "503" in message
    assert time.monotonic() - started < 10 * DEADLINE + 5


def test_the_process_wide_deadline_applies_through_open_dataset(stalled_url: str) -> None:
    manifest = ChunkManifest.from_arrays([stalled_url], np.zeros(2, np.int32), [0, 8], [8, 8])
    meta = ArrayMeta(shape=(2,), chunks=(1,), dtype=np.dtype("<i8"), dimension_names=("x",))
    group = RefGroup(members={"v": RefArray(meta, manifest)})
    set_read_deadline(DEADLINE)
    try:
        ds = refzarr.open_dataset(group)
        error = raised_within(HARD_TIMEOUT, lambda: ds["v"].values)
    finally:
        set_read_deadline(DEFAULT_DEADLINE)
    assert isinstance(error, ChunkFetchError), error
    assert stalled_url in str(error)
    assert "read deadline" in str(error)


def test_deadline_settings_are_checked() -> None:
    assert REMOTE_POLICY.seconds() == DEFAULT_DEADLINE == 60.0
    with pytest.raises(ValueError, match="positive"):
        set_read_deadline(0)
    with pytest.raises(ValueError, match="deadline must be positive"):
        FetchPolicy(max_gap=0, max_block=1, concurrency=1, deadline=-1.0)


def test_the_size_of_a_whole_file_on_a_stalled_server(stalled_url: str) -> None:
    reader = RangeReader(remote_policy=patient_policy())
    error = raised_within(HARD_TIMEOUT, lambda: reader.size(stalled_url))
    assert isinstance(error, ChunkFetchError), error
    assert f"{stalled_url}: cannot get its size: no answer within the read deadline" in str(error)


# -- the reference sets themselves -------------------------------------------------------------


@pytest.fixture
def short_deadline() -> Iterator[None]:
    set_read_deadline(DEADLINE)
    yield
    set_read_deadline(DEFAULT_DEADLINE)


@pytest.mark.parametrize(
    ("name", "asked"),
    [("refs.json", "reading it"), ("refs.parq", "reading .zmetadata")],
)
@pytest.mark.parametrize("server", ["stalled", "failing"])
def test_reading_a_remote_reference_set(
    request: pytest.FixtureRequest, short_deadline: None, server: str, name: str, asked: str
) -> None:
    """JSON and Parquet sets on a server that never answers end at the read deadline; on one
    that answers 503 at once (fsspec's HTTP filesystem does not retry), at once."""
    base = request.getfixturevalue(f"{server}_url").rpartition("/")[0]
    url = f"{base}/{name}"
    started = time.monotonic()
    error = raised_within(HARD_TIMEOUT, lambda: refzarr.read(url))
    assert isinstance(error, ReferenceFetchError), error
    assert isinstance(error, ChunkFetchError)
    message = str(error)
    assert message.startswith(f"{url}: {asked}: ")
    if server == "stalled":
        assert f"no answer within the read deadline of {DEADLINE:g} s" in message
        assert "set_read_deadline" in message
    else:
        assert "503" in message
    assert time.monotonic() - started < 10 * DEADLINE + 5


class _RecordsStall(http.server.SimpleHTTPRequestHandler):
    """Serves a folder's ``.zmetadata`` files; requests of anything else never get an answer."""

    release = threading.Event()

    def do_GET(self) -> None:
        if self.path.endswith(".zmetadata"):
            super().do_GET()
        else:
            self.release.wait(HARD_TIMEOUT)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_the_record_files_of_a_remote_parquet_set(tmp_path: Path, short_deadline: None) -> None:
    """.zmetadata answers, the record files stall: reading a chunk's reference ends at the
    deadline with the record file named."""
    manifest = ChunkManifest.from_arrays(["memory://x"], np.zeros(2, np.int32), [0, 8], [8, 8])
    meta = ArrayMeta(shape=(2,), chunks=(1,), dtype=np.dtype("<i8"), dimension_names=("x",))
    refzarr.write(RefGroup(members={"v": RefArray(meta, manifest)}), tmp_path / "refs.parq")
    with serving(partial(_RecordsStall, directory=str(tmp_path))) as base:
        try:
            url = f"{base}/refs.parq"
            group = refzarr.read(url)
            started = time.monotonic()
            error = raised_within(HARD_TIMEOUT, lambda: group["v"].manifest[0])
        finally:
            _RecordsStall.release.set()
    assert isinstance(error, ReferenceFetchError), error
    assert f"{url}/v/refs.0.parq: reading it: no answer within the read deadline" in str(error)
    assert time.monotonic() - started < 10 * DEADLINE + 5
