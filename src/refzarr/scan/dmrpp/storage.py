"""Where a variable's bytes are, as a DMR++ sidecar says: chunk lists, contiguous data, compact
data (base64 in the sidecar), multi-block chunks, and the filters as numcodecs configs.

Chunk lists are read column-wise: one list of attribute texts per column, parsed by numpy,
so a sidecar of 10^4 chunks costs no Python object per chunk beyond ElementTree's own.
"""

from __future__ import annotations

import base64
import binascii
import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.codecs.hdf5.filters import Hdf5Filter, filter_to_codec, filters_to_codecs
from refzarr.errors import RefFormatError, ScanError, UnsupportedFeatureError
from refzarr.model import INLINED, ChunkManifest
from refzarr.model.sparse import check_dense
from refzarr.scan.dmrpp.locate import DataFiles
from refzarr.scan.dmrpp.xmldoc import DMRPP
from refzarr.scan.hdf5.masks import recoder

__all__ = ["Layout", "Storage", "codecs_for", "compact_storage", "listed_storage"]

_FILTER_IDS = {"deflate": 1, "shuffle": 2, "fletcher32": 3}
"""The filters ``build_dmrpp`` writes in ``compressionType``, by their HDF5 filter ids."""

_ORIGINAL_ORDER = ("shuffle", "deflate", "fletcher32")
"""The order older DMR++ readers applied filters in, whatever the sidecar listed."""


@dataclass(frozen=True, slots=True)
class Layout:
    """What storage needs to know of a variable."""

    where: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    codecs: tuple[dict[str, Any], ...]
    stages: tuple[dict[str, Any] | None, ...]  # one codec (or None) per HDF5 filter


@dataclass(frozen=True, slots=True)
class Storage:
    """A variable's chunk shape and manifest; ``complete``: every chunk of the grid written."""

    chunks: tuple[int, ...]
    manifest: ChunkManifest
    complete: bool


def codecs_for(
    chunks: ET.Element | None, dtype: np.dtype[Any], where: str, *, old: bool
) -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any] | None, ...]]:
    """The codecs of ``compressionType`` (in HDF5's encoding order) and one config per filter.

    ``old``: a sidecar without ``dmrpp:version``, whose readers applied shuffle, deflate and
    fletcher32 in that order whatever it listed; the listed order is kept (it is the order
    ``build_dmrpp`` read from the file).
    """
    text = "" if chunks is None else chunks.get("compressionType", "")
    names = text.split()
    levels = _deflate_levels(chunks, where)
    stages: list[Hdf5Filter] = []
    for name in names:
        fid = _FILTER_IDS.get(name)
        if fid is None:
            raise UnsupportedFeatureError(
                f"{where}: compressionType {name!r} is a filter refzarr does not know in DMR++ "
                f"sidecars (it knows {', '.join(_FILTER_IDS)})"
            )
        data: tuple[int, ...] = ()
        if fid == 1 and levels:
            data = (levels.pop(0),)
        elif fid == 2:
            data = (dtype.itemsize,)
        stages.append(Hdf5Filter(fid, name, data))
    codecs = filters_to_codecs(stages, dtype, where=where)
    per_stage = tuple(filter_to_codec(stage, dtype, where=where) for stage in stages)
    return tuple(codecs), per_stage


def _deflate_levels(chunks: ET.Element | None, where: str) -> list[int]:
    if chunks is None:
        return []
    text = chunks.get("deflateLevel") or chunks.get("deflate_level") or ""
    try:
        return [int(v) for v in text.split()]
    except ValueError:
        raise ScanError(f"{where}: deflateLevel {text!r} is not a list of integers") from None


# -- chunk lists ----------------------------------------------------------------------------


def listed_storage(
    chunks: ET.Element | None,
    contiguous: ET.Element | None,
    layout: Layout,
    files: DataFiles,
    *,
    inline_threshold: int,
    multi_block_bytes: int,
) -> Storage:
    """Storage described by ``dmrpp:chunks`` (a chunk list, linked blocks, or nothing written)
    or by an old-style ``dmrpp:chunk`` right under the variable (``contiguous``)."""
    where, shape = layout.where, layout.shape
    cds = None if chunks is None else chunks.find(DMRPP + "chunkDimensionSizes")
    chunk_shape = shape if cds is None else _chunk_shape(cds.text, shape, where)
    grid = tuple(math.ceil(s / c) if c else 0 for s, c in zip(shape, chunk_shape, strict=True))
    if chunks is None:
        listed = [] if contiguous is None else [contiguous]
        blocks: list[ET.Element] = []
    else:
        listed = chunks.findall(DMRPP + "chunk")
        blocks = chunks.findall(DMRPP + "block")
    if blocks and not listed:  # one contiguous variable in linked blocks
        return _one_multi_block(blocks, layout, files, grid, multi_block_bytes)
    if chunks is not None and chunks.get("LBChunk") == "true":
        return _linked_chunks(listed, layout, files, chunk_shape, grid, multi_block_bytes)
    table = _ChunkTable.parse(listed, len(shape), where)
    index = table.grid_index(chunk_shape, shape, cds is not None, where)
    return _manifest(table, index, layout, files, chunk_shape, grid, inline_threshold)


