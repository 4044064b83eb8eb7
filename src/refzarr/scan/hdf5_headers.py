"""The object headers of an open HDF5 file read from its bytes, for their attribute messages.

Local files are read with ``os.pread`` on h5py's own file descriptor, file objects (remote
files) through the scan's ``read_range``. Whatever is not as expected (another driver, a
header this reader does not parse, a read beyond the file's end) gives None: the caller
then reads the attributes with h5py.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import h5py

from refzarr.errors import ScanError
from refzarr.scan.hdf5_attr_messages import HeaderAttributes, header_attributes
from refzarr.scan.hdf5_ohdr import FormatMismatch, Read, Superblock, read_header, read_superblock

__all__ = ["ObjectHeaders"]

_FALLBACK = (FormatMismatch, OSError, ValueError, IndexError, struct.error, ScanError)
_LONG = 8 * struct.calcsize("L")


class _Beyond(Exception):
    """A read beyond the file's end or a short one."""


class ObjectHeaders:
    """Attribute messages of the objects of one file open read-only.

    Parameters
    ----------
    h5
        The file, as h5py opened it (read-only).
    read_range
        ``read_range(offset, length)``: the file's bytes when h5py reads it through a file
        object; unused for files h5py opened by path.
    """

    __slots__ = ("_h5", "_opened", "_read", "_read_range", "_sb")

    def __init__(self, h5: h5py.File, read_range: Read | None) -> None:
        self._h5, self._read_range = h5, read_range
        self._opened = False
        self._read: Read | None = None
        self._sb: Superblock | None = None

    def attributes(self, oid: Any) -> HeaderAttributes | None:
        """The attributes of the object ``oid`` (a group or dataset id), or None: use h5py."""
        if not self._opened:
            self._opened = True
            try:
                self._open()
            except (*_FALLBACK, _Beyond):
                return None
        if self._read is None or self._sb is None:
            return None
        try:
            header = read_header(self._read, self._sb, _header_address(oid))
            return header_attributes(header, self._sb)
        except (*_FALLBACK, _Beyond):
            return None

    def _open(self) -> None:
        """Find how to read the file and its superblock (once; nothing when not covered)."""
        f = self._h5
        if f.mode != "r" or f.swmr_mode:  # another writer: the bytes on disk may be stale
            raise FormatMismatch("not a read-only file")
        if f.driver == "sec2" and hasattr(os, "pread"):
            fd = f.id.get_vfd_handle()
            size = os.fstat(fd).st_size
            read = _checked(lambda position, length: os.pread(fd, length, position), size)
        elif f.driver == "fileobj" and self._read_range is not None:
            size = f.id.get_filesize()
            read = _checked(self._read_range, size)
        else:
            raise FormatMismatch(f"driver {f.driver}")
        self._sb = read_superblock(read, f.id.get_create_plist().get_userblock(), size)
        self._read = read


def _checked(read: Read, file_size: int) -> Read:
    """``read`` that refuses ranges beyond ``file_size`` and short reads."""

    def checked(position: int, length: int) -> bytes:
        if position < 0 or length < 0 or position + length > file_size:
            raise _Beyond
        data = read(position, length)
        if len(data) != length:
            raise _Beyond
        return data

    return checked


def _header_address(oid: Any) -> int:
    """The address of an object's header (``H5Gget_objinfo``; ``h5o.get_info`` would also
    walk a dataset's chunk index)."""
    low, high = h5py.h5g.get_objinfo(oid).objno
    return int(low) | int(high) << _LONG
