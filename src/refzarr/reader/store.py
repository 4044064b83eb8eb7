"""`ReferenceStore`: a read-only zarr-python 3 Store over a reference set.

Metadata keys (``.zgroup``, ``.zattrs``, ``.zarray``, ``.zmetadata``) are rendered from the model
as Zarr v2 documents; chunk keys resolve through the manifests: a missing chunk is absent (zarr
reads the fill value), an inlined one is served from memory, a referenced one is fetched through
the io layer (batched in `get_partial_values`). A chunk that cannot be fetched raises
`ChunkFetchError`; a whole chunk is decoded once before it is served (``check_chunks``), so
bytes that do not decode raise `ChunkDecodeError` naming the key and where the bytes came
from, as `refzarr.open_dataset` does, rather than a codec's own error from inside zarr.

An array whose chunk grid is irregular (rectilinear, as combining files of uneven lengths makes
it) has no Zarr v2 metadata: asking for its ``.zarray`` / ``.zattrs`` raises
`UnsupportedFeatureError` naming the array and pointing to `refzarr.open_dataset`. The store then
has no ``.zmetadata`` (consolidated metadata could only leave that array out in silence), so
zarr lists the members, reads the other arrays, and raises that error on reaching this one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from zarr.core.buffer import Buffer, BufferPrototype

from refzarr.codecs.chunk import ChunkDecoder, check_chunk_bytes, check_stored_bytes
from refzarr.errors import UnsupportedFeatureError
from refzarr.formats.api import Source, read
from refzarr.io import RangeReader
from refzarr.model import MISSING, ChunkRef, RefArray, RefGroup
from refzarr.model.hierarchy import (
    array_metadata,
    chunk_key,
    describe_irregular,
    group_documents,
    hierarchy_metadata,
)
from refzarr.model.kerchunk import metadata_text

__all__ = ["ReferenceStore"]


class ReferenceStore(Store):
    """A read-only Zarr store over references (Zarr v2 metadata, chunks fetched on demand).

    Parameters
    ----------
    refs
        A `RefGroup`, or anything `refzarr.read` accepts (a JSON or Parquet reference set's path
        or URL, a kerchunk dict).
    storage_options
        fsspec options for the referenced files (and for reading ``refs`` when it is a URL).
    allowed_protocols
        Protocols (``"s3"``, ``"file"``) or URL prefixes (``"s3://bucket/data/"``) the references
        may read; a chunk pointing elsewhere raises `ForbiddenURLError` before any request.
    reader
        A `RangeReader` to share (it carries the fetch policies); built from the options above
        when not given.
    check_chunks
        Decode every whole chunk served once, raising `ChunkDecodeError` (naming the key and
        the URL and range) for bytes that do not decode (default). False serves the bytes
        unchecked: zarr then decodes them and a corrupt chunk raises the codec's own error
        (``zlib.error``, ...), which saves decoding each chunk twice.

    Notes
    -----
    An array whose chunk grid is irregular (`ArrayMeta.rectilinear`) has no Zarr v2 metadata:
    getting its ``.zarray`` or ``.zattrs`` raises `UnsupportedFeatureError` (read it with
    `refzarr.open_dataset`), and the store then serves no ``.zmetadata``.

    Examples
    --------
    >>> store = ReferenceStore("refs.json")  # doctest: +SKIP
    >>> group = zarr.open_group(store, mode="r", zarr_format=2)  # doctest: +SKIP
    """

    supports_writes = False
    supports_deletes = False
    supports_partial_writes = False
    supports_listing = True

    def __init__(
        self,
        refs: RefGroup | Source,
        *,
        storage_options: Mapping[str, Any] | None = None,
        allowed_protocols: Sequence[str] | None = None,
        reader: RangeReader | None = None,
        check_chunks: bool = True,
    ) -> None:
        super().__init__(read_only=True)
        self.check_chunks = check_chunks
        self._decoders: dict[int, ChunkDecoder] = {}
        self.group = refs if isinstance(refs, RefGroup) else read(refs, storage_options)
        self.reader = reader or RangeReader(
            storage_options=storage_options, allowed=allowed_protocols
        )
        self._arrays = dict(self.group.arrays())
        self._metadata, self._unreadable = _render_metadata(self.group, self._arrays)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ReferenceStore)
            and other.group is self.group
            and other.reader is self.reader
        )

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"ReferenceStore({len(self._arrays)} arrays)"

    # -- reading ---------------------------------------------------------------------------

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        """The bytes of ``key`` (None when absent or never written)."""
        values = await self.get_partial_values(prototype, [(key, byte_range)])
        return values[0]

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        """Values of many keys; every referenced range is fetched in one batched read."""
        requests = list(key_ranges)
        out: list[Buffer | None] = [None] * len(requests)
        fetch: list[tuple[int, str, int, int, str]] = []  # (slot, url, offset, length, key)
        checks: list[
            tuple[str, bytes | memoryview, str]
        ] = []  # (key, whole chunk, where it came from)
        for slot, (key, byte_range) in enumerate(requests):
            value = self._resolve(key)
            if value is None:
                continue
            if key not in self._metadata:
                self._check_size(key)
            if isinstance(value, bytes):
                out[slot] = prototype.buffer.from_bytes(_slice(value, byte_range))
                if byte_range is None and key not in self._metadata:
                    checks.append((key, value, "inlined in the reference set"))
                continue
            url, offset, length = await self._range(value, byte_range)
            check_stored_bytes(length, key, url)
            fetch.append((slot, url, offset, length, key))
        if fetch:
            datas = await asyncio.to_thread(
                self.reader.read,
                [f[1] for f in fetch],
                [f[2] for f in fetch],
                [f[3] for f in fetch],
                [f[4] for f in fetch],
            )
            for (slot, url, offset, length, key), data in zip(fetch, datas, strict=True):
                out[slot] = prototype.buffer.from_bytes(bytes(data))
                if requests[slot][1] is None:
                    checks.append((key, data, f"bytes {offset}-{offset + length} of {url}"))
        if checks and self.check_chunks:
            await asyncio.to_thread(self._check, checks)
        return out

    def _check_size(self, key: str) -> None:
        """ChunkDecodeError before zarr allocates a chunk larger than `max_chunk_bytes`."""
        located = self._locate(key)
        if located is not None and not located[0].meta.rectilinear:
            check_chunk_bytes(located[0].meta.chunks, located[0].meta.dtype, key)

    def _check(self, checks: Sequence[tuple[str, bytes | memoryview, str]]) -> None:
        """Decode whole chunks once; ChunkDecodeError names the key and the bytes' origin."""
        for key, data, origin in checks:
            located = self._locate(key)
            if located is None or located[0].meta.rectilinear:
                continue  # zarr reads no chunk of an array without Zarr v2 metadata
            array = located[0]
            decoder = self._decoders.get(id(array))
            if decoder is None:
                name = key.rpartition("/")[0] or "/"
                decoder = self._decoders.setdefault(id(array), ChunkDecoder(array.meta, name))
            decoder.decode(data, f"{key} ({origin})")

    async def exists(self, key: str) -> bool:
        """True for metadata keys and chunks that hold data."""
        return key in self._unreadable or self._resolve(key) is not None

    def _resolve(self, key: str) -> bytes | ChunkRef | None:
        """Metadata bytes, inlined chunk bytes, a chunk's reference, or None.

        Raises UnsupportedFeatureError for metadata that Zarr v2 cannot express.
        """
        document = self._metadata.get(key)
        if document is not None:
            return document
        unreadable = self._unreadable.get(key)
        if unreadable is not None:
            raise UnsupportedFeatureError(unreadable)
        located = self._locate(key)
        if located is None:
            return None
        array, index = located
        return array.manifest[index]

    def _locate(self, key: str) -> tuple[RefArray, tuple[int, ...]] | None:
        path, _, name = key.rpartition("/")
        array = self._arrays.get(path)
        if array is None:
            return self._locate_slashed(key)
        return _chunk_index(array, name)

    def _locate_slashed(self, key: str) -> tuple[RefArray, tuple[int, ...]] | None:
        """Chunk keys of arrays whose dimension separator is ``/`` (``temp/0/1/2``)."""
        parts = key.split("/")
        for cut in range(len(parts) - 1, 0, -1):
            array = self._arrays.get("/".join(parts[:cut]))
            if array is not None and array.meta.dimension_separator == "/":
                return _chunk_index(array, ".".join(parts[cut:]))
        return None

    async def _range(self, ref: ChunkRef, byte_range: ByteRequest | None) -> tuple[str, int, int]:
        length = ref.length
        if length is None:
            length = await asyncio.to_thread(self.reader.size, ref.url) - ref.offset
        start, stop = _bounds(length, byte_range)
        return ref.url, ref.offset + start, stop - start

    # -- listing ---------------------------------------------------------------------------

    async def list(self) -> AsyncIterator[str]:
        """Every metadata key and every chunk key that holds data."""
        for key in (*self._metadata, *self._unreadable):
            yield key
        for path, array in self._arrays.items():
            for key in _chunk_keys(path, array):
                yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Keys starting with ``prefix``."""
        async for key in self.list():
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Names directly below ``prefix`` (members, metadata files, chunk keys)."""
        base = prefix.rstrip("/")
        lead = f"{base}/" if base else ""
        seen: set[str] = set()
        for key in (*self._metadata, *self._unreadable):
            if key.startswith(lead):
                name = key[len(lead) :].split("/", 1)[0]
                if name not in seen:
                    seen.add(name)
                    yield name
        array = self._arrays.get(base)
        if array is not None:
            for key in _chunk_keys(base, array):
                name = key[len(lead) :].split("/", 1)[0]
                if name not in seen:
                    seen.add(name)
                    yield name

    # -- writing is not supported ----------------------------------------------------------

    async def set(self, key: str, value: Buffer) -> None:
        """Not supported: reference stores are read-only."""
        raise UnsupportedFeatureError(f"{key}: a ReferenceStore is read-only")

    async def delete(self, key: str) -> None:
        """Not supported: reference stores are read-only."""
        raise UnsupportedFeatureError(f"{key}: a ReferenceStore is read-only")


