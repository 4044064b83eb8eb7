"""HDF5 filter pipelines as numcodecs configs in encoding order, or an error naming the filter.

Only filters whose stored bytes a stock numcodecs codec decodes exactly are mapped; every other
filter raises `UnsupportedFeatureError` saying why, so that no chunk is ever decoded wrongly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from refzarr.errors import UnsupportedFeatureError

__all__ = ["FILTER_NAMES", "Hdf5Filter", "filter_to_codec", "filters_to_codecs"]

DEFLATE, SHUFFLE, FLETCHER32, SZIP, NBIT, SCALEOFFSET = 1, 2, 3, 4, 5, 6
BZIP2, LZF, BLOSC, LZ4, BITSHUFFLE, ZSTD, BLOSC2 = 307, 32000, 32001, 32004, 32008, 32015, 32026

FILTER_NAMES = {
    DEFLATE: "deflate",
    SHUFFLE: "shuffle",
    FLETCHER32: "fletcher32",
    SZIP: "szip",
    NBIT: "N-bit",
    SCALEOFFSET: "scale-offset",
    BZIP2: "bzip2",
    LZF: "LZF",
    BLOSC: "Blosc",
    LZ4: "LZ4",
    BITSHUFFLE: "bitshuffle",
    ZSTD: "Zstandard",
    BLOSC2: "Blosc2",
}
"""Names of the registered HDF5 filters refzarr knows about, by filter id."""

_WHY_NOT = {
    SZIP: "numcodecs has no szip (libaec) decoder",
    NBIT: "the N-bit filter needs a refzarr codec that is not written yet",
    SCALEOFFSET: "the scale-offset filter needs a refzarr codec that is not written yet",
    BZIP2: "the HDF5 bzip2 framing is not verified against numcodecs' bz2 yet",
    LZF: "numcodecs has no LZF decoder (imagecodecs' is not wired in yet)",
    LZ4: "the HDF5 LZ4 filter frames its blocks differently from numcodecs' LZ4",
    BITSHUFFLE: "the HDF5 bitshuffle filter's framing has no numcodecs decoder",
    BLOSC2: "the HDF5 Blosc2 filter has no numcodecs decoder",
}

_BLOSC_COMPRESSORS = {0: "blosclz", 1: "lz4", 2: "lz4hc", 3: "snappy", 4: "zlib", 5: "zstd"}


@dataclass(frozen=True, slots=True)
class Hdf5Filter:
    """One stage of an HDF5 filter pipeline, as ``H5Pget_filter`` reports it.

    Parameters
    ----------
    id
        The registered filter id (1 deflate, 2 shuffle, 32001 Blosc, ...).
    name
        The name stored in the file (may be empty).
    client_data
        The filter's ``cd_values``.
    """

    id: int
    name: str
    client_data: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """A human-readable name: ``"LZF (HDF5 filter 32000)"``."""
        name = FILTER_NAMES.get(self.id) or self.name or "unknown filter"
        return f"{name} (HDF5 filter {self.id})"


def _deflate(cd: Sequence[int], itemsize: int) -> dict[str, Any]:
    return {"id": "zlib", "level": int(cd[0]) if cd else 6}


def _shuffle(cd: Sequence[int], itemsize: int) -> dict[str, Any]:
    # HDF5 stores the element size it shuffled with as the first client value
    return {"id": "shuffle", "elementsize": int(cd[0]) if cd else itemsize}


def _fletcher32(cd: Sequence[int], itemsize: int) -> dict[str, Any]:
    # numcodecs' fletcher32 is HDF5's: a trailing 4-byte checksum, verified and stripped
    return {"id": "fletcher32"}


def _blosc(cd: Sequence[int], itemsize: int) -> dict[str, Any]:
    # hdf5-blosc stores a plain Blosc frame; cd = [rev, version, typesize, size, clevel,
    # shuffle, compressor]; numcodecs decodes any frame whatever the config says
    clevel = int(cd[4]) if len(cd) > 4 else 5
    shuffle = int(cd[5]) if len(cd) > 5 else 1
    cname = _BLOSC_COMPRESSORS.get(int(cd[6]) if len(cd) > 6 else 0, "blosclz")
    return {"id": "blosc", "cname": cname, "clevel": clevel, "shuffle": shuffle, "blocksize": 0}


def _zstd(cd: Sequence[int], itemsize: int) -> dict[str, Any]:
    # the HDF5 Zstandard filter stores one zstd frame (with its content size)
    return {"id": "zstd", "level": int(cd[0]) if cd else 3}


_MAPPERS: dict[int, Callable[[Sequence[int], int], dict[str, Any]]] = {
    DEFLATE: _deflate,
    SHUFFLE: _shuffle,
    FLETCHER32: _fletcher32,
    BLOSC: _blosc,
    ZSTD: _zstd,
}


def filter_to_codec(stage: Hdf5Filter, itemsize: int, *, where: str = "") -> dict[str, Any]:
    """The numcodecs config that decodes what ``stage`` encoded.

    Parameters
    ----------
    stage
        The filter.
    itemsize
        Size in bytes of one array element (the default shuffle element size).
    where
        What to name in an error (file and dataset).

    Raises
    ------
    UnsupportedFeatureError
        When no installed numcodecs codec decodes the filter's bytes exactly.
    """
    mapper = _MAPPERS.get(stage.id)
    if mapper is None:
        reason = _WHY_NOT.get(stage.id, "refzarr does not know this filter")
        prefix = f"{where}: " if where else ""
        raise UnsupportedFeatureError(f"{prefix}filter {stage.label} is not supported: {reason}")
    return mapper(stage.client_data, itemsize)


def filters_to_codecs(
    stages: Iterable[Hdf5Filter], itemsize: int, *, where: str = ""
) -> list[dict[str, Any]]:
    """numcodecs configs of a whole pipeline, in HDF5's (encoding) order.

    Raises `UnsupportedFeatureError` naming the first filter that cannot be mapped.
    """
    return [filter_to_codec(stage, itemsize, where=where) for stage in stages]
