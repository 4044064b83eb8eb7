"""Loading small dimension coordinates at scan time: their values held in the reference set.

A dimension coordinate (a 1-D array named like its only dimension: ``time``, ``lat``) is what
every reader loads first (xarray builds its index from it) and what combining files reads
from every file. Held in the reference set, it costs neither a request per file when a
dataset of 20,000 files is opened nor a read per file when the files are combined.

Its chunks are read from the file being scanned, decoded with the array's own codecs and
kept as one uncompressed chunk of exactly the array's values (a chunk of 512 slots holding one
time value becomes 8 bytes). Anything unusual (chunks in other files, whole-file references,
codecs refzarr cannot decode, bytes that do not decode) leaves the array referenced as it was:
loading is an optimisation, never a reason to fail or to change values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from refzarr.errors import RefzarrError
from refzarr.model import INLINED, WHOLE_FILE, ArrayMeta, ChunkManifest, RefArray
from refzarr.model.attr_types import LAYOUT_ATTR
from refzarr.model.frozen import thaw_json
from refzarr.model.manifest import share_bytes

__all__ = ["DEFAULT_COORDINATE_BYTES", "check_coordinate_bytes", "load_coordinate"]

DEFAULT_COORDINATE_BYTES = 2**16
"""Dimension coordinates of at most this many bytes (decoded) are loaded by default: every
``time`` of a file and ``lat``/``lon`` up to 8,192 float64 values (a 0.05 degree grid)."""

ReadRange = Callable[[int, int], bytes]


def check_coordinate_bytes(limit: object) -> None:
    """Raise TypeError / ValueError unless ``limit`` is an int >= 0."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"inline_coordinates must be an int (bytes), got {limit!r}")
    if limit < 0:
        raise ValueError(f"inline_coordinates must be >= 0 (0: never load), got {limit}")


def load_coordinate(
    array: RefArray, name: str, url: str, read_range: ReadRange, limit: int, where: str
) -> RefArray:
    """``array`` with its values inlined when it is a dimension coordinate of at most
    ``limit`` bytes whose chunks all lie in ``url`` (read with ``read_range``), else itself.

    Parameters
    ----------
    array
        The scanned array.
    name
        Its name in its group.
    url
        The file being scanned: only chunks stored there are read.
    read_range
        ``read_range(offset, length)``: bytes of that file.
    limit
        Largest decoded size loaded, in bytes (0: none).
    where
        The file and variable, named in errors.
    """
    meta = array.meta
    if (
        meta.ndim != 1
        or meta.dimension_names != (name,)
        or meta.rectilinear is not None
        or meta.dtype.kind in "OV"
        or meta.shape[0] * meta.dtype.itemsize > limit
        or meta.shape[0] == 0
    ):
        return array
    stored = _stored_chunks(array.manifest, url, read_range)
    if stored is None:
        return array
    from refzarr.codecs.chunk import decode_whole  # numcodecs: loaded when first needed

    try:
        values = decode_whole(meta, stored, where)
    except (RefzarrError, ValueError):  # left for the reader to report, as before
        return array
    manifest = ChunkManifest.one_inlined(share_bytes(values.tobytes()))
    return RefArray(meta.as_one_raw_chunk(_with_layout(meta)), manifest)


def _with_layout(meta: ArrayMeta) -> dict[str, Any] | None:
    """The attributes plus the source's chunking and codecs (`LAYOUT_ATTR`), or None when the
    source stored the values as they are now held (one raw chunk)."""
    if not meta.codecs and meta.chunks == tuple(max(s, 1) for s in meta.shape):
        return None
    layout = {"chunks": list(meta.chunks), "codecs": [thaw_json(c) for c in meta.codecs]}
    return {**thaw_json(meta.attributes), LAYOUT_ATTR: layout}


def _stored_chunks(
    manifest: ChunkManifest, url: str, read_range: ReadRange
) -> list[bytes | None] | None:
    """Every chunk's stored bytes (None: never written), or None when one is not in ``url``."""
    out: list[bytes | None] = []
    for block in manifest.iter_blocks():
        columns = zip(
            block.path_id.tolist(), block.offset.tolist(), block.length.tolist(), strict=True
        )
        for row, (pid, offset, length) in enumerate(columns):
            if pid == INLINED:
                out.append(block.inlined[block.start + row])
            elif pid < 0:
                out.append(None)
            elif block.paths[pid] != url or length == int(WHOLE_FILE):
                return None
            else:
                out.append(read_range(offset, length))
    return out
