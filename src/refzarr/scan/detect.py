"""Which format a file is in: magic bytes first, then the name's suffix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, BinaryIO, Literal

import fsspec

from refzarr.errors import SourceNotFoundError, UnsupportedFeatureError

__all__ = ["HDF5_MAGIC", "SUPPORTED_FORMATS", "Format", "detect_format"]

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


def detect_format(url: str, storage_options: Mapping[str, Any] | None = None) -> Format:
    """The format of the file at ``url`` (a local path or an fsspec URL).

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
        with fs.open(path, "rb") as f:
            size = int(fs.size(path))
            if _has_hdf5_signature(f, size):
                return "hdf5"
            head = f.read(8) if f.seek(0) == 0 else b""
    except FileNotFoundError as exc:
        raise SourceNotFoundError(f"{url}: no such file") from exc
    seen = _known_other(head)
    if seen is not None:
        raise UnsupportedFeatureError(
            f"{url}: looks like {seen}, which refzarr cannot scan yet; "
            f"supported formats: {SUPPORTED_FORMATS}"
        )
    return _from_suffix(url)


def _has_hdf5_signature(f: BinaryIO, size: int) -> bool:
    """HDF5's signature at 0, 512, 1024, 2048, ... (user block sizes are powers of two)."""
    offset = 0
    for _ in range(_MAX_USERBLOCK_STEPS):
        if offset + len(HDF5_MAGIC) > size:
            return False
        f.seek(offset)
        if f.read(len(HDF5_MAGIC)) == HDF5_MAGIC:
            return True
        offset = 512 if offset == 0 else offset * 2
    return False


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
