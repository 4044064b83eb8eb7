"""Chunk coordinates of an extensible-array chunk index, put right where HDF5 misreports them.

An extensible array (the chunk index of a dataset with one unlimited axis in files written
with ``libver="v110"`` / ``"latest"``) numbers chunks with the unlimited axis moved first
("swizzled"), over the maximum chunk grid. HDF5 2.0's ``H5Dchunk_iter``, ``H5Dget_chunk_info``
and ``H5Dget_chunk_info_by_coord`` turn that number back into coordinates without moving the
axis back: when the unlimited axis is not the first, chunk ``(1, 0)`` of a ``(3, None)``
dataset is reported as ``(0, 1)``, and a scan built on the report puts chunks in the wrong
places (silently, whenever the misreported coordinates fall inside the grid). HDF5 reads the
data right. Whether the HDF5 in use misreports is tested once, on a tiny file in memory, so a
fixed HDF5 is not "corrected" into wrong places.
"""

from __future__ import annotations

import functools
import io
import math
import os
import struct
from typing import Any

import h5py
import numpy as np

from refzarr.errors import ScanError
from refzarr.scan.hdf5.ohdr import LAYOUT, FormatMismatch, Read, find_message, header_address
from refzarr.scan.hdf5.ohdr import read_superblock as _read_superblock

__all__ = ["unswizzled"]

_EXTENSIBLE_ARRAY = 4
"""The chunk index type of a version 4 layout message that numbers chunks swizzled."""


def unswizzled(
    ds: h5py.Dataset, coords: np.ndarray[Any, np.dtype[np.int64]], read: Read | None
) -> np.ndarray[Any, np.dtype[np.int64]]:
    """``coords`` (chunk units, as HDF5 reported them) with HDF5's misreport undone.

    Unchanged unless the dataset has exactly one unlimited axis, not the first, its chunks
    are indexed by an extensible array, and this HDF5 misreports such chunks.

    Raises
    ------
    ScanError
        When the index type cannot be read (``read`` None, or the layout message not as
        the format says) for a dataset where the answer would move chunks.
    """
    unlimited = [axis for axis, most in enumerate(ds.maxshape or ()) if most is None]
    if len(unlimited) != 1 or unlimited[0] == 0 or not len(coords):
        return coords
    if not _hdf5_misreports():
        return coords
    axis = unlimited[0]
    chunks = ds.chunks
    assert chunks is not None
    # chunks per axis of the maximum grid (the unlimited axis: unbounded)
    most = [
        -(-int(m) // c) if m is not None else 0 for m, c in zip(ds.maxshape, chunks, strict=True)
    ]
    if math.prod(most[:axis]) == 1:  # axes before it hold one chunk: nothing moves
        return coords
    if not _extensible_array(ds, read):
        return coords
    return _moved_back(coords, most, axis)


def _moved_back(
    coords: np.ndarray[Any, np.dtype[np.int64]], most: list[int], axis: int
) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The true coordinates: HDF5 counted the chunk's number (over the grid with ``axis``
    first) off in the unswizzled grid, where everything before ``axis`` stays 0."""
    if (coords[:, :axis] != 0).any():
        raise ScanError("chunk coordinates unlike HDF5's report of an extensible array")
    after = most[axis + 1 :]
    inner = math.prod(after)
    number = coords[:, axis] * inner
    for k in range(len(after)):
        number = number + coords[:, axis + 1 + k] * math.prod(after[k + 1 :])
    before = most[:axis]
    block = math.prod(before) * inner  # chunks per step along the unlimited axis
    out = np.empty_like(coords)
    out[:, axis] = number // block
    rest = number % block
    for k in range(axis):  # the axes HDF5 put after the unlimited one, in their order
        step = math.prod(before[k + 1 :]) * inner
        out[:, k] = rest // step
        rest = rest % step
    for k in range(len(after)):
        step = math.prod(after[k + 1 :])
        out[:, axis + 1 + k] = rest // step
        rest = rest % step
    return out


def _extensible_array(ds: h5py.Dataset, read: Read | None) -> bool:
    """Whether the dataset's version 4 layout message names an extensible array index."""
    name = ds.name
    try:
        f = ds.file
        if read is None and f.driver == "sec2" and hasattr(os, "pread"):
            fd = f.id.get_vfd_handle()
            read = lambda position, length: os.pread(fd, length, position)  # noqa: E731
        if read is None:
            raise FormatMismatch("no reader of the file's bytes")
        sb = _read_superblock(read, f.id.get_create_plist().get_userblock(), f.id.get_filesize())
        body = find_message(read, sb, header_address(ds.id), LAYOUT)
        if body is None or len(body) < 5:
            raise FormatMismatch("no layout message")
        if body[0] < 4 or body[1] != 2:
            return False  # version 3: a version 1 B-tree, coordinates stored with each chunk
        ndims, width = body[3], body[4]
        return bool(body[5 + ndims * width] == _EXTENSIBLE_ARRAY)
    except (FormatMismatch, OSError, ValueError, IndexError, struct.error) as exc:
        raise ScanError(
            f"dataset {name!r}: its chunk index cannot be read ({exc}), and this HDF5 "
            "misreports where the chunks of an extensible array index are"
        ) from exc


@functools.cache
def _hdf5_misreports() -> bool:
    """Whether this HDF5 reports extensible-array chunks at swizzled coordinates."""
    with h5py.File(io.BytesIO(), "w", libver="latest") as f:
        ds = f.create_dataset("d", shape=(2, 1), dtype="u1", chunks=(1, 1), maxshape=(2, None))
        ds[...] = [[1], [2]]
        f.flush()
        found = [tuple(ds.id.get_chunk_info(k).chunk_offset) for k in range(2)]
    return sorted(found) != [(0, 0), (1, 0)]
