"""Tile-compressed images (``ZIMAGE`` binary tables): one chunk per tile, decoded by the
``refzarr.fits_tile`` codec; what tiles cannot express chunk by chunk (quantized floats with
per-tile ``ZSCALE``/``ZZERO``, per-tile ``ZBLANK``, tiles stored in fallback columns) is
decoded by astropy and held inline when small."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refzarr.codecs.fits import ALGORITHMS, FitsTile, tile_digest
from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.model import INLINED, ArrayMeta, ChunkManifest, RefArray
from refzarr.model.manifest import share_bytes
from refzarr.scan.fits.context import HduScan
from refzarr.scan.fits.header import dimension_order_names, header_attributes, stored_dtype
from refzarr.scan.fits.image import image_shape, scaled_array_meta

__all__ = ["compressed_array"]

_ELEMENT_BYTES = {"B": 1, "I": 2, "J": 4, "K": 8}
"""Bytes per element of a ``COMPRESSED_DATA`` column type (``1PB``, ``1PI``, ...)."""


class _NotPerTile(Exception):
    """The image cannot be referenced tile by tile (the message says why)."""


def compressed_array(scan: HduScan, index: int, hdu: Any, name: str, where: str) -> RefArray | None:
    """A tile-compressed image: its tiles as chunks, or decoded and inlined when small."""
    table = _compressed_table(hdu, where)
    theader = table.header
    stored_dtype(theader, where, "ZBITPIX")
    shape = image_shape(theader, "Z")
    if not shape or 0 in shape:
        return None
    tile = _tile_shape(theader, shape)
    rows, width = int(theader["NAXIS2"]), int(theader["NAXIS1"])
    heap_start = int(theader.get("THEAP", rows * width))
    heap_size = int(theader.get("PCOUNT", 0))
    offset = scan.data_location(index, max(rows * width, heap_start) + heap_size, where)
    grid = tuple(math.ceil(n / t) for n, t in zip(shape, tile, strict=True))
    if rows != math.prod(grid):
        raise ScanError(
            f"{where}: {rows} tiles in its table, but {shape} pixels in tiles of {tile} make "
            f"{math.prod(grid)}; the ZNAXISn / ZTILEn keywords or the table are damaged"
        )
    records = np.frombuffer(
        scan.source.read_range(offset, rows * width), dtype=_big_endian(table.columns.dtype)
    )
    try:
        return _tiled(scan, index, hdu, name, where, tile, grid, records, offset + heap_start)
    except _NotPerTile as reason:
        return _decoded(scan, index, hdu, name, where, str(reason))


def _tiled(
    scan: HduScan,
    index: int,
    hdu: Any,
    name: str,
    where: str,
    tile: tuple[int, ...],
    grid: tuple[int, ...],
    records: np.ndarray[Any, Any],
    heap: int,
) -> RefArray:
    theader = _compressed_table(hdu, where).header
    algorithm = str(theader.get("ZCMPTYPE", "")).strip()
    algorithm = "RICE_1" if algorithm == "RICE_ONE" else algorithm
    if algorithm not in ALGORITHMS:
        raise UnsupportedFeatureError(f"{where}: tile compression {algorithm!r} is not supported")
    _check_per_tile(records, theader)
    descriptors = np.asarray(records["COMPRESSED_DATA"]).astype(np.int64)
    lengths = descriptors[:, 0] * _element_bytes(_compressed_table(hdu, where).columns, where)
    starts = descriptors[:, 1]
    heap_size = int(theader.get("PCOUNT", 0))
    outside = np.flatnonzero((starts < 0) | (starts + lengths > heap_size))
    if outside.size:
        k = int(outside[0])
        raise ScanError(
            f"{where}: tile {k} is {int(lengths[k])} bytes at heap offset {int(starts[k])}, "
            f"outside the heap ({heap_size} bytes, PCOUNT); the tile table is damaged"
        )
    if (lengths == 0).any():
        raise _NotPerTile("some tiles are stored in no bytes")
    shape = image_shape(theader, "Z")
    dtype = stored_dtype(theader, where, "ZBITPIX").newbyteorder("<")
    edges = _edge_keys(scan, shape, tile, grid, lengths, heap + starts)
    settings: dict[str, Any] = {**edges, **_settings(theader)}
    codec = FitsTile(algorithm, dtype.str, tile, **settings)
    manifest = _manifest(scan, heap + starts, lengths, grid)
    meta = scaled_array_meta(
        scan, hdu.header, dtype, shape, tile, name, index, codecs=(codec.get_config(),)
    )
    return RefArray(meta, manifest)


def _compressed_table(hdu: Any, where: str) -> Any:
    """astropy's binary table behind a compressed image (``CompImageHDU._bintable``: astropy
    has no public name for it; the scanner reads its header and tile descriptors)."""
    table = getattr(hdu, "_bintable", None)
    if table is None:
        raise UnsupportedFeatureError(
            f"{where}: this astropy version does not expose the table of a compressed image "
            "(CompImageHDU._bintable); install astropy >= 6.1"
        )
    return table


def _check_per_tile(records: np.ndarray[Any, Any], theader: Any) -> None:
    """Raise `_NotPerTile` when a tile's decoding needs values outside its bytes."""
    names = records.dtype.names or ()
    if "ZSCALE" in names or "ZZERO" in names:
        raise _NotPerTile("quantized floating-point tiles (per-tile ZSCALE/ZZERO)")
    if "ZBLANK" in names:
        raise _NotPerTile("per-tile ZBLANK values")
    if int(theader["ZBITPIX"]) < 0 and "ZBLANK" in theader:
        raise _NotPerTile("ZBLANK in a floating-point image")
    if "COMPRESSED_DATA" not in names:
        raise _NotPerTile("no COMPRESSED_DATA column")


