"""`ReferenceStore`: a read-only zarr-python 3 Store over a reference set.

Metadata keys (``.zgroup``, ``.zattrs``, ``.zarray``, ``.zmetadata``) are rendered from the model
as Zarr v2 documents; chunk keys resolve through the manifests: a missing chunk is absent (zarr
reads the fill value), an inlined one is served from memory, a referenced one is fetched through
the io layer (batched in `get_partial_values`). A chunk that cannot be fetched raises
`ChunkFetchError`. `getsize` answers from the manifests, fetching nothing.

Chunks are decoded by refzarr, once, so bytes that do not decode raise `ChunkDecodeError` naming
the key and where the bytes came from (as `refzarr.open_dataset` does) rather than a codec's own
error from inside zarr. By default (``decoded=True``) the store serves each chunk decoded, and
the ``.zarray`` of such an array lists no codecs: zarr only views the bytes as the dtype. Arrays
of Python objects (variable-length strings) keep their codecs: their chunks are served as stored
and decoded once more by zarr. ``decoded=False`` serves every chunk as stored under the codecs
of the reference set, decoding it once first only to check it; ``check_chunks=False`` serves the
stored bytes unchecked (zarr decodes them; a corrupt chunk raises the codec's own error).

An array whose chunk grid is irregular (rectilinear, as combining files of uneven lengths makes
it) has no Zarr v2 metadata: asking for its ``.zarray`` / ``.zattrs`` raises
`UnsupportedFeatureError` naming the array and pointing to `refzarr.open_dataset`. The store then
has no ``.zmetadata`` (consolidated metadata could only leave that array out in silence), so
zarr lists the members, reads the other arrays, and raises that error on reaching this one.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

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
from refzarr.model import MISSING, ArrayMeta, ChunkRef, RefArray, RefGroup
from refzarr.model.hierarchy import (
    array_metadata,
    chunk_key,
    describe_irregular,
    group_documents,
    hierarchy_metadata,
)
from refzarr.model.kerchunk import metadata_text
from refzarr.reader.shared import SetOrigin, changed_set, metadata_digest, opened_set, set_origin
from refzarr.sources.guard import CheckSources, SourceGuard, source_guard

__all__ = ["ReferenceStore"]


class ReferenceStore(Store):
    """A read-only Zarr store over references (Zarr v2 metadata, chunks fetched and decoded
    on demand).

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
    check_sources
        Compare each source file with the state its scan recorded (`RefGroup.sources`) the
        first time a chunk of it is read, and raise `SourceChangedError` for one that changed:
        ``"local"`` (default) local files (one ``stat`` each per store), ``"all"`` remote
        ones too (one metadata request each), ``"none"`` / False nothing. A set that records
        no sources is read unchecked; a ``reader`` given with its own ``url_check`` keeps it.
    check_chunks
        Decode every chunk served with refzarr's decoders, raising `ChunkDecodeError` (naming
        the key and the URL and range) for bytes that do not decode (default). False serves
        the stored bytes under the reference set's codecs, unchecked: zarr decodes them and a
        corrupt chunk raises the codec's own error (``zlib.error``, ...); ``decoded`` is then
        ignored.
    decoded
        With ``check_chunks``: serve chunks decoded, the arrays' ``.zarray`` listing no codecs
        (``filters`` and ``compressor`` null), so each chunk is decoded once (default). Arrays
        of Python objects (variable-length strings) keep their codecs: their chunks are served
        as stored, checked by a decode first. False serves every chunk so, under the
        reference set's codecs: for callers that want the stored bytes or the codecs, at the
        cost of decoding each chunk twice (refzarr checks, zarr decodes).

    Notes
    -----
    Served decoded, an array opened with zarr has no ``filters`` / ``compressors`` and xarray's
    ``encoding`` shows none; the values, dtype (byte order included), fill value, chunks and
    attributes are those of the reference set. Copying the store elsewhere (``zarr.copy_store``)
    copies decoded, uncompressed chunks.

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
        decoded: bool = True,
        check_sources: CheckSources | SourceGuard = "local",
    ) -> None:
        super().__init__(read_only=True)
        self.check_chunks = check_chunks
        self.decoded = decoded and check_chunks
        self.group = refs if isinstance(refs, RefGroup) else read(refs, storage_options)
        where = os.fspath(refs) if isinstance(refs, str | os.PathLike) else None
        guard = source_guard(self.group, check_sources, where)
        self.check_sources: CheckSources | SourceGuard = "none" if guard is None else guard
        self._origin: SetOrigin | None = None
        self._digest: bytes | None = None
        if reader is None:
            reader = RangeReader(
                storage_options=storage_options, allowed=allowed_protocols, url_check=guard
            )
            # opened from a path or URL: pickles as it (a dask worker reads the set once)
            self._origin = None if where is None else set_origin(where, reader)
        elif guard is not None and reader.url_check is None:
            reader = replace(reader, url_check=guard)
        self.reader = reader
        self._arrays = dict(self.group.arrays())
        self._names = {id(array): path or "/" for path, array in self._arrays.items()}
        self._decoders: dict[int, ChunkDecoder] = {}
        decoded_paths = {p for p, a in self._arrays.items() if self.decoded and _decodable(a)}
        self._served_decoded = {id(self._arrays[path]) for path in decoded_paths}
        self._metadata, self._unreadable = _render_metadata(self.group, self._arrays, decoded_paths)

    def __getstate__(self) -> dict[str, Any]:
        # what the store is made of: its tables are keyed by the arrays' ids, which a copy
        # (a dask worker's) rebuilds for its own arrays
        return {
            "refs": self.group,
            "reader": self.reader,
            "check_chunks": self.check_chunks,
            "decoded": self.decoded,
            "check_sources": self.check_sources,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __reduce__(self) -> tuple[Any, ...]:
        if self._origin is None:
            return (_store_from_state, (self.__getstate__(),))
        return (_shared_store, (self._origin, self.check_chunks, self.decoded, self.digest()))

    def digest(self) -> bytes:
        """A digest of the metadata this store serves (a worker's copy must serve the same)."""
        if self._digest is None:
            self._digest = metadata_digest(self._metadata.items())
        return self._digest

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ReferenceStore)
            and other.group is self.group
            and other.reader is self.reader
            and (other.check_chunks, other.decoded) == (self.check_chunks, self.decoded)
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
        fetch: list[tuple[_Chunk, str, int, int]] = []  # (chunk, url, offset, length)
        chunks: list[tuple[_Chunk, bytes | memoryview, str]] = []  # (chunk, bytes, origin)
        for slot, (key, byte_range) in enumerate(requests):
            document = self._metadata.get(key)
            if document is not None:
                out[slot] = prototype.buffer.from_bytes(_slice(document, byte_range))
                continue
            found = self._chunk(slot, key, byte_range)
            if found is None:
                continue
            chunk, value = found
            if chunk.array.meta.is_regular:
                check_chunk_bytes(chunk.array.meta.chunks, chunk.array.meta.dtype, key)
            if isinstance(value, bytes):
                inlined = _slice(value, chunk.fetched_range)
                chunks.append((chunk, inlined, "inlined in the reference set"))
                continue
            url, offset, length = await self._range(value, chunk.fetched_range)
            check_stored_bytes(length, key, url)
            fetch.append((chunk, url, offset, length))
        if fetch:  # fetched and decoded in one hand-off to a thread (each costs ~100 us)
            await asyncio.to_thread(self._fetch_and_serve, fetch, chunks, out, prototype)
        elif any(chunk.how != "stored" for chunk, _, _ in chunks):  # inlined ones to decode
            await asyncio.to_thread(self._serve, chunks, out, prototype)
        else:
            self._serve(chunks, out, prototype)
        return out

    def _fetch_and_serve(
        self,
        fetch: Sequence[tuple[_Chunk, str, int, int]],
        chunks: list[tuple[_Chunk, bytes | memoryview, str]],
        out: list[Buffer | None],
        prototype: BufferPrototype,
    ) -> None:
        """Fetch the referenced chunks in one batched read, then serve every chunk asked."""
        datas = self.reader.read(
            [f[1] for f in fetch],
            [f[2] for f in fetch],
            [f[3] for f in fetch],
            [f[0].key for f in fetch],
        )
        for (chunk, url, offset, length), data in zip(fetch, datas, strict=True):
            chunks.append((chunk, data, f"bytes {offset}-{offset + length} of {url}"))
        self._serve(chunks, out, prototype)

    def _serve(
        self,
        chunks: Sequence[tuple[_Chunk, bytes | memoryview, str]],
        out: list[Buffer | None],
        prototype: BufferPrototype,
    ) -> None:
        """Put each chunk's value in ``out``: as stored, or decoded (checked) first."""
        plain = [c for c in chunks if c[0].how == "stored"]
        for chunk, stored, _ in plain:  # the bytes asked for, as stored
            out[chunk.slot] = prototype.buffer.from_bytes(bytes(stored))
        if len(plain) < len(chunks):
            self._decode(chunks, out, prototype)

    def _chunk(
        self, slot: int, key: str, byte_range: ByteRequest | None
    ) -> tuple[_Chunk, bytes | ChunkRef] | None:
        """How chunk ``key`` is served and its inlined bytes or reference (None: absent).

        Raises UnsupportedFeatureError for metadata that Zarr v2 cannot express.
        """
        unreadable = self._unreadable.get(key)
        if unreadable is not None:
            raise UnsupportedFeatureError(unreadable)
        located = self._locate(key)
        if located is None:
            return None
        array, index = located
        value = array.manifest[index]
        if value is None:
            return None
        if id(array) in self._served_decoded and (byte_range is None or array.meta.codecs):
            how = "decoded"  # the whole chunk is fetched and decoded, then cut
        elif self.check_chunks and byte_range is None and array.meta.is_regular:
            how = "checked"
        else:
            how = "stored"
        return _Chunk(slot, key, array, byte_range, how), value

    def _decode(
        self,
        chunks: Sequence[tuple[_Chunk, bytes | memoryview, str]],
        out: list[Buffer | None],
        prototype: BufferPrototype,
    ) -> None:
        """Decode chunks served decoded or checked; ChunkDecodeError names the key and the
        bytes' origin."""
        for chunk, data, origin in chunks:
            if chunk.how == "stored":
                continue
            array = chunk.array
            values = self._decoder(array).decode(data, f"{chunk.key} ({origin})")
            if chunk.how == "checked":
                out[chunk.slot] = prototype.buffer.from_bytes(bytes(data))
                continue
            raw = _decoded_bytes(values, array.meta)
            start, stop = _bounds(len(raw), chunk.byte_range)
            out[chunk.slot] = prototype.buffer.from_bytes(raw[start:stop].data)

    async def getsize(self, key: str) -> int:
        """The size in bytes of the value of ``key``, told by the manifest: no chunk is fetched
        or decoded (a whole-file reference asks the file's size).

        A chunk served decoded has the size of a whole decoded chunk (its chunk shape times its
        item size), one served as stored its stored length; ``get`` may still raise for it
        (`ChunkDecodeError` for bytes that do not decode, `ChunkFetchError`).

        Raises
        ------
        FileNotFoundError
            When ``key`` holds nothing (a missing chunk, an unknown key), as zarr's stores do.
        UnsupportedFeatureError
            For the metadata of an array Zarr v2 cannot describe, as ``get`` does.
        """
        document = self._metadata.get(key)
        if document is not None:
            return len(document)
        found = self._chunk(0, key, None)
        if found is None:
            raise FileNotFoundError(key)
        chunk, value = found
        if chunk.how == "decoded":
            meta = chunk.array.meta
            return math.prod(meta.chunks) * meta.dtype.itemsize
        if isinstance(value, bytes):
            return len(value)
        return (await self._range(value, None))[2]

    def _decoder(self, array: RefArray) -> ChunkDecoder:
        decoder = self._decoders.get(id(array))
        if decoder is None:
            decoder = ChunkDecoder(array.meta, self._names[id(array)])
            decoder = self._decoders.setdefault(id(array), decoder)
        return decoder

    async def exists(self, key: str) -> bool:
        """True for metadata keys and chunks that hold data."""
        return (
            key in self._metadata
            or key in self._unreadable
            or self._chunk(0, key, None) is not None
        )

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


