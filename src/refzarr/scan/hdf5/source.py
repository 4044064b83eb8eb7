"""Opening an HDF5 file for scanning: one open for format detection and h5py, few requests.

Local files are opened by h5py itself (by path; a plain path without fsspec, with a file
access property list made once); any other fsspec URL is read through one fsspec file
object with a block cache, so that HDF5's many small, scattered metadata reads
(superblock, object headers, B-tree nodes, chunk index blocks) cost one request per
`BLOCK_SIZE` block touched, each block fetched once, never the whole file up front.
`check_within_file` rejects chunk addresses a damaged chunk index gives without complaint.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import fsspec
import h5py
import numpy as np
from fsspec.implementations.local import LocalFileSystem
from h5py import h5f, h5p

from refzarr.errors import ScanError, SourceNotFoundError
from refzarr.model import WHOLE_FILE, ChunkManifest, ChunkRef
from refzarr.scan.detect import describe_head
from refzarr.scan.hdf5.signature import hdf5_signature_offset
from refzarr.scan.known import open_remote
from refzarr.scan.paths import plain_local_path, reference_url

__all__ = [
    "BLOCK_SIZE",
    "CACHE_TYPE",
    "MAX_BLOCKS",
    "OpenSource",
    "check_within_file",
    "open_source",
]

BLOCK_SIZE = 2 * 2**20
"""Bytes per request on remote files: HDF5 metadata clusters, so one block serves many reads."""

CACHE_TYPE = "blockcache"
"""fsspec cache of remote files: each block fetched at most once, whatever the read order."""

MAX_BLOCKS = 32
"""Blocks the cache keeps (``BLOCK_SIZE * MAX_BLOCKS`` bytes of memory at most per scan)."""


LOCAL_BLOCK = 2**16
"""Bytes per block of a plain local file kept by `OpenSource.read_range`: a small file's
object headers, heaps and coordinates come from one ``pread``, not forty seek + read pairs."""

LOCAL_BLOCKS = 64
"""Blocks kept per open local file (``LOCAL_BLOCK * LOCAL_BLOCKS`` bytes at most)."""


@dataclass(frozen=True, slots=True)
class OpenSource:
    """An open file: h5py's view, the URL references carry, raw byte access and its size."""

    h5: h5py.File
    url: str
    raw: BinaryIO
    size: int
    blocks: dict[int, bytes] | None = None
    """Blocks of a plain local file read so far (None: read through ``raw``)."""

    def read_range(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` of the file (headers, heaps, small chunks)."""
        if offset + length > self.size:
            raise ScanError(
                f"{self.url}: bytes {offset}..{offset + length} are beyond the file's end "
                f"({self.size} bytes; truncated file?)"
            )
        if self.blocks is not None and length <= LOCAL_BLOCK:
            data = self._from_blocks(offset, length)
        elif self.blocks is not None:
            data = os.pread(self.raw.fileno(), length, offset)
        else:
            self.raw.seek(offset)
            data = self.raw.read(length)
        if len(data) != length:
            raise ScanError(
                f"{self.url}: file ends before byte {offset + length} (truncated file?)"
            )
        return data

    def _from_blocks(self, offset: int, length: int) -> bytes:
        first, start = divmod(offset, LOCAL_BLOCK)
        if start + length <= LOCAL_BLOCK:
            return self._block(first)[start : start + length]
        return (self._block(first) + self._block(first + 1))[start : start + length]

    def _block(self, number: int) -> bytes:
        blocks = self.blocks
        assert blocks is not None  # only plain local files have blocks
        found = blocks.get(number)
        if found is None:
            if len(blocks) >= LOCAL_BLOCKS:
                blocks.clear()
            found = blocks[number] = os.pread(self.raw.fileno(), LOCAL_BLOCK, number * LOCAL_BLOCK)
        return found

    def check_within_file(
        self, manifest: ChunkManifest, where: str, *, overlaps: bool = False
    ) -> None:
        """`check_within_file` for the chunks of ``manifest`` stored in this file."""
        check_within_file(manifest, self.url, self.size, where, overlaps=overlaps)


@contextmanager
def open_source(url: str, storage_options: Mapping[str, Any] | None) -> Iterator[OpenSource]:
    """Open ``url`` for scanning, checking first that it is HDF5.

    Local files are opened by h5py itself (by path, no Python in the I/O path) and referenced
    by their absolute path (a plain path, without protocol or options, skips fsspec: the
    same path, file and bytes, fewer calls); other URLs through fsspec, referenced by the URL
    as given. The
    signature is checked on the same open file object h5py then reads.

    Raises
    ------
    SourceNotFoundError
        When the file does not exist.
    ScanError
        When the file is empty, has no HDF5 signature, or h5py cannot open it (truncated,
        damaged superblock).
    """
    path = plain_local_path(url, storage_options)
    fs: fsspec.AbstractFileSystem | None = None
    if path is None:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    local = fs is None or isinstance(fs, LocalFileSystem)
    with ExitStack() as stack:
        try:
            raw = stack.enter_context(_open_raw(fs, path, url, local))
        except FileNotFoundError as exc:
            raise SourceNotFoundError(f"{url}: no such file") from exc
        size = _size(fs, path, raw)
        _check_hdf5(raw, size, url)
        try:
            h5 = stack.enter_context(_open_local(path) if local else h5py.File(raw, "r"))
        except FileNotFoundError as exc:  # removed between the two opens
            raise SourceNotFoundError(f"{url}: no such file") from exc
        except OSError as exc:
            raise ScanError(
                f"{url}: h5py cannot open it as HDF5 ({size} bytes; truncated or damaged?): {exc}"
            ) from exc
        blocks: dict[int, bytes] | None = {} if fs is None else None  # a plain local file
        yield OpenSource(h5, reference_url(url, path, local), raw, size, blocks)


def check_within_file(
    manifest: ChunkManifest, url: str, file_size: int, where: str, *, overlaps: bool = False
) -> None:
    """Raise `ScanError` when chunks of ``manifest`` in ``url`` cannot be where it says.

    A damaged chunk index (flipped bytes, a file cut short) can give chunk addresses that
    h5py reports without complaint; referencing them would give wrong data, or read errors
    much later. Checked for the chunks stored in ``url`` (of ``file_size`` bytes): each must
    end within the file, and no two may share bytes (HDF5 allocates every chunk its own
    space). ``where`` names the file and dataset; the message adds the first bad chunk.
    ``overlaps=True`` allows chunks to share bytes (a contiguous dataset cut into chunks whose
    ranges run on past the visible region into the next rows).
    """
    if manifest.nchunks <= SMALL_MANIFEST:
        ids = [k for k, path in enumerate(manifest.paths) if path == url]
        if ids:
            _check_small(manifest, set(ids), file_size, where, overlaps=overlaps)
        return
    entries = manifest.written_entries()  # a sparse manifest holds only these
    ids = [k for k, path in enumerate(entries.paths) if path == url]
    if not ids:
        return
    path_id, lengths = entries.path_id, entries.length
    in_file = path_id == ids[0] if len(ids) == 1 else np.isin(path_id, ids)
    rows = np.flatnonzero(in_file & (lengths != WHOLE_FILE))
    chunks = entries.numbers[rows]
    offsets = entries.offset[rows]
    ends = offsets + lengths[rows]  # wraps below the offset when it overflows: beyond too
    beyond = np.flatnonzero((ends > np.uint64(file_size)) | (ends < offsets))
    if beyond.size:
        raise ScanError(
            f"{where}: {_chunk_at(manifest, chunks[beyond[0]])} ends beyond the file's end "
            f"({file_size} bytes; {beyond.size} chunks in all): the file is truncated or its "
            "chunk index is damaged"
        )
    if overlaps:
        return
    order = np.argsort(offsets, kind="stable")
    overlap = np.flatnonzero(ends[order][:-1] > offsets[order][1:])
    if overlap.size:
        first, second = chunks[order[overlap[0]]], chunks[order[overlap[0] + 1]]
        raise ScanError(
            f"{where}: {_chunk_at(manifest, first)} and {_chunk_at(manifest, second)} share "
            f"bytes ({overlap.size} overlaps in all): the chunk index is damaged"
        )


SMALL_MANIFEST = 64
"""Manifests of at most this many chunks are checked in plain Python (numpy's overhead per
call outweighs the work; the same checks and messages)."""

_U64 = 2**64 - 1


def _check_small(
    manifest: ChunkManifest, ids: set[int], file_size: int, where: str, *, overlaps: bool
) -> None:
    """`check_within_file` for a small manifest, in plain Python (uint64 sums wrap alike)."""
    whole = int(WHOLE_FILE)
    columns = zip(
        manifest.path_id.reshape(-1).tolist(),
        manifest.offset.reshape(-1).tolist(),
        manifest.length.reshape(-1).tolist(),
        strict=True,
    )
    chunks = [
        (k, offset, (offset + length) & _U64)
        for k, (pid, offset, length) in enumerate(columns)
        if pid in ids and length != whole
    ]
    beyond = [k for k, offset, end in chunks if end > file_size or end < offset]
    if beyond:
        raise ScanError(
            f"{where}: {_chunk_at(manifest, beyond[0])} ends beyond the file's end "
            f"({file_size} bytes; {len(beyond)} chunks in all): the file is truncated or its "
            "chunk index is damaged"
        )
    if overlaps:
        return
    ordered = sorted(chunks, key=lambda chunk: chunk[1])  # stable, as the numpy path
    overlap = [k for k in range(len(ordered) - 1) if ordered[k][2] > ordered[k + 1][1]]
    if overlap:
        first, second = ordered[overlap[0]][0], ordered[overlap[0] + 1][0]
        raise ScanError(
            f"{where}: {_chunk_at(manifest, first)} and {_chunk_at(manifest, second)} share "
            f"bytes ({len(overlap)} overlaps in all): the chunk index is damaged"
        )


def _chunk_at(manifest: ChunkManifest, flat: np.integer[Any] | int) -> str:
    """``chunk (i, j) at bytes a..b`` for chunk number ``flat`` (C order)."""
    coords = tuple(int(i) for i in np.unravel_index(int(flat), manifest.grid_shape))
    entry = manifest[coords]
    assert isinstance(entry, ChunkRef), entry  # only referenced chunks are checked
    return f"chunk {coords} at bytes {entry.offset}..{entry.offset + (entry.length or 0)}"


def _check_hdf5(raw: BinaryIO, size: int, url: str) -> None:
    """Raise `ScanError` unless the file has HDF5's signature (at 0 or after a user block)."""
    if size == 0:
        raise ScanError(f"{url}: the file is empty (0 bytes), not an HDF5 / netCDF4 file")
    if hdf5_signature_offset(raw, size) is None:
        raw.seek(0)
        raise ScanError(
            f"{url}: no HDF5 signature at byte 0 or after a user block "
            f"({describe_head(raw.read(16))}): not an HDF5 / netCDF4 file, or a damaged one"
        )


def _open_raw(fs: fsspec.AbstractFileSystem | None, path: str, url: str, local: bool) -> BinaryIO:
    """The file's bytes: a plain file object for a plain local path, else fsspec's."""
    if fs is None:
        return open(path, "rb")  # closed by the caller's ExitStack
    if local:
        raw: BinaryIO = fs.open(path, "rb")
        return raw
    return open_remote(fs, path, url, **_open_options(local))


_FILE_ACCESS: list[h5py.h5p.PropFAID] = []
"""The file access property list of `_open_local`, made once."""


def _open_local(path: str) -> h5py.File:
    """``h5py.File(path, "r")`` with the file access properties h5py gives it made once."""
    if not _FILE_ACCESS:
        fapl = h5p.create(h5p.FILE_ACCESS)
        fapl.set_libver_bounds(h5f.LIBVER_EARLIEST, h5f.LIBVER_LATEST)  # h5py's defaults
        fapl.set_alignment(1, 1)
        _FILE_ACCESS.append(fapl)
    return h5py.File(h5f.open(os.fsencode(path), h5f.ACC_RDONLY, fapl=_FILE_ACCESS[0]))


def _size(fs: fsspec.AbstractFileSystem | None, path: str, raw: Any) -> int:
    if fs is None:
        return os.fstat(raw.fileno()).st_size
    size = getattr(raw, "size", None)
    return int(fs.size(path) if size is None else size)


def _open_options(local: bool) -> dict[str, Any]:
    if local:
        return {}
    return {
        "block_size": BLOCK_SIZE,
        "cache_type": CACHE_TYPE,
        "cache_options": {"maxblocks": MAX_BLOCKS},
    }
