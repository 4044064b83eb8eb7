"""Chunks written with some filters skipped (a non-zero HDF5 filter mask), made readable.

HDF5 records per chunk which stages of the pipeline were *not* applied (bit ``i`` set: filter
``i`` skipped, e.g. an optional filter that failed, or ``H5Dwrite_chunk`` with a mask). A Zarr
array has one pipeline for all chunks, so such a chunk is decoded with the stages that were
applied and re-encoded with the whole pipeline; the result is inlined in the reference set.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numcodecs
import numpy as np

from refzarr.errors import ScanError, UnsupportedFeatureError

__all__ = ["Recoder", "recoder"]

Recoder = Callable[[tuple[int, ...], int, bytes], bytes]
"""``(chunk index, filter mask, stored bytes) -> bytes encoded with the full pipeline``."""


def recoder(
    stages: Sequence[Mapping[str, Any] | None],
    codecs: Sequence[Mapping[str, Any]],
    chunk_nbytes: int,
    where: str,
) -> Recoder:
    """A function re-encoding one masked chunk to ``codecs`` (the array's whole pipeline).

    Parameters
    ----------
    stages
        One numcodecs config per HDF5 filter, in pipeline order (None: a stage that leaves
        the bytes unchanged).
    codecs
        The array's codecs in encoding order: must end with ``stages`` without the Nones.
        Codecs before those (what a padded integer or a null-terminated string type adds)
        act on the values the filters give back: a re-encoded chunk does not pass them.
    chunk_nbytes
        Size of one decoded chunk in bytes.
    where
        File and dataset, for error messages.

    Raises
    ------
    UnsupportedFeatureError
        When the array's codecs are not the filters' own (an extra stage), or a codec is not
        installed.
    """
    applied = [dict(c) for c in stages if c is not None]
    tail = [dict(c) for c in codecs][len(codecs) - len(applied) :]
    if len(applied) > len(codecs) or tail != applied:
        raise UnsupportedFeatureError(
            f"{where}: chunks skipped some of their filters, and the array's codecs do not "
            "end with one per filter, so they cannot be re-encoded"
        )
    made = [None if config is None else _codec(config, where) for config in stages]
    encoders = [(codec, config) for codec, config in zip(made, stages, strict=True) if config]

    def recode(chunk: tuple[int, ...], mask: int, data: bytes) -> bytes:
        at = f"{where}: chunk {chunk} (filter mask {mask:#x})"
        raw = _decode_applied(made, stages, mask, data, at)
        if len(raw) != chunk_nbytes:
            raise ScanError(f"{at}: decodes to {len(raw)} bytes, expected {chunk_nbytes}")
        return _encode_all(encoders, raw, at)

    return recode


def _codec(config: Mapping[str, Any], where: str) -> Any:
    try:
        return numcodecs.get_codec(dict(config))
    except (ValueError, TypeError, KeyError) as exc:
        raise UnsupportedFeatureError(
            f"{where}: codec {config.get('id')!r} is needed to re-encode chunks that skipped "
            f"filters, but numcodecs cannot create it: {exc}"
        ) from exc


def _decode_applied(
    made: Sequence[Any], stages: Sequence[Mapping[str, Any] | None], mask: int, data: bytes, at: str
) -> bytes:
    buf: Any = data
    for index in reversed(range(len(made))):
        codec, config = made[index], stages[index]
        if codec is None or config is None or mask >> index & 1:
            continue
        try:
            buf = codec.decode(buf)
        except Exception as exc:  # numcodecs raises anything from zlib.error to RuntimeError
            raise ScanError(
                f"{at}: stored bytes do not decode with {config['id']!r}: {exc}"
            ) from exc
    return _as_bytes(buf)


def _encode_all(encoders: Sequence[tuple[Any, Mapping[str, Any]]], raw: bytes, at: str) -> bytes:
    buf: Any = raw
    for codec, config in encoders:
        if config["id"] == "imagecodecs_szip" and len(_as_bytes(buf)) % _pixel(config):
            # libaec codes whole pixels only: the last bytes would decode as whatever memory
            # held (HDF5's own szip stage refuses such input: that is why it was skipped)
            raise UnsupportedFeatureError(
                f"{at}: re-encoding it with szip would lose its last bytes ({len(_as_bytes(buf))}"
                f" bytes are no whole number of {_pixel(config)}-byte pixels); rewrite the "
                "dataset with every filter applied (h5repack)"
            )
        try:
            buf = codec.encode(buf)
        except Exception as exc:  # a decode-only codec raises NotImplementedError or others
            raise UnsupportedFeatureError(
                f"{at}: re-encoding it with {config['id']!r} failed ({exc}); "
                "rewrite the dataset with every filter applied (h5repack)"
            ) from exc
    return _as_bytes(buf)


def _pixel(config: Mapping[str, Any]) -> int:
    """Bytes per szip pixel."""
    return max(1, -(-int(config.get("bits_per_pixel", 8)) // 8))


def _as_bytes(buf: Any) -> bytes:
    if isinstance(buf, bytes):
        return buf
    return np.ascontiguousarray(buf).tobytes()