class _Chunk(NamedTuple):
    """A chunk asked for: where its value goes, and how it is served (``"decoded"``,
    ``"checked"``: as stored after a decode, ``"stored"``: as stored)."""

    slot: int
    key: str
    array: RefArray
    byte_range: ByteRequest | None
    how: str

    @property
    def fetched_range(self) -> ByteRequest | None:
        """The range read: the whole chunk when it is decoded (then cut)."""
        return None if self.how == "decoded" else self.byte_range


def _decodable(array: RefArray) -> bool:
    """Whether the array's chunks can be served decoded under codec-free metadata: a regular
    grid and fixed-size values (decoded objects have no bytes: they need their codecs)."""
    return array.meta.is_regular and not array.meta.dtype.hasobject


def _decoded_bytes(values: np.ndarray[Any, Any], meta: ArrayMeta) -> np.ndarray[Any, Any]:
    """A decoded chunk's bytes in the array's memory order (what zarr views as its dtype)."""
    if values.dtype != meta.dtype:  # objects a codec made for a fixed-size dtype, as zarr does
        values = np.asarray(values).astype(meta.dtype)
    return values.ravel(order=meta.order).view(np.uint8)


def _store_from_state(state: dict[str, Any]) -> ReferenceStore:
    store = ReferenceStore.__new__(ReferenceStore)
    store.__setstate__(state)
    return store


