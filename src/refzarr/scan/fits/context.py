"""What every HDU builder of one scan shares: the open file, the options, the dimensions."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from astropy.io import fits

from refzarr.errors import ScanError
from refzarr.model import ChunkManifest
from refzarr.scan.fits.contiguous import contiguous_chunks
from refzarr.scan.fits.names import Dimensions
from refzarr.scan.fits.source import OpenFits

__all__ = ["HduScan"]


@dataclass
class HduScan:
    """One scan of one file: its source, the scanner's options and the dimension names."""

    source: OpenFits
    chunk_bytes: int
    inline_threshold: int
    inline_decoded: int
    dims: Dimensions = field(default_factory=Dimensions)

    def data_location(self, index: int, nbytes: int, where: str) -> int:
        """Offset of an HDU's data, checked to lie within the file (``nbytes`` long)."""
        info: dict[str, Any] = self.source.hdul[index].fileinfo()
        offset = int(info["datLoc"])
        if offset + nbytes > self.source.size:
            raise ScanError(
                f"{where}: its header describes {nbytes} bytes of data at offset {offset}, past "
                f"the end of the file ({self.source.size} bytes): the file is truncated or the "
                "NAXISn / PCOUNT / GCOUNT keywords are wrong"
            )
        return offset

    def contiguous(
        self,
        offset: int,
        shape: tuple[int, ...],
        itemsize: int,
        *,
        within_padding: bool = False,
        pad: bytes = b"\0",
    ) -> tuple[tuple[int, ...], ChunkManifest]:
        """Chunks of contiguous data at ``offset`` (see `contiguous_chunks`); with
        ``within_padding`` a last chunk reaches only into the data's own padding (to 2880
        bytes), else anywhere in the file."""
        size = self.source.size
        if within_padding:
            end = offset + math.prod(shape) * itemsize
            size = min(size, -(-end // 2880) * 2880)
        return contiguous_chunks(
            self.source.url,
            offset,
            shape,
            itemsize,
            target=self.chunk_bytes,
            size=size,
            pad=pad,
            read_range=self.source.read_range,
            inline_threshold=self.inline_threshold,
        )

    @staticmethod
    def header(hdu: fits.hdu.base._BaseHDU) -> fits.Header:
        """The HDU's header as astropy shows it."""
        header: fits.Header = hdu.header
        return header