def _chunk_shape(text: str | None, shape: tuple[int, ...], where: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(v) for v in (text or "").split())
    except ValueError:
        raise ScanError(f"{where}: chunkDimensionSizes {text!r} are not integers") from None
    if len(sizes) != len(shape) or any(s < 1 for s in sizes):
        raise ScanError(
            f"{where}: chunkDimensionSizes {text!r} do not fit the variable's shape {shape}"
        )
    return sizes


@dataclass(frozen=True, slots=True)
class _ChunkTable:
    """The ``dmrpp:chunk`` elements of one variable, column-wise."""

    offsets: np.ndarray[Any, np.dtype[np.uint64]]
    lengths: np.ndarray[Any, np.dtype[np.uint64]]
    positions: list[str | None]
    hrefs: list[str | None]
    masks: list[str | None]

    @classmethod
    def parse(cls, elements: Sequence[ET.Element], ndim: int, where: str) -> _ChunkTable:
        attrs = [e.attrib for e in elements]
        return cls(
            _column([a.get("offset") for a in attrs], "offset", where),
            _column([a.get("nBytes") for a in attrs], "nBytes", where),
            [a.get("chunkPositionInArray") for a in attrs],
            [a.get("href") for a in attrs],
            [a.get("fm") for a in attrs],
        )

    def grid_index(
        self, chunk_shape: tuple[int, ...], shape: tuple[int, ...], chunked: bool, where: str
    ) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Each chunk's index in the chunk grid (rows), checked against the shape."""
        n, ndim = len(self.positions), len(shape)
        if not chunked or None in self.positions:
            if n > 1:
                raise ScanError(
                    f"{where}: {n} chunks listed without chunkPositionInArray (or without "
                    "chunkDimensionSizes); only a contiguous variable has one chunk and no position"
                )
            return np.zeros((n, ndim), dtype=np.int64)
        coords = _positions(self.positions, ndim, where)
        step = np.asarray(chunk_shape, dtype=np.int64)
        bad = (coords % step != 0) | (coords >= np.asarray(shape, dtype=np.int64))
        if bad.any():
            k = int(np.flatnonzero(bad.any(axis=1))[0])
            raise ScanError(
                f"{where}: chunk {k} at chunkPositionInArray {self.positions[k]} is not the "
                f"start of a chunk of shape {chunk_shape} inside the shape {shape}"
            )
        return coords // step


def _column(texts: list[str | None], name: str, where: str) -> np.ndarray[Any, np.dtype[np.uint64]]:
    try:
        values = np.array(list(map(int, texts)), dtype=np.int64)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        values = None
    if values is None or (values < 0).any():
        for k, text in enumerate(texts):
            if text is None:
                raise ScanError(f"{where}: chunk {k} has no {name} attribute")
            if not text.strip().isdigit():
                raise ScanError(f"{where}: chunk {k}: {name}={text!r} is not a byte count")
        raise ScanError(f"{where}: a chunk's {name} is out of range")
    return values.astype(np.uint64)


def _positions(texts: list[str | None], ndim: int, where: str) -> np.ndarray[Any, Any]:
    """``[i,j,...]`` texts as rows of ints: joined and parsed at once, checked after."""
    if not texts:
        return np.zeros((0, ndim), dtype=np.int64)
    joined = "" if None in texts else "".join(texts)  # type: ignore[arg-type]
    n = len(texts)
    numbers: list[int] | None = None
    if joined.count("[") == n and joined.count("]") == n:
        try:
            numbers = list(map(int, joined.replace("][", ",").strip(" []").split(",")))
        except ValueError:
            numbers = None
    if numbers is None or len(numbers) != n * ndim or min(numbers) < 0:
        _bad_position(texts, ndim, where)
    return np.array(numbers, dtype=np.int64).reshape(n, ndim)


def _bad_position(texts: list[str | None], ndim: int, where: str) -> None:
    for k, text in enumerate(texts):
        body = (text or "").strip()
        inner = body[1:-1].split(",")
        if not (body.startswith("[") and body.endswith("]")) or len(inner) != ndim:
            raise ScanError(
                f"{where}: chunk {k}: chunkPositionInArray {text!r} is not '[i,j,...]' of "
                f"{ndim} indices"
            )
        if not all(v.strip().isdigit() for v in inner):
            raise ScanError(f"{where}: chunk {k}: chunkPositionInArray {text!r} is not integers")
    raise ScanError(f"{where}: chunk positions are not each {ndim} non-negative indices")


