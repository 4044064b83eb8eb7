"""fsspec's ``info`` of the remote file `refzarr.scan` is scanning, as its record of sources
took it just before: scanners open the file through `open_remote`, which hands the open file
that info (its size, and the ETag s3fs checks every read against), so that s3fs or HTTP do
not ask the server for it again (one HEAD request less per file)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, BinaryIO

__all__ = ["known_info", "open_remote"]

_KNOWN: ContextVar[tuple[str, Mapping[str, Any]] | None] = ContextVar(
    "refzarr_scan_known_info", default=None
)
"""``(url, info)`` of the file being scanned in this thread / task, when taken."""


@contextmanager
def known_info(url: str, info: Mapping[str, Any] | None) -> Iterator[None]:
    """Within the block, `open_remote` of ``url`` gives the open file ``info`` (None:
    nothing known)."""
    token = _KNOWN.set(None if info is None else (url, info))
    try:
        yield
    finally:
        _KNOWN.reset(token)


def open_remote(fs: Any, path: str, url: str, **options: Any) -> BinaryIO:
    """``fs.open(path, "rb", **options)``, given the size and details `known_info` holds for
    ``url``. A filesystem whose files take no ``size`` (a TypeError) is asked as before."""
    from fsspec.spec import AbstractBufferedFile  # loaded already: fs is an fsspec one

    known = _KNOWN.get()
    size = None if known is None or known[0] != url else known[1].get("size")
    if isinstance(size, int):
        try:
            opened = fs.open(path, "rb", size=size, **options)
        except TypeError:
            pass
        else:
            assert known is not None  # size came from it
            if isinstance(opened, AbstractBufferedFile):
                opened.details = dict(known[1])
            return opened  # type: ignore[no-any-return]
    raw: BinaryIO = fs.open(path, "rb", **options)
    return raw
