"""netCDF variables written without fill values (``NC_NOFILL``: HDF5 fill time "never") that
their unlimited dimension makes longer than their HDF5 extent, read as netCDF reads them.

netCDF-C reads every element past a variable's HDF5 extent as its fill value (``_FillValue``,
else netCDF's default for the type), also inside a stored chunk that the extent ends in, whose
bytes there HDF5 never initialised. A chunk never written inside the extent reads as zeros in
h5py (HDF5 leaves the reader's buffer as it was; netCDF-C's holds whatever memory held, so
zeros are the only defined answer). One Zarr fill value cannot say both: the netCDF fill
becomes the array's fill value (the chunks past the extent stay missing), and the chunks the
extent ends in or that were never written inside it are built (values from h5py, zeros, the
fill past the extent), encoded with the array's codecs and inlined.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import h5py
import numcodecs
import numpy as np
from h5py import h5d

from refzarr.codecs.hdf5.filters import szip_pixel_check
from refzarr.errors import UnsupportedFeatureError
from refzarr.model import ChunkManifest
from refzarr.model.netcdf_fills import netcdf_default_fill
from refzarr.scan.hdf5.attrs import AttributeTable
from refzarr.scan.hdf5.types import creation_plist, fill_value
from refzarr.scan.hdf5.unlimited import chunk_indices

__all__ = ["MAX_BUILT_BYTES", "lengthen_unfilled", "written_without_fill"]

MAX_BUILT_BYTES = 64 << 20
"""At most this many bytes of built chunks are inlined per array (else a named refusal)."""


def written_without_fill(ds: h5py.Dataset) -> bool:
    """Whether HDF5 writes no fill value into the dataset's chunks (netCDF's ``NC_NOFILL``)."""
    return bool(creation_plist(ds).get_fill_time() == h5d.FILL_TIME_NEVER)


def lengthen_unfilled(
    ds: h5py.Dataset,
    dtype: np.dtype[Any],
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    manifest: ChunkManifest,
    codecs: Sequence[Mapping[str, Any]],
    attrs: AttributeTable | None,
    where: str,
) -> tuple[ChunkManifest, Any]:
    """The manifest and Zarr fill value of a dataset written without fill values whose netCDF
    ``shape`` is longer than its HDF5 extent (see the module's docstring).

    Raises
    ------
    UnsupportedFeatureError
        When netCDF gives the type no fill value, a built chunk cannot be encoded with the
        array's codecs (exactly, decoding back), or the built chunks exceed `MAX_BUILT_BYTES`.
    """
    declared = fill_value(ds, dtype, all_chunks_written=True, attrs=attrs)  # _FillValue or None
    fill = declared if declared is not None else netcdf_default_fill(dtype)
    if fill is None:
        raise UnsupportedFeatureError(
            f"{where}: written without fill values ({dtype}, a type netCDF gives no default "
            f"fill) and shorter ({tuple(ds.shape)}) than its unlimited dimension ({shape})"
        )
    old = tuple(int(s) for s in ds.shape)
    grid = tuple(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))
    written = manifest.written_entries()  # the written chunks only, numbered in the old grid
    index = chunk_indices(written.numbers, manifest.grid_shape)
    rebuilt = _straddling(index, old, shape, chunks)
    zero_fill = not np.asarray(fill, dtype=dtype).tobytes().strip(b"\0")
    build = _Builder(ds, dtype, chunks, old, fill, codecs, where)
    cut = {tuple(int(i) for i in row) for row in index[rebuilt]}
    inlined = {k: v for k, v in manifest.inlined.items() if k not in cut}
    for key in sorted(cut):
        inlined[key] = build(key, stored=True)
    if not zero_fill:  # else a missing chunk reads as zeros, inside the extent and past it
        for row in _missing_inside(written.numbers, manifest.grid_shape, build.refuse):
            key = tuple(int(i) for i in row)
            inlined[key] = build(key, stored=False)
    keep = (written.path_id >= 0) & ~rebuilt
    built = ChunkManifest.from_entries(
        grid,
        index[keep],
        written.paths,
        written.path_id[keep],
        written.offset[keep],
        written.length[keep],
        inlined,
        where=where,
    )
    if built.count_written() == built.nchunks:  # the fill value is never read
        return built, declared
    return built, None if zero_fill else fill


def _straddling(
    index: np.ndarray[Any, Any],
    old: tuple[int, ...],
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
) -> np.ndarray[Any, Any]:
    """Which chunks (rows of ``index``) reach past the extent ``old`` along a lengthened axis:
    their stored bytes there are not what netCDF reads."""
    cut = np.zeros(index.shape[0], dtype=bool)
    for axis, (cur, new, size) in enumerate(zip(old, shape, chunks, strict=True)):
        if new > cur:
            cut |= (index[:, axis] + 1) * size > cur
    return cut


def _missing_inside(
    numbers: np.ndarray[Any, Any], grid: tuple[int, ...], refuse: Callable[[], None]
) -> np.ndarray[Any, Any]:
    """The chunks of the HDF5 extent's ``grid`` never written (rows of indices); ``refuse``
    is called when they are too many to build (each inlined takes at least a byte)."""
    total = math.prod(grid)
    if total - numbers.size > MAX_BUILT_BYTES:
        refuse()
    absent = np.setdiff1d(np.arange(total, dtype=np.int64), numbers, assume_unique=True)
    return chunk_indices(absent, grid)


class _Builder:
    """Builds one chunk (the dataset's values or zeros inside the extent, the fill past it),
    encodes it with the array's codecs and checks that it decodes back exactly."""

    def __init__(
        self,
        ds: h5py.Dataset,
        dtype: np.dtype[Any],
        chunks: tuple[int, ...],
        old: tuple[int, ...],
        fill: Any,
        codecs: Sequence[Mapping[str, Any]],
        where: str,
    ) -> None:
        self.ds, self.dtype, self.chunks, self.old, self.fill = ds, dtype, chunks, old, fill
        self.where = where
        self.encode = _encoder(codecs, where)
        self.cache: dict[tuple[int, ...], bytes] = {}  # built missing chunks, by inside shape
        self.total = 0

    def __call__(self, index: tuple[int, ...], *, stored: bool) -> bytes:
        box = tuple(
            slice(i * c, min((i + 1) * c, cur))
            for i, c, cur in zip(index, self.chunks, self.old, strict=True)
        )
        inside = tuple(max(0, s.stop - s.start) for s in box)
        if not stored and inside in self.cache:
            data = self.cache[inside]
        else:
            chunk = np.full(self.chunks, self.fill, dtype=self.dtype)
            local = tuple(slice(0, n) for n in inside)
            if stored:
                chunk[local] = np.asarray(self.ds[box]).astype(self.dtype)
            else:
                chunk[local] = 0
            data = self.encode(chunk.tobytes(), f"{self.where}: chunk {index}")
            if not stored:
                self.cache[inside] = data
        self.total += len(data)
        if self.total > MAX_BUILT_BYTES:
            self.refuse()
        return data

    def refuse(self) -> None:
        raise UnsupportedFeatureError(
            f"{self.where}: written without fill values and shorter ({self.old}) than its "
            "unlimited dimension: the chunks its extent ends in and those never written "
            "inside it would be inlined (to read as netCDF and h5py read them), more than "
            f"{MAX_BUILT_BYTES >> 20} MiB"
        )


def _encoder(codecs: Sequence[Mapping[str, Any]], where: str) -> Callable[[bytes, str], bytes]:
    """Encoding with the whole pipeline, checked by decoding back."""
    try:
        made = [numcodecs.get_codec(dict(c)) for c in codecs]
    except (ValueError, TypeError, KeyError) as exc:
        raise UnsupportedFeatureError(
            f"{where}: written without fill values and shorter than its unlimited dimension; "
            f"its chunks must be re-encoded, but numcodecs cannot create a codec: {exc}"
        ) from exc

    szip = szip_pixel_check([dict(c) for c in codecs])

    def encode(raw: bytes, at: str) -> bytes:
        buf: Any = raw
        try:
            for codec in made:
                buf = codec.encode(buf)
            data = _as_bytes(buf)
            back: Any = data
            for codec in reversed(made):
                back = codec.decode(back)
        except Exception as exc:  # numcodecs raises anything from zlib.error to RuntimeError
            raise UnsupportedFeatureError(
                f"{at}: written without fill values and shorter than its unlimited dimension; "
                f"re-encoding it with its codecs failed: {exc}"
            ) from exc
        if szip is not None and int.from_bytes(data[:4], "little") % szip[0]:
            raise UnsupportedFeatureError(
                f"{at}: written without fill values and shorter than its unlimited dimension; "
                f"re-encoded, szip after {szip[1]!r} would end in a partial pixel"
            )
        if _as_bytes(back) != raw:
            raise UnsupportedFeatureError(
                f"{at}: written without fill values and shorter than its unlimited dimension; "
                "re-encoded with its codecs it does not decode back to the same bytes"
            )
        return data

    return encode


def _as_bytes(buf: Any) -> bytes:
    if isinstance(buf, bytes):
        return buf
    return np.ascontiguousarray(buf).tobytes()