def _shared_store(
    origin: SetOrigin, check_chunks: bool, decoded: bool, digest: bytes
) -> ReferenceStore:
    """A pickled store of a set opened by path: one per mode per process, over the set that
    process read once; `RefFormatError` when its metadata is no longer the pickled store's."""
    opened = opened_set(origin)
    mode = ("store", check_chunks, decoded)
    store: ReferenceStore | None = opened.made.get(mode)
    if store is None:
        check: Any = origin.check_sources
        made = ReferenceStore(
            opened.group,
            reader=opened.reader,
            check_chunks=check_chunks,
            decoded=decoded,
            check_sources=check,
        )
        made._origin = origin
        store = opened.made.setdefault(mode, made)
    if store.digest() != digest:
        raise changed_set(origin)
    return store


def _render_metadata(
    group: RefGroup, arrays: Mapping[str, RefArray], decoded: set[str]
) -> tuple[dict[str, bytes], dict[str, str]]:
    """The metadata keys as bytes, and the keys that cannot be rendered -> why (those of
    arrays with irregular chunk grids; then there is no ``.zmetadata``). The arrays at
    ``decoded`` paths are described without codecs."""
    documents: dict[str, Any] = {}
    unreadable: dict[str, str] = {}
    for path, node in hierarchy_metadata(group):  # each group's members right after it
        if isinstance(node, RefGroup):
            documents.update(group_documents(path, node))
        elif node.meta.is_regular:
            documents.update(array_metadata(path, node))
            if path in decoded:
                documents[f"{path}/.zarray"].update(filters=None, compressor=None)
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
