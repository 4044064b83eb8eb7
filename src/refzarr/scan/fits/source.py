"""Opening a FITS file for scanning: astropy's view of its HDUs (headers read lazily, data
never), byte ranges of the same open file, its size, and the URL references carry."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from astropy.io import fits
from astropy.utils.exceptions import AstropyWarning

from refzarr.errors import ScanError
from refzarr.scan.detect import describe_head
from refzarr.scan.fits.declared import unreadable_header
from refzarr.scan.source import FileSource, open_file

__all__ = ["OpenFits", "open_fits"]

_REMOTE = {"block_size": 2**20, "cache_type": "blockcache", "cache_options": {"maxblocks": 32}}
"""fsspec file options for remote files: headers are read block by block, each block once."""


@dataclass(frozen=True, slots=True)
class OpenFits:
    """An open FITS file: astropy's HDU list and the file's bytes (the URL references carry,
    its size, ranged reads)."""

    hdul: fits.HDUList
    file: FileSource

    @property
    def url(self) -> str:
        """How references name the file."""
        return self.file.url

    @property
    def size(self) -> int:
        """The file's size in bytes."""
        return self.file.size

    def read_range(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (fewer past the end of the file)."""
        return self.file.read_at(offset, length)

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
    with ExitStack() as stack:
        opened = stack.enter_context(open_file(url, storage_options, _REMOTE))
        raw, size = opened.raw, opened.size
        file = FileSource(opened.reference(), size, raw)
        head = raw.read(80)
        if not head.startswith(b"SIMPLE  ="):
            raise ScanError(f"{url}: not a FITS file ({describe_head(head)}; expected 'SIMPLE  =')")
        raw.seek(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AstropyWarning)
            try:
                hdul = fits.open(raw, mode="readonly", memmap=False, lazy_load_hdus=True)
            except (OSError, ValueError, KeyError, IndexError) as exc:
                where = f"{url}: HDU 0"
                raise ScanError(unreadable_header(file.read_at, 0, size, where, exc)) from exc
        stack.callback(hdul.close)
        yield OpenFits(hdul, file)
