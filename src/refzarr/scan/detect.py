"""Which format a file is in: magic bytes first, then the name's suffix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, BinaryIO, Literal

import fsspec

from refzarr.errors import SourceNotFoundError, UnsupportedFeatureError

__all__ = [
    "HDF5_MAGIC",
    "SUPPORTED_FORMATS",
    "Format",
    "detect_format",
    "hdf5_signature_offset",
    "identify",
]

Format = Literal["hdf5"]

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
"""The HDF5 superblock signature: at offset 0, or after a user block of 512, 1024, ... bytes."""

SUPPORTED_FORMATS = "HDF5 / netCDF4 (.h5, .hdf5, .he5, .nc, .nc4)"
"""What `detect_format` recognises, for error messages."""

_SUFFIXES: dict[str, Format] = {
    ".h5": "hdf5",
    ".hdf5": "hdf5",
    ".he5": "hdf5",
    ".nc": "hdf5",
    ".nc4": "hdf5",
}

_OTHER_MAGIC = {
    b"CDF\x01": "netCDF3 (classic)",
    b"CDF\x02": "netCDF3 (64-bit offset)",
    b"CDF\x05": "netCDF3 (64-bit data)",
    b"\x0e\x03\x13\x01": "HDF4",
    b"II*\x00": "TIFF",
    b"MM\x00*": "TIFF",
    b"GRIB": "GRIB",
    b"SIMPLE  ": "FITS",
}

_MAX_USERBLOCK_STEPS = 40

_DETECT_BLOCK = 2**16
"""Bytes `detect_format` reads at a time from remote files."""


def detect_format(url: str, storage_options: Mapping[str, Any] | None = None) -> Format:
    """The format of the file at ``url`` (a local path or an fsspec URL).

    Opens the file for this question alone; a scanner that opens the file anyway asks
    `identify` on its own handle instead, which costs no extra request.

    Raises
    ------
    SourceNotFoundError
        When the file does not exist.
    UnsupportedFeatureError
        When the file is in no format refzarr scans; the message names the file, what it looks
        like and the supported formats.
    """
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    try:
        # a small first block: s3fs would otherwise fetch 50 MiB to read 8 bytes
        with fs.open(path, "rb", block_size=_DETECT_BLOCK) as f:
            size = getattr(f, "size", None)
            return identify(f, int(fs.size(path) if size is None else size), url)
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"{url}: no such file") from exc


def identify(f: BinaryIO, size: int, url: str) -> Format:
    """The format of the open file ``f`` of ``size`` bytes (``url`` names it in errors).

    Reads a few bytes at the start (and at 512, 1024, ... when HDF5 hides behind a user
    block); through a caching fsspec file these come out of the first block read.

    Raises
    ------
    UnsupportedFeatureError
        When the file is in no format refzarr scans.
    """
    if hdf5_signature_offset(f, size) is not None:
        return "hdf5"
    f.seek(0)
    seen = _known_other(f.read(8))
    if seen is not None:
        raise UnsupportedFeatureError(
            f"{url}: looks like {seen}, which refzarr cannot scan yet; "
            f"supported formats: {SUPPORTED_FORMATS}"
        )
    return _from_suffix(url)


def hdf5_signature_offset(f: BinaryIO, size: int) -> int | None:
    """Where HDF5's signature is: 0, 512, 1024, 2048, ... (user blocks are powers of two).

    None when it is at none of these offsets within the file's ``size`` bytes.
    """
    offset = 0
    for _ in range(_MAX_USERBLOCK_STEPS):
        if offset + len(HDF5_MAGIC) > size:
            return None
        f.seek(offset)
        if f.read(len(HDF5_MAGIC)) == HDF5_MAGIC:
            return offset
        offset = 512 if offset == 0 else offset * 2
    return None


def _known_other(head: bytes) -> str | None:
    for magic, name in _OTHER_MAGIC.items():
        if head.startswith(magic):
            return name
    return None


def _from_suffix(url: str) -> Format:
    name = url.rstrip("/").rpartition("/")[2].lower()
    for suffix, format_ in _SUFFIXES.items():
        if name.endswith(suffix):
            return format_
    raise UnsupportedFeatureError(
        f"{url}: neither the first bytes nor the name tell a format refzarr can scan; "
        f"supported formats: {SUPPORTED_FORMATS}"
    )
