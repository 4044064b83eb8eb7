"""The netCDF3 scanner: every variable of a CDF-1, CDF-2 or CDF-5 file as a `RefArray` of the
root group, in file order, from our own header parser (no netCDF library at scan time).

`NetCDF3Scanner` is a configured callable (options in the constructor, no state between
calls, picklable), so scanning many files is ``executor.map(NetCDF3Scanner(...), urls)``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import numpy as np

from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.model import INLINED, ArrayMeta, ChunkManifest, RefArray
from refzarr.model.attr_types import NETCDF_KEY, RESERVED_ATTRS, TYPES_ATTR, reserved_attribute
from refzarr.model.frozen import FrozenDict
from refzarr.model.manifest import share_bytes
from refzarr.model.meta import DIMENSIONS_ATTR
from refzarr.scan.base import ScanOptions
from refzarr.scan.netcdf3.header import Header, NeedMoreBytes, Variable, parse_header
from refzarr.scan.netcdf3.layout import CHUNK_BYTES, Placement, place_variables
from refzarr.scan.netcdf3.source import FIRST_READ, Source, open_source, opened_source
from refzarr.scan.netcdf3.types import CHAR, NC_TYPES
from refzarr.scan.paths import LocalFile
from refzarr.scan.result import ScannedGroup, Skipped, build_or_skip, reports_members

__all__ = ["NetCDF3Scanner"]

INLINE_SPAN_BYTES = 16 * 2**20
"""Chunks to inline are read in one request when they lie within this many bytes."""


@dataclass(frozen=True, slots=True)
class NetCDF3Scanner(ScanOptions):
    """Scan netCDF3 files (classic, 64-bit offset, 64-bit data) into reference groups.

    Takes the options every scanner takes (`ScanOptions`: ``storage_options``,
    ``inline_threshold``, ``on_unsupported``, ``inline_coordinates``) and:

    Parameters
    ----------
    chunk_bytes
        Contiguous data (a non-record variable, or the records of a file's only record
        variable) larger than this many bytes is cut into chunks of whole rows along its
        first dimension (default 64 MiB).

    Examples
    --------
    >>> scanner = NetCDF3Scanner(inline_threshold=100)  # doctest: +SKIP
    >>> groups = list(executor.map(scanner, urls))  # doctest: +SKIP
    """

    chunk_bytes: int = CHUNK_BYTES

    def __post_init__(self) -> None:
        ScanOptions.__post_init__(self)
        if isinstance(self.chunk_bytes, bool) or not isinstance(self.chunk_bytes, int):
            raise TypeError(f"chunk_bytes must be an int, got {self.chunk_bytes!r}")
        if self.chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be >= 1, got {self.chunk_bytes}")

    def __call__(self, url: str) -> ScannedGroup:
        """Scan one file (a local path or an fsspec URL).

        Returns
        -------
        ScannedGroup
            The root group: global attributes and one array per variable, in file order.

        Raises
        ------
        ScanError
            When the file is not netCDF3, or its header is damaged or overruns the file.
        SourceNotFoundError
            When the file does not exist.
        """
        with open_source(str(url), self.storage_options) as source:
            return self._scan(source)

    def scan_opened(self, file: LocalFile) -> ScannedGroup:
        """`__call__` of a plain local file `refzarr.scan` has opened to detect its format:
        the same group, without opening, stat-ing and reading its first bytes again."""
        return self._scan(opened_source(file))

    def _scan(self, source: Source) -> ScannedGroup:
        """The group of the open file ``source``."""
        header = read_header(source)
        records, placements = place_variables(header, source.size, source.url, self.chunk_bytes)
        skipped: list[Skipped] = []
        if _reserved_anywhere(header):
            header, placements = self._without_reserved(source.url, header, placements, skipped)
        unlimited = None if records.dimension is None else header.dimensions[records.dimension]
        members: dict[str, RefArray] = {}
        plain = self.on_unsupported == "raise" and not reports_members()
        for placement in placements:
            name = placement.variable.name
            record_dim = unlimited.name if placement.is_record and unlimited else None
            if plain:  # what `build_or_skip` does then, without its cost per variable
                members[name] = self._checked_array(source, placement, record_dim)
                continue
            built = build_or_skip(
                partial(self._checked_array, source, placement, record_dim),
                f"/{name}",
                self.on_unsupported,
                skipped,
            )
            if built is not None:
                members[name] = built
        # the record dimension no variable uses (netCDF4-python still lists it as unlimited)
        unused = unlimited.name if unlimited and not _uses(members, unlimited.name) else None
        attributes = frozen_attributes(header.attributes, header.types, unused, header.kept)
        return _unchecked(
            ScannedGroup,
            attributes=attributes,
            members=FrozenDict(members),
            sources=None,  # recorded by `refzarr.scan`
            skipped=tuple(skipped),
        )

    def _without_reserved(
        self, url: str, header: Header, placements: list[Placement], skipped: list[Skipped]
    ) -> tuple[Header, list[Placement]]:
        """The header and placements without attributes named like refzarr's records
        (`reserved_attribute`), each listed in ``skipped``; raised when not skipping."""
        attributes, types, kept = _drop_reserved(
            header.attributes,
            header.types,
            header.kept,
            f"{url}: global attributes",
            "/",
            self.on_unsupported,
            skipped,
        )
        header = dataclasses.replace(header, attributes=attributes, types=types, kept=kept)
        out = []
        for placement in placements:
            var = placement.variable
            attributes, types, kept = _drop_reserved(
                var.attributes,
                var.types,
                var.kept,
                f"{url}: variable {var.name!r}",
                f"/{var.name}",
                self.on_unsupported,
                skipped,
            )
            var = var._replace(attributes=attributes, types=types, kept=kept)
            out.append(placement._replace(variable=var))
        return header, out

    def _checked_array(
        self, source: Source, placement: Placement, record_dim: str | None
    ) -> RefArray:
        _check_name(source.url, placement.variable)
        return self._array(source, placement, record_dim)

    def _array(self, source: Source, placement: Placement, record_dim: str | None) -> RefArray:
        var = placement.variable
        attributes = frozen_attributes(var.attributes, var.types, record_dim, var.kept)
        shape, dtype = placement.shape, placement.dtype
        fill = fill_value(var, dtype)
        names = placement.dimension_names
        if _is_small_coordinate(placement, self.inline_coordinates):
            values = _gather(source, placement, f"{source.url}: variable {var.name!r}")
            meta = ArrayMeta.trusted(shape, shape, dtype, fill, attributes, names)
            return _unchecked(RefArray, meta=meta, manifest=ChunkManifest.one_inlined(values))
        meta = ArrayMeta.trusted(shape, placement.chunks, dtype, fill, attributes, names)
        return _unchecked(RefArray, meta=meta, manifest=self._manifest(source, placement))

    def _manifest(self, source: Source, placement: Placement) -> ChunkManifest:
        offsets = placement.offsets
        if placement.length < self.inline_threshold and offsets.size:
            return _inlined(source, placement)
        return ChunkManifest.in_one_file(source.url, offsets, placement.length)


T = TypeVar("T")


def _unchecked(cls: type[T], **fields: Any) -> T:
    """A model object of ``fields`` (every field by name) made as unpickling makes it,
    without ``__post_init__``'s checks: the scanner's values pass them by construction
    (names checked by `_check_name`, attributes frozen, grids equal), and a small file's scan
    builds a few objects per variable, whose checks would cost a noticeable share of it."""
    made = object.__new__(cls)
    made.__setstate__(fields)  # type: ignore[attr-defined]  # `tuple_state` classes
    return made


def frozen_attributes(
    attributes: dict[str, Any],
    types: dict[str, str],
    record_dim: str | None = None,
    kept: dict[str, tuple[int, ...]] | None = None,
) -> FrozenDict:
    """Attributes as the model holds them (their values are frozen JSON already), with the
    types JSON loses, the record dimension, the netCDF family (3: shown as netCDF4-python
    shows netCDF3) and the stored bytes of text that is not UTF-8 recorded in
    ``_nczarr_attr`` (`refzarr.model.attr_types`: ``types``, ``unlimited``, ``netcdf``,
    ``bytes``, as the HDF5 scanner records them)."""
    entry: dict[str, Any] = {"types": FrozenDict(types)}
    if record_dim:
        entry["unlimited"] = (record_dim,)
    entry[NETCDF_KEY] = 3
    if kept:
        entry["bytes"] = FrozenDict(kept)
    return FrozenDict({**attributes, TYPES_ATTR: FrozenDict(entry)})


def _reserved_anywhere(header: Header) -> bool:
    """Whether an attribute of the file is named like one of refzarr's records."""
    return any(
        name in attributes
        for attributes in (header.attributes, *(v.attributes for v in header.variables))
        for name in RESERVED_ATTRS
    )


