"""Reading the values of many small arrays (coordinates, variables checked for identity) in
one batched fetch: every referenced chunk of every array is requested at once.

Combine reads only small arrays, but of thousands of files, so the shape of the work is
"one chunk each of 10,000 arrays": the byte ranges go to `refzarr.io.RangeReader` in one call
(merged per file, fetched concurrently), inlined chunks need no I/O, and arrays stored
without codecs in one chunk are decoded together by one ``numpy.frombuffer``.

Importing `refzarr.io` and `refzarr.codecs` (the chunk decoder) from combine goes beyond
DESIGN.md's table (combine: model only); both are imported here, on first use, because
checking coordinate values and identical variables means reading them (issue 5), and the io
layer is the batched reader.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from refzarr.model import WHOLE_FILE, ArrayMeta, RefArray
from refzarr.model.sparse import check_dense

if TYPE_CHECKING:
    from refzarr.io import RangeReader

__all__ = ["UrlCheck", "fetch_raw", "read_values"]

UrlCheck = Callable[["RangeReader", Sequence[str]], None]
"""A reader's check of the files it is about to read (`refzarr.io.RangeReader.url_check`)."""

Raw = list[bytes | memoryview | None]
"""The stored bytes of every chunk of one array in C order; None for a missing chunk."""


def fetch_raw(
    arrays: Sequence[RefArray],
    storage_options: Mapping[str, Any] | None = None,
    name: Callable[[int], str] | None = None,
    *,
    url_check: UrlCheck | None = None,
) -> list[Raw]:
    """The stored bytes of every chunk of every array, fetched in one batched read
    (``name(k)`` names array k in errors: ``"file.nc: time"``; ``url_check``: the reader's
    check of the files it reads, e.g. `Inputs.url_check`)."""
    out: list[Raw] = []
    keys: list[str] = []
    urls: list[str] = []
    offsets: list[int] = []
    lengths: list[int] = []
    slots: list[tuple[int, int]] = []
    for a, array in enumerate(arrays):
        manifest = array.manifest
        if manifest.nblocks == 1:  # the common case first: everything inlined
            block = manifest.block(0)
            n = block.path_id.shape[0]
            if len(block.inlined) == n:
                out.append([block.inlined[number] for number in range(n)])
                continue
        if manifest.sparse:  # one slot per chunk, written or not
            check_dense(manifest.nchunks, "comparing a sparse array's values chunk by chunk")
        raw: Raw = [None] * manifest.nchunks
        for block in manifest.iter_blocks():
            for number, stored in block.inlined.items():
                raw[number] = stored
            present = np.flatnonzero(block.path_id >= 0)
            for row in present.tolist():
                urls.append(block.paths[int(block.path_id[row])])
                offsets.append(int(block.offset[row]))
                length = block.length[row]
                lengths.append(-1 if length == WHOLE_FILE else int(length))
                slots.append((a, block.start + row))
                keys.append(f"{name(a) if name else f'array {a}'} (chunk {block.start + row})")
        out.append(raw)
    if urls:
        for (a, number), data in zip(
            slots, _read(urls, offsets, lengths, keys, storage_options, url_check), strict=True
        ):
            out[a][number] = data
    return out


def _read(
    urls: list[str],
    offsets: list[int],
    lengths: list[int],
    keys: list[str],
    storage_options: Mapping[str, Any] | None,
    url_check: UrlCheck | None,
) -> list[memoryview]:
    from refzarr.io import RangeReader

    reader = RangeReader(storage_options=storage_options, url_check=url_check)
    for k, length in enumerate(lengths):
        if length < 0:  # a whole-file reference
            lengths[k] = reader.size(urls[k]) - offsets[k]
    return reader.read(urls, offsets, lengths, keys)


def read_values(
    arrays: Sequence[RefArray],
    name: Callable[[int], str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    url_check: UrlCheck | None = None,
) -> list[np.ndarray[Any, Any]]:
    """The whole value of every array (regular or rectilinear grids), read in one batch.

    ``name(k)`` names array k in errors (``"file.nc: time"``). Missing chunks read as the
    fill value (zeros without one, as Zarr v2 reads them).
    """
    raws = fetch_raw(arrays, storage_options, name, url_check=url_check)
    out: list[np.ndarray[Any, Any] | None] = [None] * len(arrays)
    simple = [k for k, a in enumerate(arrays) if _is_simple(a.meta, raws[k])]
    for key, members in _by_layout(arrays, simple).items():
        values = _decode_together(key, [raws[k] for k in members])
        for k, value in zip(members, values, strict=True):
            out[k] = value
    for k, array in enumerate(arrays):
        if out[k] is None:
            out[k] = _decode_whole(array.meta, raws[k], name(k))
    return out  # type: ignore[return-value]  # every entry is set above


def _is_simple(meta: ArrayMeta, raw: Raw) -> bool:
    """One stored chunk, no codecs, a fixed-size dtype: decoded by one frombuffer."""
    return (
        not meta.codecs
        and meta.dtype.kind not in "OV"
        and len(raw) == 1
        and raw[0] is not None
        and meta.rectilinear is None
        and len(raw[0]) == math.prod(meta.chunks) * meta.dtype.itemsize
    )


def _by_layout(arrays: Sequence[RefArray], chosen: list[int]) -> dict[tuple[Any, ...], list[int]]:
    groups: dict[tuple[Any, ...], list[int]] = {}
    for k in chosen:
        meta = arrays[k].meta
        groups.setdefault((meta.dtype, meta.chunks, meta.shape, meta.order), []).append(k)
    return groups


def _decode_together(key: tuple[Any, ...], raws: list[Raw]) -> list[np.ndarray[Any, Any]]:
    dtype, chunks, shape, order = key
    joined = b"".join(_only(raw) for raw in raws)
    flat = np.frombuffer(joined, dtype=dtype).reshape(len(raws), -1)
    inside = tuple(slice(0, n) for n in shape)
    return [row.reshape(chunks, order=order)[inside] for row in flat]


def _only(raw: Raw) -> bytes | memoryview:
    data = raw[0]
    assert data is not None  # simple arrays have their one chunk
    return data


def _decode_whole(meta: ArrayMeta, raw: Raw, name: str) -> np.ndarray[Any, Any]:
    from refzarr.codecs.chunk import decode_whole

    return decode_whole(meta, raw, name)
