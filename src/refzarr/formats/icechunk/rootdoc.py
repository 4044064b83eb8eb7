"""A group's ``zarr.json`` attributes read and extended straight through the store's async
key-value API, for the record of sources (`refzarr.formats.icechunk.record`): megabytes of
attributes for an archive of thousands of files.

Through zarr-python, each write of those attributes costs ~0.2 ms per file scanned
(``dataclasses.asdict`` copies them, an indenting pure-Python JSON encoder writes them), each
member created below the group reads them again, and the first read starts zarr's I/O thread,
after which a process pool can no longer fork (`refzarr.parallel.runners`). Here the
document zarr wrote keeps every field as it is; the attributes are added to it and the
document written back as compact JSON (equal content: Icechunk stores the bytes it is given,
zarr reads them as any JSON).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from refzarr.errors import RefFormatError

__all__ = [
    "add_attributes",
    "group_attributes",
    "group_document",
    "holds_group",
    "read_group",
    "write_group",
]

_T = TypeVar("_T")


def read_group(store: Any, path: str, where: str) -> dict[str, Any]:
    """The ``zarr.json`` document of the group at ``path`` of a Zarr v3 ``store`` (a
    session's store), its ``attributes`` always a dict.

    Raises
    ------
    RefFormatError
        When no group is there, or its attributes are no JSON object (names ``where``).
    """
    document = group_document(store, path)
    if document is None:
        raise RefFormatError(f"{where}: no Zarr v3 group at {path or '/'!r}")
    if not isinstance(document.setdefault("attributes", {}), dict):
        raise RefFormatError(f"{where}: the group's attributes are no JSON object")
    return document


def write_group(store: Any, path: str, document: Mapping[str, Any]) -> None:
    """``document`` (`read_group`'s, changed) as the ``zarr.json`` of the group at ``path``."""
    _run(_set(store, _key(path), json.dumps(document, allow_nan=True).encode()))


def group_attributes(store: Any, path: str, where: str) -> dict[str, Any]:
    """The attributes of the group at ``path`` (`read_group`)."""
    attributes: dict[str, Any] = read_group(store, path, where)["attributes"]
    return attributes


def holds_group(store: Any, path: str) -> bool:
    """Whether a Zarr v3 group document is at ``path``."""
    return group_document(store, path) is not None


def group_document(store: Any, path: str) -> dict[str, Any] | None:
    """The ``zarr.json`` document of the Zarr v3 group at ``path`` (None when there is none),
    its ``attributes`` a dict when it has any."""
    found = _run(_get(store, _key(path)))
    if found is None:
        return None
    try:
        document = json.loads(found)
    except ValueError:
        return None
    if not isinstance(document, dict) or document.get("node_type") != "group":
        return None
    return document


def add_attributes(store: Any, path: str, added: Mapping[str, Any], where: str) -> None:
    """Set ``added`` among the attributes of the group at ``path`` (existing names replaced
    in place, new ones after the others: as ``group.attrs.update`` orders them)."""
    document = read_group(store, path, where)
    document["attributes"].update(added)
    write_group(store, path, document)


def _key(path: str) -> str:
    return f"{path.strip('/')}/zarr.json" if path.strip("/") else "zarr.json"


async def _get(store: Any, key: str) -> bytes | None:
    from zarr.core.buffer import default_buffer_prototype

    found = await store.get(key, default_buffer_prototype())
    return None if found is None else bytes(found.to_bytes())


async def _set(store: Any, key: str, value: bytes) -> None:
    from zarr.core.buffer import default_buffer_prototype

    await store.set(key, default_buffer_prototype().buffer.from_bytes(value))


def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """``coroutine`` run to its end on an event loop of its own (not zarr's: no thread left
    running); in a thread of its own when this one runs a loop already (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