def _manifest(
    table: _ChunkTable,
    index: np.ndarray[Any, Any],
    layout: Layout,
    files: DataFiles,
    chunk_shape: tuple[int, ...],
    grid: tuple[int, ...],
    inline_threshold: int,
) -> Storage:
    where = layout.where
    urls = [files.url]
    ids = np.zeros(len(table.hrefs), dtype=np.int64)
    if any(table.hrefs):
        resolved = [files.resolve(h, where) for h in table.hrefs]
        urls = sorted(set(resolved))
        ids = np.array([urls.index(u) for u in resolved], dtype=np.int64)
    keep = np.ones(len(ids), dtype=bool)
    inlined: dict[tuple[int, ...], bytes] = {}
    masked = _masked(table.masks, where)
    small = table.lengths < inline_threshold if inline_threshold else np.zeros(len(ids), bool)
    if masked.any() or small.any():
        recode = (
            recoder(
                layout.stages, layout.codecs, math.prod(chunk_shape) * layout.dtype.itemsize, where
            )
            if masked.any()
            else None
        )
        for k in np.flatnonzero(masked | small).tolist():
            chunk = tuple(int(i) for i in index[k])
            data = files.read(urls[ids[k]], int(table.offsets[k]), int(table.lengths[k]), where)
            if masked[k] and recode is not None:
                data = recode(chunk, int(table.masks[k] or 0), data)
            inlined[chunk] = data
            keep[k] = False
    if not grid:  # a scalar: one chunk, no grid
        return _scalar(urls[ids[0]] if len(ids) else None, table, inlined)
    try:
        manifest = ChunkManifest.from_entries(
            grid,
            index[keep],
            urls,
            ids[keep],
            table.offsets[keep],
            table.lengths[keep],
            inlined,
            where=where,
        )
    except RefFormatError as exc:
        raise ScanError(f"{where}: {exc}") from None
    return Storage(chunk_shape, manifest, len(ids) == math.prod(grid))


