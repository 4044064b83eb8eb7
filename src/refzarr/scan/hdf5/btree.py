"""Chunk locations read straight from a version 1 B-tree chunk index, with numpy.

h5py's ``DatasetID.chunk_iter`` calls Python once per chunk (about 1.2 s for a million
chunks). Datasets whose data layout message is version 3, chunked (the default of h5py and
netCDF-4: a version 1 B-tree indexes the chunks), are read here instead, level by level:
the nodes of a level are read into one buffer (``os.preadv`` on h5py's own file descriptor,
or a ``read_range`` for file objects) and parsed with one structured ``np.frombuffer`` per
batch of nodes, every check vectorised.

Written from the HDF5 File Format Specification. Anything unexpected (another layout or
index, a file open for writing, a node that is not as the specification says, chunks that
disagree with the dataset, a total size or a sample of chunks that disagrees with h5py)
gives None: the caller then uses ``chunk_iter``, whatever HDF5 makes of the file.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterator
from functools import partial
from typing import Any, NamedTuple

import h5py
import numpy as np

from refzarr.scan.hdf5.ohdr import (
    LAYOUT,
    FormatMismatch,
    Read,
    Superblock,
    find_message,
    header_address,
    read_superblock,
    undefined,
)

__all__ = ["BtreeChunks", "read_btree_chunks"]

MIN_CHUNKS = 1024
"""Smaller chunk grids are left to h5py: about 1 µs a chunk, against 0.5 ms to start here."""

BATCH = 512
"""Nodes read into one buffer and parsed per numpy call (1.6 MB with the default K)."""

SAMPLE = 8
"""Chunks compared with h5py's ``get_chunk_info_by_coord``, besides the first one."""

SAMPLE_SPAN = 65_536
"""Samples come from the first chunks in index order: h5py's lookup walks the index."""

MAX_LEVEL = 64
"""Deeper trees are damaged ones (2K**64 chunks)."""


class BtreeChunks(NamedTuple):
    """Every allocated chunk of a dataset, in index order (that of ``chunk_iter``)."""

    coords: np.ndarray[Any, np.dtype[np.int64]]
    """(n, ndim): chunk coordinates in chunk units."""
    offsets: np.ndarray[Any, np.dtype[np.uint64]]
    """Absolute byte offsets in the file."""
    sizes: np.ndarray[Any, np.dtype[np.uint64]]
    """Stored (filtered) sizes in bytes."""
    masks: np.ndarray[Any, np.dtype[np.uint32]]
    """Filter masks: bit i set when filter i was skipped."""


class _Mismatch(Exception):
    """The index is not as expected: fall back to HDF5."""


_FALLBACK = (_Mismatch, FormatMismatch, OSError, ValueError, IndexError, struct.error)


