"""A counting, fault-injecting HTTP reverse proxy on 127.0.0.1, to put between s3fs and moto.

Tests point s3fs's ``endpoint_url`` at the proxy instead of moto_server; every request is
forwarded unchanged and recorded (method, path, query, Range header, bytes answered), so a test
can count the GETs a scan costs at the HTTP level. Rules make the proxy fail the first N
attempts of chosen requests with a 503 (an S3 "SlowDown") or by dropping the connection
without an answer, so retries can be tested against real clients.

>>> with CountingProxy("http://127.0.0.1:5000") as proxy:  # doctest: +SKIP
...     proxy.fail("GET", "/bucket/file.h5", times=2, how="503")
...     ...  # s3fs with client_kwargs={"endpoint_url": proxy.endpoint}
...     proxy.count("GET", "/bucket/file.h5")
"""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = ["CountingProxy", "FailRule", "Request", "iter_paths"]

HOST = "127.0.0.1"
"""The only address the proxy listens on."""

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)

How = Literal["503", "drop"]

_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate (refzarr test proxy).</Message></Error>"
)


@dataclass(frozen=True, slots=True)
class Request:
    """One request the proxy received: what was asked and how many body bytes it answered."""

    method: str
    path: str
    query: str
    range: str | None
    status: int
    sent: int


@dataclass
class FailRule:
    """Fail the first ``times`` requests matching ``method`` and ``path`` (a prefix) ``how``."""

    method: str
    path: str
    times: int
    how: How
    failed: int = 0

    def matches(self, method: str, path: str) -> bool:
        return method == self.method and path.startswith(self.path) and self.failed < self.times


class CountingProxy(AbstractContextManager["CountingProxy"]):
    """A threaded reverse proxy to ``upstream`` on 127.0.0.1 (a free port), recording requests.

    Parameters
    ----------
    upstream
        The server to forward to, ``http://127.0.0.1:<port>`` (moto_server).
    """

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.hostname != HOST or parsed.port is None:
            raise ValueError(f"upstream must be http://{HOST}:<port>, got {upstream!r}")
        self.upstream = (parsed.hostname, parsed.port)
        self.requests: list[Request] = []
        self.rules: list[FailRule] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer((HOST, 0), _handler_class(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """The URL to give s3fs as ``endpoint_url``."""
        return f"http://{HOST}:{self.server.server_address[1]}"

    def __enter__(self) -> CountingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def fail(self, method: str, path: str, *, times: int, how: How = "503") -> FailRule:
        """Fail the next ``times`` ``method`` requests whose path starts with ``path``."""
        rule = FailRule(method, path, times, how)
        with self.lock:
            self.rules.append(rule)
        return rule

    def reset(self) -> None:
        """Forget the requests recorded so far and every rule."""
        with self.lock:
            self.requests.clear()
            self.rules.clear()

    def matching(self, method: str | None = None, path: str | None = None) -> list[Request]:
        """The requests recorded with this method (any if None) and path prefix (any if None)."""
        with self.lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method)
                and (path is None or r.path.startswith(path))
            ]

    def count(self, method: str | None = None, path: str | None = None) -> int:
        """How many requests `matching` records."""
        return len(self.matching(method, path))

    def bytes_sent(self, method: str | None = None, path: str | None = None) -> int:
        """Body bytes answered to the requests `matching` records."""
        return sum(r.sent for r in self.matching(method, path))

    def take_rule(self, method: str, path: str) -> FailRule | None:
        """The first rule that fails this request now (its count taken), if any."""
        with self.lock:
            for rule in self.rules:
                if rule.matches(method, path):
                    rule.failed += 1
                    return rule
        return None

    def record(self, request: Request) -> None:
        with self.lock:
            self.requests.append(request)

    def forward(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """Send the request upstream; the status, reason, headers and whole body."""
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            connection.request(method, target, body=body or None, headers=headers)
            response = connection.getresponse()
            data = response.read()
            return response.status, response.reason, response.getheaders(), data
        finally:
            connection.close()


def _handler_class(proxy: CountingProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(_ProxyHandler):
        owner = proxy

    return Handler


class _ProxyHandler(BaseHTTPRequestHandler):
    """Forwards each request upstream (keep-alive, HTTP/1.1), or fails it by a rule."""

    owner: CountingProxy
    protocol_version = "HTTP/1.1"
    # headers and body go out in two writes: with Nagle's algorithm on, a small body waits for
    # the client's delayed ACK of the headers (~40 ms), which no S3 server charges
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read the recorded requests instead."""

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _relay(self) -> None:
        split = urllib.parse.urlsplit(self.path)
        method, body = self.command, self._body()
        rule = self.owner.take_rule(method, split.path)
        if rule is not None and rule.how == "drop":
            self._record(split, 0, 0)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if rule is not None:
            status, reason, headers, data = 503, "Slow Down", [], _SLOW_DOWN
        else:
            status, reason, headers, data = self.owner.forward(
                method, self.path, _forwarded(self.headers.items()), body
            )
        self._record(split, status, 0 if method == "HEAD" else len(data))
        self._answer(status, reason, headers, data)

    def _record(self, split: urllib.parse.SplitResult, status: int, sent: int) -> None:
        self.owner.record(
            Request(self.command, split.path, split.query, self.headers.get("Range"), status, sent)
        )

    def _answer(
        self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes
    ) -> None:
        self.send_response(status, reason)
        length = None
        for name, value in headers:
            if name.lower() == "content-length":
                length = value
            elif name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        if self.command == "HEAD":
            self.send_header("Content-Length", length if length is not None else "0")
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _relay


def _forwarded(headers: Any) -> dict[str, str]:
    """The request's headers for upstream: unchanged (Host too: the request was signed for
    the proxy's address), but the body is sent whole, so no ``Expect: 100-continue``."""
    return {name: value for name, value in headers if name.lower() != "expect"}


def iter_paths(requests: list[Request]) -> Iterator[str]:
    """``METHOD path range`` per request, for printing in a test's output."""
    for r in requests:
        yield f"{r.method} {r.path} {r.range or ''} -> {r.status} ({r.sent} bytes)"
