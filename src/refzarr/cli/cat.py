"""``refzarr cat REFS KEY``: the bytes of one key (metadata JSON, a referenced or inlined chunk)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from refzarr.cli.common import (
    EXIT_OK,
    REFS_HELP,
    CommandFailed,
    add_check_sources,
    add_storage_options,
    read_refs,
)
from refzarr.io import RangeReader
from refzarr.model import ChunkRef, RefArray, RefGroup
from refzarr.model.hierarchy import array_metadata, group_metadata
from refzarr.model.kerchunk import metadata_text
from refzarr.sources.guard import CheckSources, source_guard

__all__ = ["register", "run"]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the subcommand to ``commands`` (argparse subparsers)."""
    parser = commands.add_parser(
        "cat", parents=[common], help="write the bytes of one key to stdout"
    )
    parser.add_argument("refs", metavar="REFS", help=REFS_HELP)
    parser.add_argument(
        "key", metavar="KEY", help="a key: .zgroup, temp/.zarray, temp/.zattrs, temp/0.1, ..."
    )
    add_storage_options(parser)
    add_check_sources(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Write the key's bytes (metadata as the JSON text a Zarr reader gets; chunks as stored)."""
    group = read_refs(args.refs, args.storage_options)
    data = key_bytes(group, args.key, args.refs, args.storage_options, args.check_sources)
    out = sys.stdout.buffer
    try:
        out.write(data)
        if sys.stdout.isatty() and not data.endswith(b"\n"):
            out.write(b"\n")
        out.flush()
    except BrokenPipeError:
        sys.stderr.close()
    return EXIT_OK


def key_bytes(
    group: RefGroup,
    key: str,
    where: str,
    storage_options: dict[str, Any] | None = None,
    check_sources: CheckSources = "local",
) -> bytes:
    """The bytes of ``key`` in ``group`` (a chunk read with ``storage_options``, its file
    compared with the group's record of sources as ``check_sources`` says).

    Raises
    ------
    CommandFailed
        When the key names nothing, or a chunk that was never written.
    SourceChangedError
        When the chunk's file changed since it was scanned.
    ChunkFetchError
        When a referenced chunk cannot be read.
    """
    metadata = _metadata(group)
    if key in metadata:
        return metadata_text(metadata[key]).encode()
    if key == ".zmetadata":
        document = {"zarr_consolidated_format": 1, "metadata": metadata}
        return json.dumps(document, separators=(",", ":")).encode()
    path, index = _chunk_index(group, key, where)
    array = group[path]
    assert isinstance(array, RefArray)
    try:
        entry = array.manifest[index]
    except IndexError:
        raise CommandFailed(
            f"{where}: no key {key!r}: chunk {index} is outside the chunk grid "
            f"{array.manifest.grid_shape} of {path!r}"
        ) from None
    if entry is None:
        raise CommandFailed(
            f"{where}: {key} is a missing chunk (never written; it reads as the fill value "
            f"{array.meta.fill_value!r}): it has no bytes"
        )
    if isinstance(entry, bytes):
        return entry
    reader = RangeReader(
        storage_options=storage_options, url_check=source_guard(group, check_sources, where)
    )
    return _fetch(entry, key, reader)


def _metadata(group: RefGroup) -> dict[str, Any]:
    found = dict(group_metadata(group))
    for path, array in group.arrays():
        found.update(array_metadata(path, array))
    return found


def _chunk_index(group: RefGroup, key: str, where: str) -> tuple[str, tuple[int, ...]]:
    """The array path and chunk index a chunk key names (``temp/0.1``, ``temp/0/1``)."""
    arrays = dict(group.arrays())
    for path in sorted(arrays, key=len, reverse=True):  # the longest array path that fits
        prefix = f"{path}/" if path else ""
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        parts = rest.replace("/", ".").split(".")
        if all(part.isdigit() for part in parts):
            ndim = arrays[path].meta.ndim
            if ndim == 0 and parts == ["0"]:
                return path, ()
            if len(parts) == ndim:
                return path, tuple(int(part) for part in parts)
    shown = ", ".join(sorted(arrays)[:10]) or "none"
    raise CommandFailed(
        f"{where}: no key {key!r}; keys are .zgroup, .zattrs, ARRAY/.zarray, ARRAY/.zattrs "
        f"and chunk keys such as ARRAY/0.0 (arrays: {shown})"
    )


def _fetch(entry: ChunkRef, key: str, reader: RangeReader) -> bytes:
    length = entry.length
    if length is None:  # a whole-file reference
        length = reader.size(entry.url) - entry.offset
    (data,) = reader.read([entry.url], [entry.offset], [length], [key])
    return bytes(data)
