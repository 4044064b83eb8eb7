"""Opening a FITS file for scanning: astropy's view of its HDUs (headers read lazily, data
never), byte ranges of the same open file, its size, and the URL references carry."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import fsspec
from astropy.io import fits
from astropy.utils.exceptions import AstropyWarning
from fsspec.implementations.local import LocalFileSystem

from refzarr.errors import ScanError, SourceNotFoundError
from refzarr.scan.detect import describe_head
from refzarr.scan.fits.declared import declared_beyond
from refzarr.scan.paths import opened_path

__all__ = ["OpenFits", "open_fits"]

_REMOTE = {"block_size": 2**20, "cache_type": "blockcache", "cache_options": {"maxblocks": 32}}
"""fsspec file options for remote files: headers are read block by block, each block once."""


@dataclass(frozen=True, slots=True)
class OpenFits:
    """An open FITS file: astropy's HDU list, the URL references carry, its bytes and size."""

    hdul: fits.HDUList
    url: str
    raw: BinaryIO
    size: int

    def read_range(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (fewer past the end of the file)."""
        self.raw.seek(offset)
        return bytes(self.raw.read(length))

    def where(self, index: int, name: str | None = None) -> str:
        """``<url>: HDU <index> ('NAME')`` for messages."""
        label = f" ({name!r})" if name else ""
        return f"{self.url}: HDU {index}{label}"


@contextmanager
def open_fits(url: str, storage_options: Mapping[str, Any] | None) -> Iterator[OpenFits]:
    """Open ``url`` (a local path or an fsspec URL) for scanning.

    Raises
    ------
    SourceNotFoundError
        When the file does not exist.
    ScanError
        When it does not start as FITS does.
    """
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    local = isinstance(fs, LocalFileSystem)
    with ExitStack() as stack:
        try:
            raw = stack.enter_context(fs.open(path, "rb", **({} if local else _REMOTE)))
        except FileNotFoundError as exc:
            raise SourceNotFoundError(f"{url}: no such file") from exc
        size = int(fs.size(path))
        head = raw.read(80)
        if not head.startswith(b"SIMPLE  ="):
            raise ScanError(f"{url}: not a FITS file ({describe_head(head)}; expected 'SIMPLE  =')")
        raw.seek(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AstropyWarning)
            try:
                hdul = fits.open(raw, mode="readonly", memmap=False, lazy_load_hdus=True)
            except (OSError, ValueError, KeyError, IndexError) as exc:
                raise ScanError(_unreadable_primary(raw, size, url, exc)) from exc
        stack.callback(hdul.close)
        reference = opened_path(path) if local and ":" not in url else url
        yield OpenFits(hdul, reference, raw, size)


def _unreadable_primary(raw: BinaryIO, size: int, url: str, exc: Exception) -> str:
    """Why astropy could not open the file: the data its primary header declares when that
    runs past the file's end (astropy then says "Invalid argument" or "corrupt"), else its
    error."""

    def read(offset: int, length: int) -> bytes:
        raw.seek(offset)
        return bytes(raw.read(length))

    beyond = declared_beyond(read, 0, size, f"{url}: HDU 0")
    if beyond:
        return beyond
    return (
        f"{url}: HDU 0: its header cannot be read ({exc}); a FITS header is 80-byte "
        "cards ending with an END card, in 2880-byte blocks"
    )
