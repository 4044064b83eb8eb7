"""Virtual datasets (VDS) as references to the chunks of their source datasets.

A VDS maps boxes of source datasets (in this file or others) into its own extent. It can be
referenced when one chunk grid fits every mapping: each source box starts on a chunk of its
source, lands on a chunk of the common grid, and is a whole number of chunks long (or ends at
the edge of the VDS); all sources share dtype, chunk shape, codecs and the VDS's fill value.
A source of lower rank is placed with leading axes of length 1 (stacked images). Anything
else raises `UnsupportedFeatureError` saying which mapping does not fit and why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5s

from refzarr.errors import UnsupportedFeatureError
from refzarr.model import MISSING, ChunkManifest

__all__ = ["SourceFile", "SourceLayout", "virtual_layout"]


@dataclass(frozen=True, slots=True)
class SourceFile:
    """An open file holding source datasets: h5py's view, its URL, and byte access."""

    h5: h5py.File
    url: str
    read_range: Callable[[int, int], bytes]
    fs: Any


SourceLayout = tuple[tuple[int, ...], ChunkManifest, tuple[dict[str, Any], ...], np.dtype[Any]]
"""A source dataset's chunk shape, manifest, codecs and dtype."""

OpenFile = Callable[[str], AbstractContextManager[SourceFile]]
LayoutOf = Callable[[h5py.Dataset, SourceFile, str], SourceLayout]


@dataclass(frozen=True, slots=True)
class _Placed:
    """One mapping resolved: where its chunks go and the entries of those chunks."""

    vds_start: tuple[int, ...]  # in chunks of the common grid
    chunks: tuple[int, ...]  # the common chunk shape
    codecs: tuple[dict[str, Any], ...]
    dtype: np.dtype[Any]
    paths: tuple[str, ...]
    path_id: np.ndarray[Any, np.dtype[np.int32]]
    offset: np.ndarray[Any, np.dtype[np.uint64]]
    length: np.ndarray[Any, np.dtype[np.uint64]]
    inlined: dict[tuple[int, ...], bytes]  # keyed by index within the placed block


def virtual_layout(
    ds: h5py.Dataset, dtype: np.dtype[Any], where: str, open_file: OpenFile, layout_of: LayoutOf
) -> tuple[tuple[int, ...], ChunkManifest, tuple[dict[str, Any], ...]]:
    """Chunk shape, manifest and codecs of a VDS whose mappings fit one chunk grid.

    ``open_file(name)`` opens a source file by the name the VDS gives (``"."``: this file);
    ``layout_of(dataset, file, where)`` is the layout of a source dataset.
    """
    shape = tuple(int(s) for s in ds.shape)
    placed = [
        _place(ds, mapping, number, shape, where, open_file, layout_of)
        for number, mapping in enumerate(ds.virtual_sources())
    ]
    if not placed:
        chunks = tuple(max(s, 1) for s in shape)
        return chunks, ChunkManifest.missing(_grid(shape, chunks)), ()
    first = placed[0]
    for number, item in enumerate(placed):
        _check_same(first, item, dtype, number, where)
    return first.chunks, _combine(shape, placed, where), first.codecs


def _place(
    ds: h5py.Dataset,
    mapping: Any,
    number: int,
    shape: tuple[int, ...],
    where: str,
    open_file: OpenFile,
    layout_of: LayoutOf,
) -> _Placed:
    at = f"{where}: virtual mapping {number} ({mapping.dset_name!r} in {mapping.file_name!r})"
    vds_start, vds_box = _box(mapping.vspace, shape, at, "destination")
    with open_file(mapping.file_name) as source:
        src = source.h5.get(mapping.dset_name)
        if not isinstance(src, h5py.Dataset):
            raise UnsupportedFeatureError(f"{at}: the source dataset does not exist")
        if src.id.fileno != source.h5.id.fileno:
            raise UnsupportedFeatureError(f"{at}: the source path leads through an external link")
        if src.id.get_create_plist().get_layout() == h5d.VIRTUAL:
            raise UnsupportedFeatureError(f"{at}: the source is itself a virtual dataset")
        if np.asarray(src.fillvalue).tobytes() != np.asarray(ds.fillvalue).tobytes():
            raise UnsupportedFeatureError(
                f"{at}: its fill value {src.fillvalue!r} differs from the VDS's {ds.fillvalue!r}"
            )
        src_start, src_box = _box(mapping.src_space, src.shape, at, "source")
        _check_inside(src_start, src_box, src.shape, at)
        chunks, manifest, codecs, src_dtype = layout_of(src, source, at)
        return _slice(
            manifest,
            chunks,
            codecs,
            src_dtype,
            (vds_start, vds_box),
            (src_start, src_box),
            shape,
            at,
        )