def read_btree_chunks(
    ds: h5py.Dataset, read_range: Read | None = None, *, min_chunks: int | None = None
) -> BtreeChunks | None:
    """The chunks of ``ds`` read from its version 1 B-tree, or None to use h5py instead.

    None for every dataset this reader does not cover (another chunk index or layout, a
    file open for writing, another driver than sec2 without ``read_range``) and whenever
    anything differs from what the format and h5py say.

    Parameters
    ----------
    ds
        A chunked dataset of a file h5py opened read-only.
    read_range
        ``read_range(offset, length)``: bytes of the file h5py reads through a file object
        (driver ``fileobj``, remote files). Local files opened by path are read with
        ``os.preadv`` on h5py's own file descriptor; this is then not used.
    min_chunks
        None for every dataset whose chunk grid holds fewer chunks than this
        (`MIN_CHUNKS` when None): h5py lists a few chunks faster than this reader starts.
    """
    if ds.chunks is None:
        return None
    # the grid first: small ones are the common case, and ``ds.file`` costs ~20 µs
    grid = (-(-size // chunk) for size, chunk in zip(ds.shape, ds.chunks, strict=True))
    if math.prod(grid) < (MIN_CHUNKS if min_chunks is None else min_chunks):
        return None
    f = ds.file
    if f.mode != "r" or f.swmr_mode:  # the bytes on disk may be stale
        return None
    if not hasattr(ds.id, "get_chunk_info_by_coord"):  # HDF5 < 1.10.5: nothing to check with
        return None
    try:
        read, nodes = _readers(f, read_range)
        if read is None or nodes is None:
            return None
        sb = read_superblock(read, f.id.get_create_plist().get_userblock(), nodes.file_size)
        root = _btree_address(ds, read, sb)
        chunks = _empty(ds.ndim) if root is None else _walk(ds, nodes, sb, root)
        _cross_check(ds, chunks)
    except _FALLBACK:
        return None
    return chunks


def _readers(f: h5py.File, read_range: Read | None) -> tuple[Read | None, _NodeReader | None]:
    """Reading single ranges and batches of nodes of ``f`` (None: a driver not covered)."""
    if f.driver == "sec2" and hasattr(os, "preadv"):  # Windows has neither pread nor preadv
        fd = f.id.get_vfd_handle()
        size = os.fstat(fd).st_size
        read = _checked(partial(_pread, fd), size)
        return read, _NodeReader(read, size, fd)
    if f.driver == "fileobj" and read_range is not None:
        size = f.id.get_filesize()
        read = _checked(read_range, size)
        return read, _NodeReader(read, size)
    return None, None


def _pread(fd: int, position: int, length: int) -> bytes:
    return os.pread(fd, length, position)


def _checked(read: Read, file_size: int) -> Read:
    """``read`` that refuses ranges beyond ``file_size`` and short reads."""

    def checked(position: int, length: int) -> bytes:
        if position < 0 or length < 0 or position + length > file_size:
            raise _Mismatch("read beyond the file's end")
        data = read(position, length)
        if len(data) != length:
            raise _Mismatch("short read")
        return data

    return checked


def _btree_address(ds: h5py.Dataset, read: Read, sb: Superblock) -> int | None:
    """The B-tree's address from a version 3 chunked layout message (None: no chunks yet)."""
    body = find_message(read, sb, _header_address(ds), LAYOUT)
    if body is None or len(body) < 3 or body[0] != 3 or body[1] != 2:
        raise _Mismatch("not a version 3 chunked layout")
    ndims, osize = body[2], sb.offset_size
    if ndims != ds.ndim + 1 or len(body) < 3 + osize + 4 * ndims:
        raise _Mismatch("layout dimensionality")
    address = int.from_bytes(body[3 : 3 + osize], "little")
    dims = struct.unpack_from(f"<{ndims}I", body, 3 + osize)
    if dims[:-1] != tuple(ds.chunks) or dims[-1] != ds.id.get_type().get_size():
        raise _Mismatch("layout chunk shape or element size")
    return None if undefined(address, osize) else address


def _header_address(ds: h5py.Dataset) -> int:
    """The address of the dataset's object header."""
    if not hasattr(h5py.h5g, "get_objinfo"):  # deprecated in HDF5
        raise _Mismatch("no H5Gget_objinfo")
    return header_address(ds.id)


def _empty(ndim: int) -> BtreeChunks:
    return BtreeChunks(
        np.zeros((0, ndim), dtype=np.int64),
        np.zeros(0, dtype=np.uint64),
        np.zeros(0, dtype=np.uint64),
        np.zeros(0, dtype=np.uint32),
    )


class _Shape(NamedTuple):
    """The byte layout of the dataset's B-tree nodes."""

    node: np.dtype[Any]
    entries: int  # 2K: entries a node holds at most

    @classmethod
    def of(cls, sb: Superblock, ndims: int) -> _Shape:
        address = f"<u{sb.offset_size}"
        key = [("size", "<u4"), ("mask", "<u4"), ("offsets", "<u8", (ndims,))]
        entry = np.dtype([*key, ("child", address)])
        entries = 2 * sb.istore_k
        node = np.dtype(
            [
                ("signature", "S4"),
                ("type", "u1"),
                ("level", "u1"),
                ("used", "<u2"),
                ("left", address),
                ("right", address),
                ("entries", entry, (entries,)),
                ("last", np.dtype(key)),
            ]
        )
        return cls(node, entries)


class _Leaves:
    """Chunk columns gathered batch by batch from the leaves, checked as they come."""

    def __init__(self, ds: h5py.Dataset, sb: Superblock, file_size: int) -> None:
        self.ndim = ds.ndim
        self.chunk = np.asarray(ds.chunks, dtype=np.uint64)
        self.grid = tuple(math.ceil(s / c) for s, c in zip(ds.shape, ds.chunks, strict=True))
        self.base, self.file_size = np.uint64(sb.base), np.uint64(file_size)
        self.last = -1  # the linear number of the previous chunk: they must increase
        self.columns: list[tuple[np.ndarray[Any, Any], ...]] = []

    def add(self, entries: np.ndarray[Any, Any]) -> None:
        """Check the leaf entries of one batch of nodes and keep their columns."""
        ndim = self.ndim
        offsets = entries["offsets"]
        if (offsets[:, ndim] != 0).any() or (offsets[:, :ndim] % self.chunk).any():
            raise _Mismatch("chunk offset not on the chunk grid")
        coords = (offsets[:, :ndim] // self.chunk).astype(np.int64)
        if min(self.grid) == 0 or (coords >= np.asarray(self.grid, dtype=np.int64)).any():
            raise _Mismatch("chunk beyond the dataspace")
        numbers = np.ravel_multi_index(tuple(coords.T), self.grid)
        if numbers[0] <= self.last or (np.diff(numbers) <= 0).any():
            raise _Mismatch("chunks out of order or repeated")
        self.last = int(numbers[-1])
        sizes = entries["size"].astype(np.uint64)
        child = entries["child"].astype(np.uint64)
        addresses = child + self.base
        if (sizes == 0).any() or (addresses < child).any():
            raise _Mismatch("chunk of size zero or address overflow")
        if (addresses >= self.file_size).any() or (addresses + sizes > self.file_size).any():
            raise _Mismatch("chunk beyond the file's end")
        self.columns.append((coords, addresses, sizes, entries["mask"].astype(np.uint32)))

    def chunks(self) -> BtreeChunks:
        """All the columns, in index order."""
        if not self.columns:
            return _empty(self.ndim)
        return BtreeChunks(*(np.concatenate(column) for column in zip(*self.columns, strict=True)))


def _walk(ds: h5py.Dataset, read: _NodeReader, sb: Superblock, root: int) -> BtreeChunks:
    """Read the tree level by level, from the root down to the chunks."""
    shape = _Shape.of(sb, ds.ndim + 1)
    addresses = np.array([root], dtype=np.uint64)
    root_node = np.frombuffer(read([sb.base + root], shape.node.itemsize), dtype=shape.node)
    level = int(root_node["level"][0])
    if level > MAX_LEVEL:
        raise _Mismatch("tree too deep")
    leaves = _Leaves(ds, sb, read.file_size)
    for depth in range(level, 0, -1):
        if len(np.unique(addresses)) != len(addresses):
            raise _Mismatch("a node is referenced twice")
        children = [
            entries["child"].astype(np.uint64)
            for entries in _read_level(read, sb, shape, addresses, depth)
        ]
        if not children:
            raise _Mismatch("an internal node without children")
        addresses = np.concatenate(children)
    if len(np.unique(addresses)) != len(addresses):
        raise _Mismatch("a node is referenced twice")
    for entries in _read_level(read, sb, shape, addresses, 0):
        leaves.add(entries)
    return leaves.chunks()


def _read_level(
    read: _NodeReader, sb: Superblock, shape: _Shape, addresses: np.ndarray[Any, Any], level: int
) -> Iterator[np.ndarray[Any, Any]]:
    """The used entries of the nodes at ``addresses``, all of ``level``, batch by batch."""
    if (addresses == np.uint64((1 << (8 * sb.offset_size)) - 1)).any():
        raise _Mismatch("undefined child address")
    size = shape.node.itemsize
    positions = addresses + np.uint64(sb.base)
    last = read.file_size - size  # the last position a node can start at
    if last < 0 or (positions < addresses).any() or (positions > np.uint64(last)).any():
        raise _Mismatch("node beyond the file's end")
    for start in range(0, len(addresses), BATCH):
        batch = positions[start : start + BATCH].tolist()
        nodes = np.frombuffer(read(batch, size), dtype=shape.node)
        used = nodes["used"].astype(np.int64)
        if (
            (nodes["signature"] != b"TREE").any()
            or (nodes["type"] != 1).any()
            or (nodes["level"] != level).any()
            or (used > shape.entries).any()
            or ((used < 1) & (len(addresses) > 1)).any()  # only a lone root may be empty
        ):
            raise _Mismatch("not a chunk B-tree node of the expected level")
        entries = nodes["entries"][np.arange(shape.entries) < used[:, None]]
        if len(entries):
            yield entries


class _NodeReader:
    """Reads a batch of equal-sized nodes into one reused buffer."""

    def __init__(self, read: Read, file_size: int, fd: int | None = None) -> None:
        self.read, self.file_size, self.fd = read, file_size, fd
        self.buffer = bytearray()

    def __call__(self, positions: list[int], size: int) -> memoryview:
        """The ``size`` bytes at each of ``positions``, one after the other."""
        need = size * len(positions)
        if len(self.buffer) < need:
            self.buffer = bytearray(need)
        view = memoryview(self.buffer)
        if self.fd is None:
            read = self.read
            for k, position in enumerate(positions):
                view[k * size : (k + 1) * size] = read(position, size)
            return view[:need]
        fd, preadv = self.fd, os.preadv
        for k, position in enumerate(positions):
            if preadv(fd, [view[k * size : (k + 1) * size]], position) != size:
                raise _Mismatch("short read")
        return view[:need]


def _cross_check(ds: h5py.Dataset, chunks: BtreeChunks) -> None:
    """The total stored size and a sample of chunks must be h5py's."""
    n = len(chunks.offsets)
    if int(chunks.sizes.sum()) != ds.id.get_storage_size():
        raise _Mismatch("stored size differs from h5py's")
    if n == 0:
        return
    span = min(n, SAMPLE_SPAN)
    picks = {0, span - 1, *np.random.default_rng(n).integers(0, span, SAMPLE).tolist()}
    if n <= SAMPLE_SPAN:
        picks.add(n - 1)
    chunk = np.asarray(ds.chunks, dtype=np.int64)
    for k in sorted(picks):
        offset = tuple(int(c) for c in chunks.coords[k] * chunk)
        info = ds.id.get_chunk_info_by_coord(offset)
        if (
            info.byte_offset != int(chunks.offsets[k])
            or info.size != int(chunks.sizes[k])
            or info.filter_mask != int(chunks.masks[k])
        ):
            raise _Mismatch(f"chunk {offset} differs from h5py's")
