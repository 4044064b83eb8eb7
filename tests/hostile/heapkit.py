"""Damaging an HDF5 file's first global heap collection the way that made libhdf5 loop
forever: shared by the global-heap tests."""

from __future__ import annotations

__all__ = ["damaged_heap_object"]


def damaged_heap_object(data: bytes) -> bytes:
    """Object 1's size in the first collection set to 0x3D (its first byte: the header of a
    collection and of its objects is 16 bytes whatever the size of lengths); HDF5 then
    loops forever."""
    damaged = bytearray(data)
    at = damaged.find(b"GCOL")
    assert at >= 0
    damaged[at + 24] = 0x3D
    return bytes(damaged)