def _drop_reserved(
    attributes: dict[str, Any],
    types: dict[str, str],
    kept: dict[str, tuple[int, ...]],
    where: str,
    path: str,
    on_unsupported: str,
    skipped: list[Skipped],
) -> tuple[dict[str, Any], dict[str, str], dict[str, tuple[int, ...]]]:
    found = [name for name in RESERVED_ATTRS if name in attributes]
    for name in found:
        error = reserved_attribute(where, name)
        if on_unsupported == "raise":
            raise error
        skipped.append(Skipped(f"{path}@{name}", str(error)))

    def drop(values: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in values.items() if k not in found}

    return drop(attributes), drop(types), drop(kept)


def _uses(members: dict[str, RefArray], dim: str) -> bool:
    """Whether an array of ``members`` has the dimension ``dim``."""
    return any(dim in (array.meta.dimension_names or ()) for array in members.values())


def _check_name(url: str, var: Variable) -> None:
    """Raise `UnsupportedFeatureError` when Zarr cannot hold the variable as named."""
    name = var.name
    if "/" in name or name in (".", "..") or name.startswith(".z") or name == "zarr.json":
        raise UnsupportedFeatureError(
            f"{url}: variable {name!r}: a Zarr array cannot have this name (it holds '/', is "
            "'.' or '..', or collides with Zarr metadata keys)"
        )
    if DIMENSIONS_ATTR in var.attributes:
        raise UnsupportedFeatureError(
            f"{url}: variable {name!r} has an attribute {DIMENSIONS_ATTR!r}, which Zarr "
            "readers take for its dimension names"
        )


