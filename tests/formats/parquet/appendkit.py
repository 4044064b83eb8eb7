"""Test kit for appends to Parquet sets: synthetic "files" of a few time steps (raw float32
chunks in a small local file, an inlined ``time`` coordinate, a ``y`` coordinate and a
``mask(y)`` variable without the time dimension), built in milliseconds."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup

__all__ = ["NY", "PATH_LOGGER", "leftovers", "path_taken", "synthetic_file", "values_of"]

NY = 3
"""Length of ``y``."""
PATH_LOGGER = "refzarr.formats.parquet.append"
"""The logger that says which path an append took."""
_F4 = np.dtype("<f4")


def values_of(first: int, steps: int) -> np.ndarray:
    """The data of ``x`` for time steps ``first .. first + steps``: ``(steps, NY)``."""
    return (np.arange(first, first + steps)[:, None] * 10 + np.arange(NY)).astype(_F4)


def synthetic_file(
    folder: Path,
    first: int,
    steps: int,
    *,
    chunk: int = 1,
    leading: bool = True,
    mask: int = 1,
    hours: bool = False,
    inline: bool = False,
) -> RefGroup:
    """The group of one file holding time steps ``first .. first + steps``.

    ``x`` is ``(time, y)`` (``(y, time)`` when not ``leading``) in chunks of ``chunk`` along
    ``time`` and whole along ``y``; its chunks are stored whole (edge chunks padded) in
    ``folder/file_<first>.bin``. ``mask`` is the value of every element of ``mask``.
    ``time`` (days, or hours when ``hours``, since 2000-01-01) has CF bounds ``time_bnds``.
    ``inline``: the chunks of ``x`` are held inline instead.
    """
    data = values_of(first, steps)
    if not leading:
        data = np.ascontiguousarray(data.T)
    axis = 0 if leading else 1
    chunks = (chunk, NY) if leading else (NY, chunk)
    grid = [1, 1]
    grid[axis] = -(-steps // chunk)
    path = folder / f"file_{first}.bin"
    offsets = np.zeros(grid, dtype=np.uint64)
    pieces = {}
    with open(path, "wb") as out:
        for k in range(grid[axis]):
            piece = np.zeros(chunks, dtype=_F4)
            part = data[k * chunk : (k + 1) * chunk] if leading else data[:, k * chunk :][:, :chunk]
            piece[: part.shape[0], : part.shape[1]] = part
            offsets[(k, 0) if leading else (0, k)] = out.tell()
            pieces[(k, 0) if leading else (0, k)] = piece.tobytes()
            out.write(piece.tobytes())
    size = chunk * NY * _F4.itemsize
    manifest = ChunkManifest.from_arrays(
        [path.as_uri()], np.zeros(grid, np.int32), offsets, np.full(grid, size, np.uint64)
    )
    if inline:
        zeros = np.zeros(grid, np.uint64)
        ids = np.full(grid, -2, np.int32)  # INLINED
        manifest = ChunkManifest.from_arrays([], ids, zeros, zeros, inlined=pieces)
    names = ("time", "y") if leading else ("y", "time")
    x = RefArray(
        ArrayMeta(data.shape, chunks, _F4, fill_value=np.nan, dimension_names=names), manifest
    )
    scale = 24 if hours else 1
    days = np.arange(first, first + steps, dtype="<f8")
    units = f"{'hours' if hours else 'days'} since 2000-01-01"
    time = _inlined(days * scale, ("time",), units=units, bounds="time_bnds")
    edges = np.stack([days, days + 1], axis=1) * scale
    bounds = _inlined(edges, ("time", "nv"), rows=1)  # CF: in the units of time
    return RefGroup(
        {"title": "synthetic"},
        {
            "time": time,
            "time_bnds": bounds,
            "y": _inlined(np.arange(NY, dtype="<i4"), ("y",)),
            "mask": _inlined(np.full(NY, mask, dtype="<i2"), ("y",)),
            "x": x,
        },
    )


def _inlined(
    values: np.ndarray,
    dims: tuple[str, ...],
    *,
    units: str | None = None,
    bounds: str = "",
    rows: int | None = None,
) -> RefArray:
    """``values`` inlined, in chunks of ``rows`` along the first axis (default: one chunk)."""
    attributes = {} if units is None else {"units": units, "calendar": "standard"}
    if bounds:
        attributes["bounds"] = bounds
    rows = rows or values.shape[0]
    chunks = (rows, *values.shape[1:])
    meta = ArrayMeta(
        values.shape, chunks, values.dtype, attributes=attributes, dimension_names=dims
    )
    grid = (-(-values.shape[0] // rows), *(1,) * (values.ndim - 1))
    inlined = {}
    for k in range(grid[0]):
        piece = np.zeros(chunks, values.dtype)
        part = values[k * rows : (k + 1) * rows]
        piece[: part.shape[0]] = part
        inlined[(k, *(0,) * (values.ndim - 1))] = piece.tobytes()
    ids = np.full(grid, -2, np.int32)  # INLINED
    zeros = np.zeros(grid, np.uint64)
    return RefArray(meta, ChunkManifest.from_arrays([], ids, zeros, zeros, inlined=inlined))


def path_taken(caplog: pytest.LogCaptureFixture) -> str:
    """``"fast"`` or ``"whole: <reason>"`` for the last append logged (records cleared)."""
    messages = [r.getMessage() for r in caplog.records if r.name == PATH_LOGGER]
    caplog.clear()
    assert messages, "no append was logged"
    last = messages[-1]
    if "record files written" in last:
        return "fast"
    return "whole: " + last.partition(" whole set rewritten to append along ")[2].partition(": ")[2]


_SPARE = re.compile(r"\.tmp-[0-9a-f]{12}")


def leftovers(folder: Path, *, spare: bool = False) -> list[str]:
    """Names in ``folder`` that writers leave beside a set (``.tmp-``, ``.old-``); with
    ``spare``, not counting the one directory a fast append leaves for the next to recycle
    (the set it replaced: at most one, never locked)."""
    names = sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name)
    if spare:
        kept = [n for n in names if _SPARE.search(n) and (folder / n).is_dir()]
        names = [n for n in names if n not in kept[:1]]
    return names
