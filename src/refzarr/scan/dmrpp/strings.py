"""String variables of a DMR++ sidecar: fixed-length strings (referenced like numbers) and
variable-length strings, whose values the sidecar holds (``dmrpp:vlsa``) and which become
inlined ``vlen-utf8`` chunks exactly as the HDF5 scanner decodes them from the file.

The sidecar does not say how HDF5 chunked a variable-length string dataset, so its values are
cut as the HDF5 scanner cuts a contiguous one (rows of at most `DECODED_CHUNK_ELEMENTS`).
"""

from __future__ import annotations

import base64
import binascii
import math
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np

from refzarr.errors import RefFormatError, ScanError, UnsupportedFeatureError
from refzarr.model import INLINED, MISSING, ArrayMeta, ChunkManifest, RefArray
from refzarr.scan.dmrpp.storage import vlsa_values
from refzarr.scan.dmrpp.xmldoc import DMRPP
from refzarr.scan.hdf5.vlen import DECODED_CHUNK_ELEMENTS, encode_vlen

__all__ = ["string_dtype", "vlen_array"]

_OBJECT = np.dtype("|O")


def string_dtype(
    element: ET.Element, chunks: ET.Element | None, scalar: bool, where: str
) -> np.dtype[Any]:
    """The ``S<n>`` dtype of a fixed-length string variable.

    The length is the ``dmrpp:FixedLengthStringArray``'s ``string_length`` for an array, and
    the size of the stored value for a scalar (compact or contiguous).
    """
    fixed = element.find(DMRPP + "FixedLengthStringArray")
    if fixed is not None:
        if fixed.get("pad") == "space_pad":
            raise UnsupportedFeatureError(
                f"{where}: space-padded fixed strings are not supported yet"
            )
        return np.dtype(f"S{_length(fixed.get('string_length'), where)}")
    compact = element.find(DMRPP + "compact")
    if compact is not None:
        try:
            size = len(base64.b64decode((compact.text or "").strip()))
        except (binascii.Error, ValueError) as exc:
            raise ScanError(f"{where}: the sidecar's base64 data is damaged: {exc}") from None
        return np.dtype(f"S{max(size, 1)}")
    stored = element.find(DMRPP + "chunk")
    if stored is None and chunks is not None and chunks.find(DMRPP + "chunkDimensionSizes") is None:
        stored = chunks.find(DMRPP + "chunk")
    if stored is not None and scalar:
        return np.dtype(f"S{_length(stored.get('nBytes'), where)}")
    raise UnsupportedFeatureError(
        f"{where}: a String variable whose length the sidecar does not give (neither "
        "dmrpp:FixedLengthStringArray nor dmrpp:vlsa values)"
    )


def _length(text: str | None, where: str) -> int:
    if not text or not text.strip().isdigit() or int(text) < 1:
        raise ScanError(f"{where}: string length {text!r} is not a positive integer")
    return int(text)


def vlen_array(
    vlsa: ET.Element,
    tag: str,
    shape: tuple[int, ...],
    dimension_names: tuple[str, ...],
    attributes: dict[str, Any],
    where: str,
) -> RefArray:
    """A variable-length string variable, its ``dmrpp:vlsa`` values inlined."""
    try:
        values = vlsa_values(vlsa, tag, where, shape)
    except RefFormatError as exc:  # more values than refzarr inlines
        raise UnsupportedFeatureError(str(exc)) from None
    chunks = _chunk_shape(shape)
    encoded = _encoded(values, shape, chunks)
    utf8 = all(_is_utf8(v) for v in values)
    meta = ArrayMeta(
        shape=shape,
        chunks=chunks,
        dtype=_OBJECT,
        fill_value=None,  # reads as "", what h5py reads for a string never written
        codecs=({"id": "vlen-utf8" if utf8 else "vlen-bytes"},),
        attributes=attributes,
        dimension_names=dimension_names,
    )
    return RefArray(meta, _manifest(meta.grid_shape, encoded))


def _chunk_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    if not shape:
        return ()
    row = math.prod(shape[1:])
    rows = min(shape[0], max(1, DECODED_CHUNK_ELEMENTS // max(row, 1)))
    return (max(rows, 1), *(max(int(n), 1) for n in shape[1:]))


def _encoded(
    values: list[bytes], shape: tuple[int, ...], chunks: tuple[int, ...]
) -> dict[tuple[int, ...], bytes]:
    """Chunks holding a value other than empty, edge chunks padded with empty values."""
    if not shape:
        return {(): encode_vlen(values)} if values[0] else {}
    row = math.prod(shape[1:])
    per_chunk = chunks[0] * row
    out: dict[tuple[int, ...], bytes] = {}
    for number, start in enumerate(range(0, len(values), per_chunk)):
        part = values[start : start + per_chunk]
        if not any(part):
            continue
        part = part + [b""] * (per_chunk - len(part))
        out[(number,) + (0,) * (len(shape) - 1)] = encode_vlen(part)
    return out


def _manifest(grid: tuple[int, ...], chunks: dict[tuple[int, ...], bytes]) -> ChunkManifest:
    if not grid:
        zero = np.zeros((), dtype=np.uint64)
        if not chunks:
            return ChunkManifest.missing(())
        return ChunkManifest.from_arrays((), np.full((), INLINED), zero, zero, chunks)
    ids = np.full(grid, MISSING, dtype=np.int32)
    for index in chunks:
        ids[index] = INLINED
    zeros = np.zeros(grid, dtype=np.uint64)
    return ChunkManifest.from_arrays((), ids, zeros, zeros, chunks)


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
