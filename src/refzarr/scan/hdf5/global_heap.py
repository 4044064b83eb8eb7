"""The global heap collections a variable-length string dataset points into, checked before
h5py reads its values: a damaged object size in a collection makes the HDF5 library loop
forever (found by flipping bytes: tests/hostile/test_hdf5_flips.py).

Only what can be read without the HDF5 library is checked: the descriptors of contiguous and
unfiltered or deflated chunked storage (length, collection address, object index), and each
collection they name walked object by object from the File Format Specification.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator

import h5py
import numpy as np
from h5py import h5d, h5z

from refzarr.errors import ScanError
from refzarr.scan.hdf5.types import creation_plist

__all__ = ["check_global_heaps"]

ReadRange = Callable[[int, int], bytes]

_HEAD = 16  # "GCOL", version, 3 reserved, collection size (8 bytes)


def check_global_heaps(ds: h5py.Dataset, read_range: ReadRange, size: int, where: str) -> None:
    """Raise ScanError when a collection the dataset's values point into is damaged.

    ``read_range(offset, length)`` reads the file, ``size`` bytes long.
    """
    sizes = ds.file.id.get_create_plist().get_sizes()
    if tuple(sizes) != (8, 8):
        return  # other address sizes: not checked
    base = ds.file.id.get_create_plist().get_userblock()
    dtype = np.dtype([("length", "<u4"), ("address", "<u8"), ("index", "<u4")])
    wanted: dict[int, dict[int, int]] = {}
    for raw in _stored(ds, read_range):
        cells = np.frombuffer(raw[: len(raw) // 16 * 16], dtype=dtype)
        cells = cells[cells["address"] != 0]
        for address, index, length in zip(
            cells["address"].tolist(),
            cells["index"].tolist(),
            cells["length"].tolist(),
            strict=True,
        ):
            objects = wanted.setdefault(address, {})
            objects[index] = max(objects.get(index, 0), length)
    for address, objects in wanted.items():
        reason = _damage(read_range, base + address, size, objects)
        if reason:
            raise ScanError(
                f"{where}: its variable-length values point into a damaged global heap "
                f"collection at byte {base + address}: {reason}"
            )


def _stored(ds: h5py.Dataset, read_range: ReadRange) -> Iterator[bytes]:
    """The stored descriptors, chunk by chunk (nothing when they cannot be read here)."""
    layout = creation_plist(ds).get_layout()
    if layout == h5d.CONTIGUOUS:
        offset, nbytes = ds.id.get_offset(), ds.id.get_storage_size()
        if offset is not None and nbytes:
            yield read_range(int(offset), int(nbytes))
        return
    if layout != h5d.CHUNKED:
        return
    plist = creation_plist(ds)
    filters = [plist.get_filter(k)[0] for k in range(plist.get_nfilters())]
    if any(f != h5z.FILTER_DEFLATE for f in filters):
        return
    for k in range(ds.id.get_num_chunks()):
        info = ds.id.get_chunk_info(k)
        data = read_range(int(info.byte_offset), int(info.size))
        yield _inflated(data) if filters and not info.filter_mask & 1 else data


def _inflated(data: bytes) -> bytes:
    try:
        return zlib.decompress(data)
    except zlib.error:
        return b""  # h5py says what is wrong with it


def _damage(read_range: ReadRange, address: int, size: int, objects: dict[int, int]) -> str:
    """What is wrong with the collection at ``address`` ("" when nothing)."""
    if address + _HEAD > size:
        return "it lies beyond the file's end"
    head = read_range(address, _HEAD)
    if head[:4] != b"GCOL" or head[4] != 1:
        return "no GCOL signature (version 1)"
    total = struct.unpack_from("<Q", head, 8)[0]
    if total < _HEAD or address + total > size:
        return f"its size ({total} bytes) runs past the file's end"
    found = _objects(read_range(address, total))
    if isinstance(found, str):
        return found
    for index, length in objects.items():
        if found.get(index, -1) < length:
            return f"object {index} ({length} bytes) is not in it"
    return ""


def _objects(collection: bytes) -> dict[int, int] | str:
    """Object index -> size, walked from the first object to the free space (or the end)."""
    out: dict[int, int] = {}
    at, end = _HEAD, len(collection)
    while at + 16 <= end:
        index, _, _, length = struct.unpack_from("<HHIQ", collection, at)
        if index == 0:
            return out if at + length == end else "its free space does not end it"
        if at + 16 + length > end:
            return f"object {index} ({length} bytes) runs past its end"
        if index in out:
            return f"object {index} is listed twice"
        out[index] = length
        at += 16 + -(-length // 8) * 8
    return out if at >= end or end - at < 16 else "its objects do not end it"
