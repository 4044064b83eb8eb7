"""The global heap collections variable-length values point into, checked before h5py reads
them: a damaged object size in a collection makes the HDF5 library loop forever (found by
flipping bytes: tests/hostile/test_hdf5_flips.py).

Only what can be read without the HDF5 library is checked: the descriptors (length,
collection address, object index) of variable-length attributes (read from their object
header's messages), of compact datasets (from their layout message), of contiguous ones, and
of chunked ones whose filters refzarr decodes (deflate, shuffle, ...: the codecs the scanner
would reference them with); each collection they name is walked object by object from the File
Format Specification.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import h5py
import numpy as np
from h5py import h5d

from refzarr.errors import ScanError
from refzarr.scan.hdf5.types import creation_plist

__all__ = ["check_attribute_heaps", "check_global_heaps"]

ReadRange = Callable[[int, int], bytes]
CompactData = Callable[[], bytes | None]

_HEAD = 16  # "GCOL", version, 3 reserved, collection size (8 bytes)
_CELL = np.dtype([("length", "<u4"), ("address", "<u8"), ("index", "<u4")])


def check_global_heaps(
    ds: h5py.Dataset,
    read_range: ReadRange,
    size: int,
    where: str,
    compact: CompactData | None = None,
) -> None:
    """Raise ScanError when a collection the dataset's values point into is damaged.

    ``read_range(offset, length)`` reads the file, ``size`` bytes long; ``compact()`` gives
    the raw data of a compact dataset (its layout message), None when it cannot.
    """
    if not _checkable(ds.file):
        return
    _check(ds.file, _stored(ds, read_range, compact), read_range, size, f"{where}: its")


def check_attribute_heaps(
    obj: h5py.HLObject,
    attributes: Iterable[tuple[str, bytes]],
    read_range: ReadRange,
    size: int,
    where: str,
) -> None:
    """Raise ScanError when a collection the values of variable-length attributes of ``obj``
    point into is damaged (``attributes``: their names and stored descriptors)."""
    if not _checkable(obj.file):
        return
    for name, raw in attributes:
        _check(obj.file, [raw], read_range, size, f"{where}: attribute {name!r}: its")


def _checkable(f: h5py.File) -> bool:
    """Whether descriptors are as read here (8-byte addresses)."""
    return tuple(f.id.get_create_plist().get_sizes()) == (8, 8)


def _check(
    f: h5py.File, stored: Iterable[bytes], read_range: ReadRange, size: int, what: str
) -> None:
    base = f.id.get_create_plist().get_userblock()
    wanted: dict[int, dict[int, int]] = {}
    for raw in stored:
        cells = np.frombuffer(raw[: len(raw) // 16 * 16], dtype=_CELL)
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
                f"{what} variable-length values point into a damaged global heap "
                f"collection at byte {base + address}: {reason}"
            )


def _stored(
    ds: h5py.Dataset, read_range: ReadRange, compact: CompactData | None
) -> Iterator[bytes]:
    """The stored descriptors, chunk by chunk (nothing when they cannot be read here)."""
    layout = creation_plist(ds).get_layout()
    if layout == h5d.COMPACT:
        raw = compact() if compact is not None else None
        if raw:
            yield raw
        return
    if layout == h5d.CONTIGUOUS:
        offset, nbytes = ds.id.get_offset(), ds.id.get_storage_size()
        if offset is not None and nbytes:
            yield read_range(int(offset), int(nbytes))
        return
    if layout != h5d.CHUNKED:
        return
    decode = _decoder(ds)
    if decode is None:
        return
    for k in range(ds.id.get_num_chunks()):
        info = ds.id.get_chunk_info(k)
        data = read_range(int(info.byte_offset), int(info.size))
        yield decode(data, int(info.filter_mask))


def _decoder(ds: h5py.Dataset) -> Callable[[bytes, int], bytes] | None:
    """Undoes the dataset's filters on one stored chunk (``b""`` when it does not decode:
    h5py then says what is wrong); None when refzarr has no codec for one of them."""
    from numcodecs import get_codec

    from refzarr.codecs.hdf5.filters import filters_to_codecs
    from refzarr.scan.hdf5.layout import dataset_filters

    try:
        stages = dataset_filters(ds)
        codecs = [get_codec(dict(config)) for config in filters_to_codecs(stages, 16)]
    except Exception:  # an unknown or unsupported filter: not checked here
        return None
    # a filter mask names HDF5's stages: it maps onto the codecs when each stage has one
    one_each = len(codecs) == len(stages)

    def decode(data: bytes, mask: int) -> bytes:
        if mask and not one_each:
            return b""
        out: Any = data
        try:
            for k in reversed(range(len(codecs))):
                if not mask >> k & 1:
                    out = codecs[k].decode(out)
        except Exception:
            return b""
        return bytes(np.asarray(out).reshape(-1).view(np.uint8))

    return decode


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