def _render_metadata(
    group: RefGroup, arrays: Mapping[str, RefArray]
) -> tuple[dict[str, bytes], dict[str, str]]:
    """The metadata keys as bytes, and the keys that cannot be rendered -> why (those of
    arrays with irregular chunk grids; then there is no ``.zmetadata``)."""
    documents: dict[str, Any] = {}
    unreadable: dict[str, str] = {}
    for path, node in hierarchy_metadata(group):  # each group's members right after it
        if isinstance(node, RefGroup):
            documents.update(group_documents(path, node))
        elif node.meta.is_regular:
            documents.update(array_metadata(path, node))
        else:
            why = _irregular_message(path, node)
            unreadable.update({f"{path}/.zarray": why, f"{path}/.zattrs": why})
    rendered = {key: metadata_text(doc).encode() for key, doc in documents.items()}
    if not unreadable:
        consolidated = {"metadata": documents, "zarr_consolidated_format": 1}
        rendered[".zmetadata"] = metadata_text(consolidated).encode()
    return rendered, unreadable


def _irregular_message(path: str, array: RefArray) -> str:
    return (
        f"{describe_irregular(path, array)}. zarr-python reads a ReferenceStore through Zarr v2 "
        f"metadata, which has one chunk length per axis and cannot describe {path!r}: read it "
        "with refzarr.open_dataset (or xarray.open_dataset(..., engine='refzarr')), which reads "
        "irregular chunk grids."
    )


