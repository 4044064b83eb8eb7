"""A server that ignores ``Range`` (Python's ``http.server``, a misbehaving or hostile host)
answers a chunk's ranged GET with the whole file: the reader streams the answer and stops at
the range's end (4 bytes of a 512 MiB file cost 14 s and 1.1 GB, then a "got 536,870,912
bytes of 4" error); one that sends more than the range in a ``206`` is refused after one
byte too many."""

from __future__ import annotations

import http.server
import threading
from functools import partial
from typing import Any

import numpy as np
import pytest
from setkit import one_array_set

import refzarr
from httpkit import serving
from refzarr.errors import ChunkFetchError
from timebound import raised_within

BODY = 256 * 2**20
"""Bytes the server would send: the whole 'file'."""

PIECE = 2**16
OFFSET = 3 * PIECE + 5


class Sent:
    """Bytes a handler managed to write before the client hung up."""

    def __init__(self) -> None:
        self.bytes = 0
        self.lock = threading.Lock()


class WholeFile(http.server.BaseHTTPRequestHandler):
    """Answers every GET with ``200`` and the whole body (byte i: ``i % PIECE % 251``),
    Range ignored; or, with ``status=206``, more bytes than the range asked."""

    def __init__(
        self, *args: Any, sent: Sent, status: int = 200, first: bytes = b"", **kwargs: Any
    ) -> None:
        self.sent, self.status, self.first = sent, status, first
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:
        if self.path.endswith("/.zmetadata"):  # no Parquet set here
            self.send_error(404)
            return
        self.send_response(self.status)
        self.send_header("Content-Length", str(BODY))
        self.end_headers()
        piece = (np.arange(PIECE) % 251).astype(np.uint8).tobytes()
        try:
            self.wfile.write(self.first)
            for _ in range(BODY // PIECE):
                self.wfile.write(piece)
                with self.sent.lock:
                    self.sent.bytes += PIECE
        except OSError:
            return  # the client hung up

    def log_message(self, *args: Any) -> None:
        pass


def one_chunk(url: str) -> dict[str, Any]:
    zarray = {"shape": [4], "chunks": [4], "dtype": "|u1", "fill_value": None, "order": "C",
              "filters": None, "compressor": None, "zarr_format": 2}  # fmt: skip
    return one_array_set(zarray, [f"{url}/file.bin", OFFSET, 4])


def test_a_server_ignoring_range_sends_only_the_start() -> None:
    sent = Sent()
    with serving(partial(WholeFile, sent=sent)) as url:
        ds = refzarr.open_dataset(one_chunk(url), allowed_protocols=["http"])
        got: list[Any] = []
        error = raised_within(60, lambda: got.append(ds["a"].values))
    assert error is None, error
    expected = (np.arange(OFFSET, OFFSET + 4) % PIECE % 251).astype(np.uint8)
    np.testing.assert_array_equal(got[0], expected)
    assert sent.bytes < BODY // 4, f"{sent.bytes:,} bytes sent of a {BODY:,}-byte file"


def test_a_partial_answer_longer_than_the_range_is_refused() -> None:
    sent = Sent()
    with serving(partial(WholeFile, sent=sent, status=206)) as url:
        ds = refzarr.open_dataset(one_chunk(url), allowed_protocols=["http"])
        error = raised_within(60, lambda: ds["a"].values)
    assert isinstance(error, ChunkFetchError), error
    assert "got 5 bytes of 4" in str(error)
    assert sent.bytes < BODY // 4


@pytest.mark.parametrize("status", [404])
def test_missing_files_are_named_as_before(status: int) -> None:
    class Missing(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(status)

        def log_message(self, *args: Any) -> None:
            pass

    with serving(Missing) as url:
        ds = refzarr.open_dataset(one_chunk(url), allowed_protocols=["http"])
        error = raised_within(60, lambda: ds["a"].values)
    assert isinstance(error, ChunkFetchError), error
    assert "file.bin" in str(error)


def test_a_reference_set_head_from_a_server_ignoring_range() -> None:
    """`refzarr.read` of a large netCDF file given by mistake reads its head only (64 KiB)."""
    from refzarr.errors import RefFormatError

    sent = Sent()
    header = b"CDF\x01" + bytes(28)
    with serving(partial(WholeFile, sent=sent, first=header)) as url:
        error = raised_within(60, lambda: refzarr.read(f"{url}/file.bin"))
    assert isinstance(error, RefFormatError), error
    assert sent.bytes < BODY // 4, f"{sent.bytes:,} bytes sent of a {BODY:,}-byte file"