def _tile_shape(theader: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``ZTILEn`` in numpy order (the chunk shape, even where longer than the image); a
    missing one is 1, a missing ``ZTILE1`` the row length (row tiles)."""
    ndim = len(shape)
    tile = []
    for k in range(ndim, 0, -1):
        default = shape[ndim - 1] if k == 1 else 1
        tile.append(int(theader.get(f"ZTILE{k}", default)))
    return tuple(tile)


def _settings(theader: Any) -> dict[str, int]:
    """RICE_1 and HCOMPRESS_1 parameters (``ZNAMEn``/``ZVALn``), astropy's defaults."""
    values = {}
    for k in range(1, 100):
        key = theader.get(f"ZNAME{k}")
        if key is None:
            break
        values[str(key).strip().upper()] = theader.get(f"ZVAL{k}")
    return {
        "blocksize": int(values.get("BLOCKSIZE", 32)),
        "bytepix": int(values.get("BYTEPIX", 4)),
        "scale": int(values.get("SCALE", 0)),
        "smooth": int(values.get("SMOOTH", 0)),
    }


def _element_bytes(columns: Any, where: str) -> int:
    """Bytes per element of the ``COMPRESSED_DATA`` column (``1PB`` -> 1)."""
    form = str(columns["COMPRESSED_DATA"].format).lstrip("0123456789")
    try:
        return _ELEMENT_BYTES[form[1]]
    except (IndexError, KeyError):
        raise UnsupportedFeatureError(
            f"{where}: COMPRESSED_DATA column of format {form!r}; expected 1PB, 1PI, 1PJ, 1QB..."
        ) from None


def _edge_keys(
    scan: HduScan,
    shape: tuple[int, ...],
    tile: tuple[int, ...],
    grid: tuple[int, ...],
    lengths: Any,
    offsets: Any,
) -> dict[str, Any]:
    """How the tile codec tells tiles cut by the image's edge: by stored length where only
    tiles of one shape have that length (``edges``), else by a digest of the bytes of every
    tile of that length (``digests``: only those tiles are read); `_NotPerTile` when even the
    bytes of two tiles of different shapes are equal."""
    sizes = [np.minimum(t, n - np.arange(g) * t) for n, t, g in zip(shape, tile, grid, strict=True)]
    mesh = np.meshgrid(*sizes, indexing="ij")
    shapes = np.stack([m.ravel() for m in mesh], axis=1)
    edge = (shapes != np.asarray(tile)).any(axis=1)
    if not edge.any():
        return {}
    ambiguous = _ambiguous_lengths(lengths, shapes, tile)
    plain = edge & ~np.isin(lengths, ambiguous)
    keys: dict[str, Any] = {"edges": _unique_map(lengths[plain].tolist(), shapes[plain].tolist())}

    if not ambiguous.size:
        return keys
    hashed = np.flatnonzero(np.isin(lengths, ambiguous))
    digests = [
        tile_digest(scan.source.read_range(int(offsets[k]), int(lengths[k]))) for k in hashed
    ]
    by_digest = _unique_map(digests, shapes[hashed].tolist())
    if by_digest is None:
        raise _NotPerTile("tiles of different shapes stored in identical bytes")
    keep = edge[hashed]
    keys["digests"] = {d: by_digest[d] for d, e in zip(digests, keep.tolist(), strict=True) if e}
    keys["digest_lengths"] = sorted(int(n) for n in ambiguous)
    return keys


def _ambiguous_lengths(lengths: Any, shapes: Any, tile: tuple[int, ...]) -> Any:
    """The stored lengths that tiles of two shapes or more have (sorted; one of those shapes
    at least is an edge tile's)."""
    cut = shapes != np.asarray(tile)  # along each axis a tile is whole or cut by the edge
    if cut.shape[1] > 32:
        codes = np.unique(cut, axis=0, return_inverse=True)[1].reshape(-1)
    else:
        codes = cut.astype(np.int64) @ (np.int64(1) << np.arange(cut.shape[1], dtype=np.int64))
    order = np.lexsort((codes, lengths))
    ordered, kinds = lengths[order], codes[order]
    change = (ordered[1:] == ordered[:-1]) & (kinds[1:] != kinds[:-1])
    return np.unique(ordered[1:][change])


def _unique_map(keys: list[Any], shapes: list[list[int]]) -> dict[str, list[int]] | None:
    """``str(key) -> shape``, or None when one key has two shapes."""
    out: dict[str, list[int]] = {}
    for key, cut in zip(keys, shapes, strict=True):
        if out.setdefault(str(key), cut) != cut:
            return None
    return out


def _manifest(scan: HduScan, offsets: Any, lengths: Any, grid: tuple[int, ...]) -> ChunkManifest:
    """Tiles as chunks; those shorter than ``inline_threshold`` read and inlined."""
    ids = np.zeros(len(lengths), dtype=np.int32)
    offsets = offsets.astype(np.uint64)
    lengths = lengths.astype(np.uint64)
    inlined = {}
    for k in np.flatnonzero(lengths < scan.inline_threshold).tolist():
        data = scan.source.read_range(int(offsets[k]), int(lengths[k]))
        inlined[tuple(int(i) for i in np.unravel_index(k, grid))] = data
        ids[k], offsets[k], lengths[k] = INLINED, 0, 0
    return ChunkManifest.from_arrays(
        [scan.source.url],
        ids.reshape(grid),
        offsets.reshape(grid),
        lengths.reshape(grid),
        inlined,
    )


def _decoded(scan: HduScan, index: int, hdu: Any, name: str, where: str, reason: str) -> RefArray:
    """The image decoded by astropy (its default, scaled values), held inline when small."""
    theader = _compressed_table(hdu, where).header
    shape = image_shape(theader, "Z")
    dtype = stored_dtype(theader, where, "ZBITPIX")
    nbytes = math.prod(shape) * max(dtype.itemsize, 4)
    if nbytes > scan.inline_decoded:
        raise UnsupportedFeatureError(
            f"{where}: {reason} cannot be referenced tile by tile, and the decoded image "
            f"(about {nbytes} bytes) is larger than inline_decoded={scan.inline_decoded}; "
            "raise inline_decoded to hold it in the reference set"
        )
    values = np.asarray(hdu.data)
    values = values.astype(values.dtype.newbyteorder("<"))
    attrs = header_attributes(hdu.header)
    attrs["fits_hdu"] = index
    attrs["fits_decoded"] = reason
    meta = ArrayMeta(
        shape=values.shape,
        chunks=values.shape,
        dtype=values.dtype,
        attributes=attrs,
        dimension_names=scan.dims.names(dimension_order_names(values.ndim), values.shape, name),
    )
    manifest = ChunkManifest.one_inlined(share_bytes(values.tobytes()), values.ndim)
    return RefArray(meta, manifest)


def _big_endian(dtype: Any) -> np.dtype[Any]:
    out: np.dtype[Any] = np.dtype(dtype).newbyteorder(">")
    return out