def _chunk_index(array: RefArray, name: str) -> tuple[RefArray, tuple[int, ...]] | None:
    grid = array.meta.grid_shape
    if not grid:
        return (array, ()) if name == "0" else None
    parts = name.split(".")
    if len(parts) != len(grid) or not all(p.isdigit() for p in parts):
        return None
    index = tuple(int(p) for p in parts)
    if not all(i < n for i, n in zip(index, grid, strict=True)):
        return None
    return array, index


def _chunk_keys(path: str, array: RefArray) -> Iterator[str]:
    """Keys of the chunks that hold data (missing ones are not listed)."""
    manifest = array.manifest
    grid = manifest.grid_shape
    separator = array.meta.dimension_separator
    for block in manifest.iter_written_blocks():
        numbers = np.flatnonzero(block.path_id != MISSING) + block.start
        if not grid:
            yield from (chunk_key(path, (), separator) for _ in numbers.tolist())
            continue
        coords = np.stack(np.unravel_index(numbers, grid), axis=1).tolist()
        for index in coords:
            yield chunk_key(path, tuple(index), separator)


def _bounds(length: int, byte_range: ByteRequest | None) -> tuple[int, int]:
    if byte_range is None:
        return 0, length
    if isinstance(byte_range, RangeByteRequest):
        return min(byte_range.start, length), min(byte_range.end, length)
    if isinstance(byte_range, OffsetByteRequest):
        return min(byte_range.offset, length), length
    if isinstance(byte_range, SuffixByteRequest):
        return max(length - byte_range.suffix, 0), length
    raise TypeError(f"unknown byte range {byte_range!r}")


def _slice(data: bytes, byte_range: ByteRequest | None) -> bytes:
    start, stop = _bounds(len(data), byte_range)
    return data[start:stop]
