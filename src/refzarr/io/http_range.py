"""One byte range of an HTTP(S) file, read as far as it needs and no further.

fsspec's ``HTTPFileSystem.cat_file`` reads a ranged GET's whole answer before returning it:
a server that ignores ``Range`` (Python's ``http.server``, a misbehaving or hostile host)
answers ``200`` with the whole file, so 4 bytes of a 512 MiB file cost 14 s and 1.1 GB before
the length check failed. Here the answer is streamed: a ``206`` is read up to one byte past
the range (enough to tell it is too long), a ``200`` is read up to the range's end (its first
bytes skipped as they come), and the connection is dropped there.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_http", "read_range"]

_PIECE = 2**20
"""Bytes asked of the stream at once while skipping to the range."""


def is_http(fs: Any) -> bool:
    """Whether ``fs`` is fsspec's HTTP filesystem (whose ``cat_file`` reads all it is sent)."""
    from fsspec.implementations.http import HTTPFileSystem

    return isinstance(fs, HTTPFileSystem)


def read_range(fs: Any, url: str, start: int, end: int) -> bytes:
    """Bytes ``start`` to ``end`` of ``url``, as ``fs.cat_file(url, start, end)`` gives them
    (the same errors: FileNotFoundError for 404, aiohttp's for other failures), holding at
    most ``end - start + 1`` bytes of the answer whatever the server sends."""
    from fsspec.asyn import sync

    if start == end:
        return b""
    result: bytes = sync(fs.loop, _read_range, fs, url, start, end)
    return result


async def _read_range(fs: Any, url: str, start: int, end: int) -> bytes:
    kwargs = fs.kwargs.copy()
    headers = dict(kwargs.pop("headers", None) or {})
    headers["Range"] = f"bytes={start}-{end - 1}"
    session = await fs.set_session()
    async with session.get(fs.encode_url(url), headers=headers, **kwargs) as answer:
        fs._raise_not_found_for_status(answer, url)
        content = answer.content
        if answer.status != 206:  # the whole file from its first byte: skip to the range
            await _skip(content, start)
            return await _at_most(content, end - start)
        return await _at_most(content, end - start + 1)  # one more: a longer answer shows


async def _skip(content: Any, count: int) -> None:
    while count > 0:
        piece = await content.read(min(_PIECE, count))
        if not piece:
            return
        count -= len(piece)


async def _at_most(content: Any, count: int) -> bytes:
    parts = []
    while count > 0:
        piece = await content.read(count)
        if not piece:
            break
        parts.append(piece)
        count -= len(piece)
    return b"".join(parts)