def read_header(source: Source) -> Header:
    """The file's header, read with as few requests as its size allows.

    Raises
    ------
    ScanError
        When the file is empty, not netCDF3, or its header is damaged or truncated.
    """
    if source.size == 0:
        raise ScanError(f"{source.url}: the file is empty (0 bytes), not a netCDF3 file")
    data = source.head
    while True:
        try:
            return parse_header(data, source.size, source.url)
        except NeedMoreBytes as more:
            length = min(source.size, max(more.needed, 2 * len(data), FIRST_READ))
            data = source.read_range(0, length)


def fill_value(var: Variable, dtype: np.dtype[Any]) -> Any:
    """The Zarr fill value of a variable: its ``_FillValue`` in its own dtype, or None.

    A netCDF3 file stores every value, so the fill value is never read from a missing chunk;
    it only tells xarray what to mask, which must be what it masks reading the file: the
    ``_FillValue`` attribute where there is one (never netCDF's default fill values). An
    attribute of another type is used when it converts exactly, else left to the attribute.
    """
    if var.fill is None:
        return None
    code, raw = var.fill
    stored = NC_TYPES[code][0]
    if len(raw) != stored.itemsize:
        return None
    if code == var.nc_type:
        return np.frombuffer(raw, dtype)[0]
    if code == CHAR or dtype.kind == "S":
        return None
    value = np.frombuffer(raw, stored)
    with np.errstate(all="ignore"):
        cast = value.astype(dtype)
    same = cast.astype(stored) == value
    return cast[0] if bool(same[0]) else None


def _is_small_coordinate(placement: Placement, limit: int) -> bool:
    """Whether a variable is a dimension coordinate to load (``inline_coordinates``)."""
    shape = placement.shape
    return (
        len(shape) == 1
        and placement.dimension_names == (placement.variable.name,)
        and 0 < shape[0] * placement.dtype.itemsize <= limit
    )


def _gather(source: Source, placement: Placement, where: str) -> bytes:
    """The values of a variable of at most `GATHER_BYTES`, as stored: its chunks' bytes in
    order, cut at its end (one read when they lie close together, else one per chunk)."""
    total = math.prod(placement.shape) * placement.dtype.itemsize
    offsets = placement.offsets.reshape(-1)
    length = placement.length
    if offsets.size == 1:  # the usual case: one read, no numpy
        first = int(offsets[0])
        return share_bytes(source.read_range(first, min(length, source.size - first))[:total])
    first = int(offsets[0])
    end = min(int(offsets[-1]) + length, source.size)
    if end - first > INLINE_SPAN_BYTES:
        data = b"".join(source.read_range(o, length) for o in offsets.tolist())
        return share_bytes(data[:total])
    span = source.read_range(first, end - first)
    starts = (offsets - np.uint64(first)).astype(np.int64)
    index = (starts[:, None] + np.arange(length, dtype=np.int64)).reshape(-1)[:total]
    if index.size and int(index[-1]) >= len(span):
        raise ScanError(f"{where}: its values run past the file's end (internal error)")
    return share_bytes(np.frombuffer(span, np.uint8)[index].tobytes())


def _inlined(source: Source, placement: Placement) -> ChunkManifest:
    """Every chunk of a variable read and held in the manifest (``inline_threshold``)."""
    flat = placement.offsets.reshape(-1).astype(np.int64)
    length = placement.length
    first, last = int(flat.min()), int(flat.max()) + length
    indexes = list(np.ndindex(*placement.offsets.shape))
    end = min(last, source.size)
    if end - first <= INLINE_SPAN_BYTES:
        span = source.read_range(first, end - first) + bytes(last - end)
        chunks = [span[o - first : o - first + length] for o in flat.tolist()]
    else:
        chunks = [_read_padded(source, o, length) for o in flat.tolist()]
    shape = placement.offsets.shape
    zeros = np.zeros(shape, dtype=np.uint64)
    return ChunkManifest.from_arrays(
        [],
        np.full(shape, INLINED, dtype=np.int32),
        zeros,
        zeros,
        dict(zip(indexes, chunks, strict=True)),
    )


def _read_padded(source: Source, offset: int, length: int) -> bytes:
    """A chunk's bytes; one whose range runs on past the file's end padded with zeros."""
    end = min(offset + length, source.size)
    return source.read_range(offset, end - offset) + bytes(offset + length - end)
