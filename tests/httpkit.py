"""A threaded HTTP server on 127.0.0.1 for the duration of a ``with`` block (the hostile
tests' flaky, failing and stalling servers; no network)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["serving"]


@contextmanager
def serving(handler: Callable[..., http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """``http://127.0.0.1:<port>`` of a server answering with ``handler`` (a request handler
    class, or a partial of one); stopped, its port closed, when the block ends."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True  # a handler left waiting does not hold the shutdown
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