def _masked(masks: list[str | None], where: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
    if not any(masks):
        return np.zeros(len(masks), dtype=bool)
    try:
        values = np.array([int(m or 0) for m in masks], dtype=np.int64)
    except ValueError:
        raise ScanError(f"{where}: a chunk's filter mask (fm) is not an integer") from None
    masked: np.ndarray[Any, np.dtype[np.bool_]] = values != 0
    return masked


def _scalar(url: str | None, table: _ChunkTable, inlined: dict[tuple[int, ...], bytes]) -> Storage:
    zero = np.zeros((), dtype=np.uint64)
    if inlined:
        data = next(iter(inlined.values()))
        manifest = ChunkManifest.from_arrays((), np.full((), INLINED), zero, zero, {(): data})
    elif url is None:
        manifest = ChunkManifest.missing(())
    else:
        manifest = ChunkManifest.from_arrays(
            (url,),
            np.zeros((), np.int32),
            table.offsets[0].reshape(()),
            table.lengths[0].reshape(()),
        )
    return Storage((), manifest, url is not None or bool(inlined))


# -- multi-block chunks ---------------------------------------------------------------------


def _linked_chunks(
    listed: list[ET.Element],
    layout: Layout,
    files: DataFiles,
    chunk_shape: tuple[int, ...],
    grid: tuple[int, ...],
    limit: int,
) -> Storage:
    """``LBChunk="true"``: chunks whose elements with ``LinkedBlockIndex`` 0, 1, ... are the
    blocks of one chunk (the first one carries its position), read and inlined when small."""
    where = layout.where
    groups: list[list[ET.Element]] = []
    for element in listed:
        lbi = element.get("LinkedBlockIndex")
        if lbi is None or lbi == "0" or not groups:
            groups.append([element])
        else:
            groups[-1].append(element)
    inlined: dict[tuple[int, ...], bytes] = {}
    for group in groups:
        table = _ChunkTable.parse(group[:1], len(layout.shape), where)
        chunk = tuple(int(i) for i in table.grid_index(chunk_shape, layout.shape, True, where)[0])
        inlined[chunk] = _read_blocks(group, layout, files, limit)
    return _inlined_storage(grid, chunk_shape, inlined)


def _one_multi_block(
    blocks: list[ET.Element], layout: Layout, files: DataFiles, grid: tuple[int, ...], limit: int
) -> Storage:
    """A contiguous variable stored in several blocks (``dmrpp:block``): read and inlined."""
    data = _read_blocks(blocks, layout, files, limit)
    return _inlined_storage(grid, layout.shape, {(0,) * len(grid): data})


def _read_blocks(elements: list[ET.Element], layout: Layout, files: DataFiles, limit: int) -> bytes:
    where = layout.where
    table = _ChunkTable.parse(elements, len(layout.shape), where)
    total = int(table.lengths.sum())
    if total > limit:
        raise UnsupportedFeatureError(
            f"{where}: a chunk stored in {len(elements)} separate blocks ({total} bytes) cannot "
            f"be referenced as one byte range, and is larger than multi_block_bytes={limit} to "
            "inline; raise multi_block_bytes to inline it"
        )
    parts = [
        files.read(files.resolve(href, where), int(off), int(n), where)
        for href, off, n in zip(table.hrefs, table.offsets, table.lengths, strict=True)
    ]
    return b"".join(parts)


def _inlined_storage(
    grid: tuple[int, ...], chunk_shape: tuple[int, ...], inlined: dict[tuple[int, ...], bytes]
) -> Storage:
    if not grid:
        zero = np.zeros((), dtype=np.uint64)
        data = inlined[()]
        return Storage(
            (), ChunkManifest.from_arrays((), np.full((), INLINED), zero, zero, {(): data}), True
        )
    n = math.prod(grid)
    ids = np.full(grid, -1, dtype=np.int32)
    for chunk in inlined:
        ids[chunk] = INLINED
    zeros = np.zeros(grid, dtype=np.uint64)
    manifest = ChunkManifest.from_arrays((), ids, zeros, zeros, inlined)
    return Storage(chunk_shape, manifest, len(inlined) == n)


# -- values held in the sidecar -------------------------------------------------------------


def compact_storage(text: str | None, layout: Layout, *, compressed: bool = False) -> Storage:
    """A variable whose bytes the sidecar holds in base64 (``dmrpp:compact``, and
    ``dmrpp:missingdata``, zlib-compressed unless the variable has one element)."""
    where, shape = layout.where, layout.shape
    try:
        data = base64.b64decode((text or "").strip(), validate=False)
    except (binascii.Error, ValueError) as exc:
        raise ScanError(f"{where}: the sidecar's base64 data is damaged: {exc}") from None
    expected = math.prod(shape) * layout.dtype.itemsize
    if compressed and math.prod(shape) != 1:
        data = _inflate(data, expected, where)
    if len(data) != expected:
        raise ScanError(
            f"{where}: the sidecar holds {len(data)} bytes of data, the variable needs {expected}"
        )
    return _inlined_storage(tuple(1 for _ in shape), shape, {(0,) * len(shape): data})


def _inflate(data: bytes, expected: int, where: str) -> bytes:
    import zlib

    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, expected + 1)  # never more than one extra byte
    except zlib.error as exc:
        raise ScanError(f"{where}: the sidecar's compressed data does not inflate: {exc}") from None
    return out


def vlsa_values(vlsa: ET.Element, tag: str, where: str, shape: tuple[int, ...]) -> list[bytes]:
    """The values of a ``dmrpp:vlsa`` element (its ``<v>`` children are ``tag``):
    each ``<v>`` (UTF-8 text, or base64 of zlib-compressed bytes, ``s`` of them), repeated
    ``c`` times. The repeat counts are checked before anything is repeated: a few bytes of
    sidecar can say ``c="1000000000000"``."""
    elements = list(vlsa.iter(tag))
    counts = [1 if v.get("c") is None else _count(v.get("c") or "", where) for v in elements]
    expected = math.prod(shape)
    if sum(counts) != expected:
        raise ScanError(
            f"{where}: dmrpp:vlsa holds {sum(counts)} values for a shape {shape} "
            f"({expected} values)"
        )
    check_dense(expected, f"{where}: dmrpp:vlsa (values inlined in the references)")
    values: list[bytes] = []
    for v, count in zip(elements, counts, strict=True):
        text = v.text or ""
        size = v.get("s")
        value = text.encode("utf-8") if size is None else _vlsa_inflated(text, size, where)
        values.extend([value] * count)
    return values


def _count(text: str, where: str) -> int:
    if not text.strip().isdigit() or len(text.strip()) > 19:
        raise ScanError(f"{where}: a vlsa value's repeat count c={text[:40]!r} is not a count")
    return int(text)


def _vlsa_inflated(text: str, size: str, where: str) -> bytes:
    expected = _count(size, where)
    try:
        raw = base64.b64decode(text.strip())
    except (binascii.Error, ValueError) as exc:
        raise ScanError(f"{where}: a vlsa value's base64 is damaged: {exc}") from None
    data = _inflate(raw, expected, where)
    if len(data) != expected:
        raise ScanError(f"{where}: a vlsa value inflates to {len(data)} bytes, s={expected}")
    return data