def _box(
    space: Any, shape: Sequence[int], at: str, what: str
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Start and shape of a selection that is one box; else `UnsupportedFeatureError`.

    A selection of everything is the whole ``shape`` (HDF5 may not store its extent).
    """
    if space.get_select_type() == h5s.SEL_ALL:
        return (0,) * len(shape), tuple(int(n) for n in shape)
    try:
        low, high = space.get_select_bounds()
        count = space.get_select_npoints()
    except Exception as exc:  # unlimited selections, point selections h5py cannot bound
        raise UnsupportedFeatureError(f"{at}: its {what} selection has no bounds ({exc})") from exc
    box = tuple(int(h) - int(lo) + 1 for lo, h in zip(low, high, strict=True))
    if math.prod(box) != count:
        raise UnsupportedFeatureError(
            f"{at}: its {what} selection is not one box (strided or scattered)"
        )
    return tuple(int(lo) for lo in low), box


def _check_inside(start: Sequence[int], box: Sequence[int], shape: Any, at: str) -> None:
    if any(s + b > n for s, b, n in zip(start, box, shape, strict=True)):
        raise UnsupportedFeatureError(
            f"{at}: the source selection reaches past the source's extent {tuple(shape)} "
            "(HDF5 reads fill values there)"
        )


def _slice(
    manifest: ChunkManifest,
    chunks: tuple[int, ...],
    codecs: tuple[dict[str, Any], ...],
    dtype: np.dtype[Any],
    vds: tuple[tuple[int, ...], tuple[int, ...]],
    src: tuple[tuple[int, ...], tuple[int, ...]],
    shape: tuple[int, ...],
    at: str,
) -> _Placed:
    (vds_start, vds_box), (src_start, src_box) = vds, src
    extra = len(vds_box) - len(src_box)
    if extra < 0 or vds_box != (1,) * extra + src_box:
        raise UnsupportedFeatureError(
            f"{at}: the source box {src_box} does not map one to one onto the VDS box {vds_box}"
        )
    common = (1,) * extra + chunks
    for axis, (start, size, c, n) in enumerate(zip(vds_start, vds_box, common, shape, strict=True)):
        if start % c or (size % c and start + size != n):
            raise UnsupportedFeatureError(
                f"{at}: on axis {axis} it covers {start}..{start + size} of the VDS, which does "
                f"not fall on whole chunks of {c} (the source's chunk shape {chunks})"
            )
    for axis, (start, c) in enumerate(zip(src_start, chunks, strict=True)):
        if start % c:
            raise UnsupportedFeatureError(
                f"{at}: it starts at {start} on source axis {axis}, not on a chunk boundary of {c}"
            )
    region = tuple(
        slice(s // c, s // c + -(-b // c))
        for s, b, c in zip(src_start, src_box, chunks, strict=True)
    )
    lead = (1,) * extra
    inlined = _inlined_in(manifest.inlined, region, extra)
    return _Placed(
        tuple(s // c for s, c in zip(vds_start, common, strict=True)),
        common,
        codecs,
        dtype,
        manifest.paths,
        manifest.path_id[region].reshape(lead + manifest.path_id[region].shape),
        manifest.offset[region].reshape(lead + manifest.offset[region].shape),
        manifest.length[region].reshape(lead + manifest.length[region].shape),
        inlined,
    )


def _inlined_in(
    inlined: dict[tuple[int, ...], bytes], region: tuple[slice, ...], extra: int
) -> dict[tuple[int, ...], bytes]:
    found = {}
    for index, data in inlined.items():
        if all(r.start <= i < r.stop for i, r in zip(index, region, strict=True)):
            local = tuple(i - r.start for i, r in zip(index, region, strict=True))
            found[(0,) * extra + local] = data
    return found


def _check_same(
    first: _Placed, other: _Placed, dtype: np.dtype[Any], number: int, where: str
) -> None:
    at = f"{where}: virtual mapping {number}"
    if other.dtype != dtype:
        raise UnsupportedFeatureError(f"{at}: source dtype {other.dtype} is not the VDS's {dtype}")
    if other.chunks != first.chunks:
        raise UnsupportedFeatureError(
            f"{at}: source chunk shape {other.chunks} differs from mapping 0's {first.chunks}"
        )
    if other.codecs != first.codecs:
        raise UnsupportedFeatureError(
            f"{at}: source codecs {list(other.codecs)} differ from mapping 0's {list(first.codecs)}"
        )


def _grid(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))


def _combine(shape: tuple[int, ...], placed: Sequence[_Placed], where: str) -> ChunkManifest:
    grid = _grid(shape, placed[0].chunks)
    table: dict[str, int] = {}
    ids = np.full(grid, MISSING, dtype=np.int32)
    offsets = np.zeros(grid, dtype=np.uint64)
    lengths = np.zeros(grid, dtype=np.uint64)
    covered = np.zeros(grid, dtype=bool)
    inlined: dict[tuple[int, ...], bytes] = {}
    for number, item in enumerate(placed):
        target = tuple(
            slice(s, s + n) for s, n in zip(item.vds_start, item.path_id.shape, strict=True)
        )
        if covered[target].any():
            raise UnsupportedFeatureError(f"{where}: virtual mapping {number} overlaps another")
        covered[target] = True
        remap = np.array([table.setdefault(p, len(table)) for p in item.paths] + [0], np.int32)
        mapped = remap[np.maximum(item.path_id, 0)]
        ids[target] = np.where(item.path_id >= 0, mapped, item.path_id)
        offsets[target], lengths[target] = item.offset, item.length
        for local, data in item.inlined.items():
            inlined[tuple(a + b for a, b in zip(item.vds_start, local, strict=True))] = data
    return ChunkManifest.from_arrays(tuple(table), ids, offsets, lengths, inlined)
