"""Datasets whose values live outside their own bytes (variable-length strings, object and
region references): decoded through h5py chunk by chunk and inlined as Zarr v2 object arrays.

A variable-length string or reference is a pointer into the file's global heap, so no byte
range holds the values: each chunk (HDF5's chunk shape; rows of at most about a million values
when HDF5 does not chunk the dataset) is read with h5py on its own and stored in the reference
set, encoded with the ``vlen-utf8`` codec (every value valid UTF-8) or ``vlen-bytes`` (else, so
that no byte is changed). Both codecs share one wire format: a little-endian uint32 item
count, then per item its uint32 length and bytes. A chunk of empty values only is left missing
(it reads as the fill value, empty).

A reference becomes readable text: an object reference the HDF5 path of its target
(``/grp/data``), a region reference that path, a space and the selection in h5dump's notation:
blocks by their inclusive corners (``/data {(1,2)-(2,3), (4,0)-(4,1)}``), points
(``/data {(0,1), (3,4)}``), ``{ALL}`` or ``{}``. A null reference is the empty string.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator
from typing import Any

import h5py
import numpy as np
from h5py import h5d, h5r, h5s, h5t

from refzarr.errors import UnsupportedFeatureError
from refzarr.model import INLINED, MISSING, ArrayMeta, ChunkManifest, RefArray
from refzarr.scan.hdf5.layout import chunk_shape

__all__ = [
    "DECODED_CHUNK_ELEMENTS",
    "REFERENCE_ATTR",
    "decoded_array",
    "decoded_chunk_shape",
    "encode_vlen",
    "needs_decoding",
]

REFERENCE_ATTR = "_hdf5_reference"
"""Attribute of an array of HDF5 references: ``"object"`` (it holds the targets' paths) or
``"region"`` (paths and selections)."""

DECODED_CHUNK_ELEMENTS = 1 << 20
"""Most values in one chunk of a dataset HDF5 does not chunk (its rows are split into chunks
along the first axis), so that decoding a big contiguous dataset holds a bounded part of it."""

_OBJECT = np.dtype("|O")

ChunkReader = Callable[[np.ndarray[Any, Any], tuple[int, ...]], list[bytes]]
"""Turns the object array h5py reads for one chunk (and its index, for errors) into bytes."""
_UINT32 = struct.Struct("<I")


def needs_decoding(ds: h5py.Dataset, tid: h5t.TypeID | None = None) -> bool:
    """Whether the dataset's values live outside its bytes (vlen data, references).

    ``tid``: its datatype, when at hand.
    """
    tid = ds.id.get_type() if tid is None else tid
    cls = tid.get_class()
    return cls in (h5t.VLEN, h5t.REFERENCE) or (cls == h5t.STRING and tid.is_variable_str())


def decoded_array(
    ds: h5py.Dataset,
    where: str,
    attributes: dict[str, Any],
    dimension_names: tuple[str, ...],
    shape: tuple[int, ...] | None = None,
) -> RefArray:
    """The dataset as an object array with every chunk decoded and inlined.

    ``shape``: the array's shape when longer than the dataset's (a netCDF variable along an
    unlimited dimension other variables made longer); records past the dataset's end and
    chunks never written read as the variable's fill value (the empty value when it has
    none), as netCDF reads them.

    Raises `UnsupportedFeatureError` for variable-length sequences (zarr-python 3 cannot read
    them) and references of an unknown kind.
    """
    tid = ds.id.get_type()
    cls = tid.get_class()
    if cls == h5t.VLEN:
        raise UnsupportedFeatureError(
            f"{where}: variable-length sequences ({tid.get_super().dtype}) cannot be referenced: "
            "their values live in the global heap and zarr-python 3 cannot read the Zarr v2 "
            "'vlen-array' codec that would hold them inlined; skip the dataset with "
            "on_unsupported='skip'"
        )
    if cls == h5t.REFERENCE:
        kind, as_text = _reference_reader(ds, where)
        chunks, utf8 = _encoded_chunks(ds, as_text)
        attributes = {**attributes, REFERENCE_ATTR: kind}
    else:
        chunks, utf8 = _encoded_chunks(ds, _strings)
    grid = tuple(
        math.ceil(n / c) for n, c in zip(shape or ds.shape, decoded_chunk_shape(ds), strict=True)
    )
    fill = _string_fill(ds) if cls == h5t.STRING else b""
    if fill:  # chunks never written, and records past the dataset's end, read as the fill
        _fill_missing(ds, chunks, grid, fill)
        utf8 = utf8 and _all_utf8([fill])
    meta = ArrayMeta(
        shape=ds.shape if shape is None else shape,
        chunks=decoded_chunk_shape(ds),
        dtype=_OBJECT,
        fill_value=None,  # reads as "" (b""): what h5py reads for a string never written
        codecs=({"id": "vlen-utf8" if utf8 else "vlen-bytes"},),
        attributes=attributes,
        dimension_names=dimension_names,
    )
    return RefArray(meta, _inlined_manifest(meta.grid_shape, chunks))


def decoded_chunk_shape(ds: h5py.Dataset) -> tuple[int, ...]:
    """HDF5's chunk shape; else rows of at most `DECODED_CHUNK_ELEMENTS` values (or one row)."""
    if ds.chunks is not None or not ds.shape:
        return chunk_shape(ds)
    row = math.prod(ds.shape[1:])
    rows = min(ds.shape[0], max(1, DECODED_CHUNK_ELEMENTS // max(row, 1)))
    return (max(rows, 1), *(max(int(n), 1) for n in ds.shape[1:]))


def encode_vlen(values: list[bytes]) -> bytes:
    """``values`` in the ``vlen-bytes`` / ``vlen-utf8`` wire format."""
    parts = [_UINT32.pack(len(values))]
    for value in values:
        parts.append(_UINT32.pack(len(value)))
        parts.append(value)
    return b"".join(parts)


# -- reading chunk by chunk ---------------------------------------------------------------------


def _chunk_selections(ds: h5py.Dataset) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """(chunk index, selection) of every chunk of the Zarr grid, edge chunks cut at the edge."""
    chunks = decoded_chunk_shape(ds)
    grid = tuple(math.ceil(s / c) for s, c in zip(ds.shape, chunks, strict=True))
    for index in np.ndindex(grid):
        yield (
            index,
            tuple(
                slice(i * c, min((i + 1) * c, s))
                for i, c, s in zip(index, chunks, ds.shape, strict=True)
            ),
        )


def _encoded_chunks(
    ds: h5py.Dataset, as_bytes: ChunkReader
) -> tuple[dict[tuple[int, ...], bytes], bool]:
    """The encoded chunks holding a value other than empty, and whether all are UTF-8.

    Only one chunk's values are held at a time; an edge chunk is padded with empty values to
    the full chunk shape (Zarr v2 stores edge chunks whole).
    """
    chunks = decoded_chunk_shape(ds)
    encoded: dict[tuple[int, ...], bytes] = {}
    utf8 = True
    allocated = _allocated_chunks(ds)
    for index, selection in _chunk_selections(ds):
        if allocated is not None and index not in allocated:
            continue  # never written: reads as the empty value (HDF5 may fail to read it)
        values = as_bytes(np.asarray(ds[selection], dtype=object), index)
        if not any(values):
            continue  # missing: reads as the empty value
        utf8 = utf8 and _all_utf8(values)
        encoded[index] = encode_vlen(_pad(values, selection, chunks))
    return encoded, utf8


def _string_fill(ds: h5py.Dataset) -> bytes:
    """The user-defined fill value of a variable-length string dataset (b"" when none)."""
    plist = ds.id.get_create_plist()
    if plist.fill_value_defined() != h5d.FILL_VALUE_USER_DEFINED:
        return b""
    fill = np.zeros((1,), dtype=ds.dtype)
    plist.get_fill_value(fill)
    value = fill[0]
    if isinstance(value, str):
        return value.encode("utf-8")
    return b"" if value is None else bytes(value)


def _fill_missing(
    ds: h5py.Dataset,
    chunks: dict[tuple[int, ...], bytes],
    grid: tuple[int, ...],
    fill: bytes,
) -> None:
    """Every chunk of ``grid`` HDF5 never wrote as the fill value; stored chunks cut by the
    dataset's end (netCDF's unlimited dimension made the array longer) padded with it."""
    shape = decoded_chunk_shape(ds)
    count = math.prod(shape)
    allocated = _allocated_chunks(ds)
    for index in np.ndindex(grid):
        start = [i * c for i, c in zip(index, shape, strict=True)]
        inside = tuple(
            slice(0, max(0, min(c, n - s))) for s, c, n in zip(start, shape, ds.shape, strict=True)
        )
        whole = all(part.stop == c for part, c in zip(inside, shape, strict=True))
        written = all(part.stop for part in inside) and (allocated is None or index in allocated)
        if index in chunks and whole:
            continue
        values = np.full(shape, fill, dtype=object)
        if index in chunks:
            stored = np.empty(count, dtype=object)
            stored[:] = _decode_vlen(chunks[index], count)
            values[inside] = stored.reshape(shape)[inside]
        elif written:
            values[inside] = b""  # stored, every value empty
        chunks[index] = encode_vlen(list(values.ravel()))


def _decode_vlen(data: bytes, count: int) -> list[bytes]:
    """The values of a chunk in ``encode_vlen``'s format."""
    out, at = [], _UINT32.size
    for _ in range(count):
        (length,) = _UINT32.unpack_from(data, at)
        at += _UINT32.size
        out.append(data[at : at + length])
        at += length
    return out


def _allocated_chunks(ds: h5py.Dataset) -> set[tuple[int, ...]] | None:
    """The chunks HDF5 stored (None: not chunked, read every chunk).

    HDF5 2.0 cannot read a never-written chunk of variable-length strings with a fill value
    from a file open read-only ("no write intent on file"): every netCDF-4 string variable
    along an unlimited dimension written in part. Such chunks read as the fill value.
    """
    if ds.chunks is None:
        return None
    from refzarr.scan.hdf5.layout import ChunkColumns

    columns = ChunkColumns.collect(ds)
    return {tuple(int(c) for c in row) for row in columns.coords}


def _pad(values: list[bytes], selection: tuple[slice, ...], chunks: tuple[int, ...]) -> list[bytes]:
    """The values of a chunk cut at the array's edge, padded to the full chunk, C order."""
    shape = tuple(s.stop - s.start for s in selection)
    if shape == chunks:
        return values
    part = np.empty(len(values), dtype=object)
    part[:] = values
    full = np.full(chunks, b"", dtype=object)
    full[tuple(slice(0, n) for n in shape)] = part.reshape(shape)
    return list(full.ravel())


def _strings(values: np.ndarray[Any, Any], index: tuple[int, ...]) -> list[bytes]:
    """Variable-length strings as h5py reads them (bytes; None for a null string)."""
    return [b"" if v is None else bytes(v) for v in values.ravel()]


def _reference_reader(ds: h5py.Dataset, where: str) -> tuple[str, ChunkReader]:
    """The kind of references (``"object"``, ``"region"``) and a reader of them as UTF-8 text."""
    kind = h5py.check_ref_dtype(ds.dtype)
    if kind is h5py.Reference:
        name, describe = "object", _target_path
    elif kind is h5py.RegionReference:
        name, describe = "region", _region_text
    else:
        raise UnsupportedFeatureError(
            f"{where}: references of {ds.id.get_type().get_size()} bytes (neither object nor "
            "region references) are not supported; skip the dataset with on_unsupported='skip'"
        )

    def texts(values: np.ndarray[Any, Any], index: tuple[int, ...]) -> list[bytes]:
        return [describe(ref, ds, f"{where}: chunk {index}") if ref else b"" for ref in values.flat]

    return name, texts


def _target_path(ref: Any, ds: h5py.Dataset, where: str) -> bytes:
    name = h5r.get_name(ref, ds.id)
    if name is None:
        raise UnsupportedFeatureError(f"{where}: a reference to an object that has no name")
    return bytes(name)


def _region_text(ref: Any, ds: h5py.Dataset, where: str) -> bytes:
    space = h5r.get_region(ref, ds.id)
    kind = space.get_select_type()
    if kind == h5s.SEL_HYPERSLABS:
        blocks = space.get_select_hyper_blocklist().tolist()
        selection = ", ".join(f"{_point(a)}-{_point(b)}" for a, b in blocks)
    elif kind == h5s.SEL_POINTS:
        selection = ", ".join(_point(p) for p in space.get_select_elem_pointlist().tolist())
    elif kind == h5s.SEL_ALL:
        selection = "ALL"
    elif kind == h5s.SEL_NONE:
        selection = ""
    else:
        raise UnsupportedFeatureError(f"{where}: a region reference of selection type {kind}")
    return _target_path(ref, ds, where) + f" {{{selection}}}".encode()


def _point(coords: list[int]) -> str:
    return "(" + ",".join(str(c) for c in coords) + ")"


def _all_utf8(values: list[bytes]) -> bool:
    try:
        for value in values:
            value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _inlined_manifest(grid: tuple[int, ...], chunks: dict[tuple[int, ...], bytes]) -> ChunkManifest:
    if not chunks:
        return ChunkManifest.missing(grid)
    ids = np.full(grid, MISSING, dtype=np.int32)
    for index in chunks:
        ids[index] = INLINED
    zeros = np.zeros(grid, dtype=np.uint64)
    return ChunkManifest.from_arrays((), ids, zeros, zeros, chunks)
