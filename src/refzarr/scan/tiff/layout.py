"""Where a TIFF image series' chunks lie: its shape, chunk shape and dimension names, and its
segments' offsets and byte counts as grid-shaped columns (one tile or strip per chunk).

A page's segments are laid out by tifffile as (separate samples, depth, rows, columns) in C
order, each holding (depth, length, width, contiguous samples) values; the pages of a series
stack along its leading axes. Axes of length 1 that tifffile squeezes are dropped alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from refzarr.errors import ScanError, UnsupportedFeatureError

__all__ = ["SeriesLayout", "series_layout"]

_PAGE_AXES = ("band", "z", "y", "x", "band")
"""Dimension names of a page's five axes (separate samples, depth, rows, columns, contiguous
samples)."""

_Y, _X = 2, 3


@dataclass(frozen=True, slots=True)
class SeriesLayout:
    """An image series as one array: shape, chunks, dimensions and segment columns.

    ``offsets`` and ``counts`` are shaped like the chunk grid (uint64); ``short_last`` says
    whether the last strip of each page holds fewer rows than a chunk (``last_rows`` of
    ``chunks[y_axis]``).
    """

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dims: tuple[str, ...]
    offsets: npt.NDArray[np.uint64]
    counts: npt.NDArray[np.uint64]
    y_axis: int
    x_axis: int
    short_last: bool
    last_rows: int


def series_layout(series: Any, where: str, tiff: Any = None) -> SeriesLayout:
    """The layout of one tifffile series (or pyramid level) of the open file ``tiff``.

    Raises
    ------
    UnsupportedFeatureError
        When tifffile reshapes the series' pages in a way that is not a stack of pages
        (ImageJ hyperstacks stored past their first page, ...), or whose pages lie in other
        files (multi-file OME-TIFF).
    ScanError
        When a page lists another number of segments than its shape needs.
    """
    page = series.keyframe
    shaped = tuple(int(n) for n in page.shaped)
    segment = _segment_shape(page, shaped)
    page_grid = tuple(math.ceil(n / s) for n, s in zip(shaped, segment, strict=True))
    pages = list(series.pages)
    kept = _kept_axes(series, shaped, len(pages), where)
    lead = tuple(int(n) for n in series.shape[: len(series.shape) - len(kept)])
    shape = lead + tuple(shaped[i] for i in kept)
    chunks = (1,) * len(lead) + tuple(segment[i] for i in kept)
    grid = lead + tuple(page_grid[i] for i in kept)
    offsets, counts = _columns(pages, math.prod(page_grid), where, tiff)
    axes = str(series.axes)
    dims = _unique([_lead_name(a) for a in axes[: len(lead)]] + [_PAGE_AXES[i] for i in kept])
    rows = segment[_Y]
    short = not page.is_tiled and shaped[_Y] % rows != 0
    return SeriesLayout(
        shape=shape,
        chunks=chunks,
        dims=tuple(dims),
        offsets=offsets.reshape(grid),
        counts=counts.reshape(grid),
        y_axis=len(lead) + kept.index(_Y),
        x_axis=len(lead) + kept.index(_X),
        short_last=short,
        last_rows=shaped[_Y] % rows if short else rows,
    )


def _segment_shape(page: Any, shaped: tuple[int, ...]) -> tuple[int, ...]:
    contig = shaped[4]
    if page.is_tiled:
        return (1, int(page.tiledepth), int(page.tilelength), int(page.tilewidth), contig)
    rows = min(int(page.rowsperstrip) or shaped[_Y], shaped[_Y]) or 1
    return (1, 1, rows, shaped[_X], contig)


def _kept_axes(series: Any, shaped: tuple[int, ...], npages: int, where: str) -> list[int]:
    """The page axes tifffile keeps in the series' shape (rows and columns always, the
    others when longer than 1; rows or columns of length 1 squeezed too, if that fits)."""
    shape = tuple(int(n) for n in series.shape)
    candidates = [
        [i for i in range(5) if shaped[i] > 1 or i in (_Y, _X)],
        [i for i in range(5) if shaped[i] > 1],
    ]
    for kept in candidates:
        if _Y not in kept or _X not in kept:
            continue
        tail = tuple(shaped[i] for i in kept)
        lead = shape[: len(shape) - len(kept)]
        if shape[len(lead) :] == tail and math.prod(lead) == npages:
            return kept
    raise UnsupportedFeatureError(
        f"{where}: tifffile shapes its {npages} pages of {shaped} as {shape} "
        f"(axes {series.axes!r}), which is no stack of pages; not supported"
    )


def _columns(
    pages: list[Any], segments: int, where: str, tiff: Any
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """Offsets and byte counts of every page's segments, one row per page (0: none)."""
    if tiff is not None and any(p is not None and p.parent is not tiff for p in pages):
        raise UnsupportedFeatureError(
            f"{where}: some of its pages lie in other files (a multi-file OME-TIFF); scan "
            "each file, then combine them"
        )
    for k, page in enumerate(pages):  # before allocating: the shape may claim 2**56 segments
        if page is not None and (
            len(page.dataoffsets) != segments or len(page.databytecounts) != segments
        ):
            raise ScanError(
                f"{where}: page {k} lists {len(page.dataoffsets)} segment offsets and "
                f"{len(page.databytecounts)} byte counts; its shape needs {segments:,} "
                "(damaged tags)"
            )
    offsets = np.zeros((len(pages), segments), dtype=np.uint64)
    counts = np.zeros((len(pages), segments), dtype=np.uint64)
    for k, page in enumerate(pages):
        if page is not None:
            offsets[k] = page.dataoffsets
            counts[k] = page.databytecounts
    return offsets, counts


def _lead_name(axis: str) -> str:
    return "band" if axis == "S" else axis.lower()


def _unique(names: list[str]) -> list[str]:
    """Names made unique by a numeric suffix on repeats (``z``, ``z_1``)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        count = seen.get(name, 0)
        out.append(name if count == 0 else f"{name}_{count}")
        seen[name] = count + 1
    return out
