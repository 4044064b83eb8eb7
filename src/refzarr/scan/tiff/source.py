"""Opening a TIFF file for tifffile (a local path, or any fsspec URL through one file object
with a block cache) and turning an image's segment offsets into a checked chunk manifest.

tifffile reports much damage (IFD loops, tags past the end of the file) as log warnings and
goes on; those raised while a file is opened and its series listed become `ScanError`s.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import fsspec
import numpy as np
import tifffile
from fsspec.implementations.local import LocalFileSystem

from refzarr.errors import ScanError, SourceNotFoundError
from refzarr.model import INLINED, MISSING, ChunkManifest
from refzarr.scan.detect import describe_head
from refzarr.scan.known import open_remote
from refzarr.scan.paths import reference_url
from refzarr.scan.tiff.layout import SeriesLayout

__all__ = ["TiffSource", "open_tiff"]

BLOCK_SIZE = 2**20
"""Bytes per request on remote files (IFDs and tag values cluster at a COG's start)."""

_MAGIC = (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+")

_FATAL = ("circular", "invalid", "corrupted", "exceeds", "beyond", "out of range")
"""Words of tifffile warnings that mean the file is damaged."""

_RECOVERED = ("series metadata",)
"""tifffile warnings it recovers from in full: shaped or ImageJ series metadata that does not
fit the pages ("invalid shaped series metadata or corrupted file", as when a file mixes
shaped and plain images) make tifffile list the pages as generic series, which the scan
references as tifffile reads them."""


@dataclass(frozen=True, slots=True)
class TiffSource:
    """An open TIFF: tifffile's view, the URL references carry, raw bytes and their size."""

    tiff: tifffile.TiffFile
    url: str
    raw: BinaryIO
    size: int

    def read_range(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (inlined segments)."""
        self.raw.seek(offset)
        data = self.raw.read(length)
        if len(data) != length:
            raise ScanError(f"{self.url}: file ends before byte {offset + length} (truncated?)")
        return bytes(data)

    def manifest(
        self,
        layout: SeriesLayout,
        page: Any,
        dtype: np.dtype[Any],
        inline_threshold: int,
        where: str,
    ) -> ChunkManifest:
        """The chunk manifest of an image: sparse segments (offset or byte count 0) missing,
        uncompressed ones cut to the bytes they hold, every one checked to lie in the file.

        Raises
        ------
        ScanError
            When a segment ends past the file's end, or an uncompressed one holds fewer bytes
            than its pixels need.
        """
        offsets, counts = layout.offsets, layout.counts.copy()
        missing = (offsets == 0) | (counts == 0)
        if int(page.compression) == 1:
            counts = self._uncompressed(layout, page, counts, missing, where)
        ends = offsets + counts
        beyond = ~missing & ((ends > np.uint64(self.size)) | (ends < offsets))
        if beyond.any():
            index = tuple(int(i) for i in np.argwhere(beyond)[0])
            raise ScanError(
                f"{where}: segment {index} at bytes {int(offsets[index])}.."
                f"{int(ends[index])} ends beyond the file's end ({self.size} bytes; "
                f"{int(beyond.sum())} segments in all): truncated file or damaged offsets"
            )
        path_id = np.where(missing, MISSING, 0).astype(np.int32)
        offsets = np.where(missing, 0, offsets).astype(np.uint64)
        counts = np.where(missing, 0, counts).astype(np.uint64)
        inlined: dict[tuple[int, ...], bytes] = {}
        if inline_threshold:
            small = ~missing & (counts < np.uint64(inline_threshold))
            for index in map(tuple, np.argwhere(small)):
                key = tuple(int(i) for i in index)
                inlined[key] = self.read_range(int(offsets[key]), int(counts[key]))
                path_id[key], offsets[key], counts[key] = INLINED, 0, 0
        return ChunkManifest.from_arrays([self.url], path_id, offsets, counts, inlined)

    def _uncompressed(
        self,
        layout: SeriesLayout,
        page: Any,
        counts: np.ndarray[Any, Any],
        missing: np.ndarray[Any, Any],
        where: str,
    ) -> np.ndarray[Any, Any]:
        """Byte counts of uncompressed segments cut to what their pixels need."""
        bits = page.bitspersample if isinstance(page.bitspersample, int) else 0
        chunks = layout.chunks
        row_values = math.prod(chunks[layout.y_axis + 1 :])
        row_bytes = math.ceil(row_values * bits / 8)
        outer = math.prod(chunks[: layout.y_axis])
        need = np.full(counts.shape, outer * chunks[layout.y_axis] * row_bytes, dtype=np.uint64)
        if layout.short_last:
            last = [slice(None)] * need.ndim
            last[layout.y_axis] = slice(-1, None)
            need[tuple(last)] = outer * layout.last_rows * row_bytes
        short = ~missing & (counts < need)
        if short.any():
            index = tuple(int(i) for i in np.argwhere(short)[0])
            raise ScanError(
                f"{where}: uncompressed segment {index} holds {int(counts[index])} bytes, its "
                f"pixels need {int(need[index])} (truncated strip or damaged byte counts)"
            )
        cut: np.ndarray[Any, Any] = np.minimum(counts, need)
        return cut


def _remote_size(fs: Any, path: str, raw: Any) -> int:
    """The size fsspec's open file knows (asked when it was opened), else asked now."""
    known = getattr(raw, "size", None)
    return int(fs.size(path) if known is None else known)


@contextmanager
def open_tiff(url: str, storage_options: Mapping[str, Any] | None) -> Iterator[TiffSource]:
    """Open ``url`` with tifffile, checking its header first.

    Raises
    ------
    SourceNotFoundError
        When the file does not exist.
    ScanError
        When it is no TIFF, or tifffile cannot read its first IFD or reports damage.
    """
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    local = isinstance(fs, LocalFileSystem)
    with ExitStack() as stack:
        try:  # a plain file object locally: fsspec's costs tifffile ~30x on small reads
            opened = (
                open(path, "rb")  # noqa: SIM115
                if local
                else open_remote(fs, path, url, block_size=BLOCK_SIZE)
            )
            raw: BinaryIO = stack.enter_context(opened)
        except (FileNotFoundError, IsADirectoryError) as exc:
            raise SourceNotFoundError(f"{url}: no such file") from exc
        size = os.fstat(raw.fileno()).st_size if local else _remote_size(fs, path, raw)
        head = raw.read(16)
        raw.seek(0)
        if not head.startswith(_MAGIC):
            raise ScanError(
                f"{url}: not a TIFF file ({describe_head(head)}; a TIFF starts with II*, MM*, "
                "II+ or MM+)"
            )
        reference = reference_url(url, path, local)
        with _tifffile_warnings(reference) as warnings:
            try:
                tiff = stack.enter_context(tifffile.TiffFile(raw, name=os.path.basename(path)))
                # walk every IFD now, so that damage is logged inside this window (newer
                # tifffile, e.g. 2026.11, parses pages later than `series` returns)
                len(tiff.pages)
                series = tiff.series
            except Exception as exc:  # tifffile raises many types on damaged headers
                raise ScanError(f"{url}: tifffile cannot read it as TIFF: {exc}") from exc
            _raise_on_damage(reference, warnings)
        del series
        yield TiffSource(tiff, reference, raw, size)


class _Collect(logging.Handler):
    """Collects tifffile's log records of one thread."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.messages.append(record.getMessage())


@contextmanager
def _tifffile_warnings(url: str) -> Iterator[list[str]]:
    handler = _Collect()
    logger = logging.getLogger("tifffile")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


def _raise_on_damage(url: str, messages: list[str]) -> None:
    for message in messages:
        lower = message.lower()
        if any(word in lower for word in _FATAL) and not any(w in lower for w in _RECOVERED):
            raise ScanError(f"{url}: damaged TIFF structure: {message}")
