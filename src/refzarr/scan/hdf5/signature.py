"""HDF5's file signature: at byte 0 or after a user block of 512, 1024, 2048, ... bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO

from refzarr.scan.base import HEAD_BYTES, Probe

__all__ = ["HDF5_MAGIC", "hdf5_signature_offset", "is_hdf5"]

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
"""The HDF5 superblock signature."""

_MAX_USERBLOCK_STEPS = 40


def hdf5_signature_offset(f: BinaryIO, size: int) -> int | None:
    """Where HDF5's signature is in the open file ``f`` of ``size`` bytes: 0, 512, 1024, ...

    None when it is at none of these offsets within the file.
    """

    def read_at(offset: int, length: int) -> bytes:
        f.seek(offset)
        return f.read(length)

    return _signature_offset(read_at, size)


def is_hdf5(probe: Probe) -> bool:
    """Whether ``probe`` is an HDF5 file (netCDF4 included)."""
    if probe.read_at is None:
        return False
    head, more = probe.head, probe.read_at

    def read_at(offset: int, length: int) -> bytes:
        if offset + length <= len(head) or len(head) < HEAD_BYTES:
            return head[offset : offset + length]
        return more(offset, length)

    return _signature_offset(read_at, None) is not None


def _signature_offset(read_at: Callable[[int, int], bytes], size: int | None) -> int | None:
    offset = 0
    for _ in range(_MAX_USERBLOCK_STEPS):
        if size is not None and offset + len(HDF5_MAGIC) > size:
            return None
        found = read_at(offset, len(HDF5_MAGIC))
        if found == HDF5_MAGIC:
            return offset
        if len(found) < len(HDF5_MAGIC):  # past the end
            return None
        offset = 512 if offset == 0 else offset * 2
    return None
