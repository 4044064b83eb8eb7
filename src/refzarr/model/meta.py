"""`ArrayMeta`: everything needed to decode an array's chunks, and its Zarr v2 rendering."""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from refzarr.errors import RefFormatError, UnsupportedFeatureError
from refzarr.model.dtypes import (
    decode_fill_value,
    dtype_from_json,
    dtype_to_json,
    encode_fill_value,
)
from refzarr.model.frozen import FrozenDict, freeze_json, thaw_json
from refzarr.model.grid import RectilinearAxis, regular_bounds
from refzarr.model.pickling import tuple_state

__all__ = ["DIMENSIONS_ATTR", "ArrayMeta"]

DIMENSIONS_ATTR = "_ARRAY_DIMENSIONS"
"""The attribute xarray uses for dimension names in Zarr v2."""


@tuple_state
@dataclass(frozen=True, slots=True, eq=False)
class ArrayMeta:
    """Shape, chunking, dtype, fill value, codecs, attributes and dimension names of an array.

    Parameters
    ----------
    shape
        Array shape.
    chunks
        Chunk shape (same length as ``shape``; a chunk may extend past the array's edge).
    dtype
        numpy dtype, structured dtypes included.
    fill_value
        Value of chunks never written; None leaves it undefined (Zarr v2 ``null``).
    codecs
        numcodecs configs (``{"id": ..., ...}``) in encoding order: the last is applied last
        when writing and first when reading.
    attributes
        User attributes (JSON values); ``_ARRAY_DIMENSIONS`` goes in ``dimension_names``.
    dimension_names
        One name per dimension, or None when the array has none.
    order
        Memory layout of a decoded chunk, ``"C"`` or ``"F"``.
    dimension_separator
        Separator of chunk-index parts in Zarr v2 chunk keys: ``"."`` or ``"/"``.
    rectilinear
        None for a regular chunk grid (every chunk ``chunks``, edge chunks cut at the
        array's end), else one entry per axis: None where the axis is regular, or a
        `RectilinearAxis` giving each chunk's length and stored length along it (then
        ``chunks`` holds the longest stored length there). Axes given as rectilinear that
        are in fact regular are stored as None, so equal grids compare equal. Kerchunk
        formats and Zarr v2 cannot express an irregular grid: `to_zarr_v2` raises.
    """

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype[Any]
    fill_value: Any = None
    codecs: Sequence[Mapping[str, Any]] = ()
    attributes: Mapping[str, Any] = field(default_factory=FrozenDict)
    dimension_names: tuple[str, ...] | None = None
    order: Literal["C", "F"] = "C"
    dimension_separator: Literal[".", "/"] = "."
    rectilinear: tuple[RectilinearAxis | None, ...] | None = None

    def __post_init__(self) -> None:
        shape = _parse_ints(self.shape, "shape", minimum=0)
        chunks = _parse_ints(self.chunks, "chunks", minimum=1)
        if len(chunks) != len(shape):
            raise RefFormatError(f"chunks {chunks} must have one entry per dimension of {shape}")
        try:
            dtype = np.dtype(self.dtype)
            dtype_to_json(dtype)  # rejects what Zarr v2 cannot describe (sub-arrays, titles)
            fill = decode_fill_value(encode_fill_value(self.fill_value, dtype), dtype)
        except (TypeError, ValueError, OverflowError) as exc:
            raise RefFormatError(f"invalid dtype or fill value: {exc}") from exc
        attributes = freeze_json(self.attributes, where="attributes")
        if DIMENSIONS_ATTR in attributes:
            raise RefFormatError(f"pass {DIMENSIONS_ATTR} as dimension_names, not as an attribute")
        names = None if self.dimension_names is None else tuple(self.dimension_names)
        if names is not None and (
            len(names) != len(shape) or not all(isinstance(n, str) for n in names)
        ):
            raise RefFormatError(
                f"dimension_names {names} must be one str per dimension of shape {shape}"
            )
        if self.order not in ("C", "F"):
            raise RefFormatError(f"order must be 'C' or 'F', got {self.order!r}")
        if self.dimension_separator not in (".", "/"):
            raise RefFormatError(
                f"dimension_separator must be '.' or '/', got {self.dimension_separator!r}"
            )
        for name, value in (
            ("shape", shape),
            ("chunks", chunks),
            ("dtype", dtype),
            ("fill_value", fill),
            ("codecs", _parse_codecs(self.codecs)),
            ("attributes", attributes),
            ("dimension_names", names),
            ("rectilinear", _parse_rectilinear(self.rectilinear, shape, chunks)),
        ):
            object.__setattr__(self, name, value)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def grid_shape(self) -> tuple[int, ...]:
        """Number of chunks along each dimension."""
        regular = tuple(math.ceil(s / c) for s, c in zip(self.shape, self.chunks, strict=True))
        if self.rectilinear is None:
            return regular
        return tuple(
            n if axis is None else len(axis.sizes)
            for n, axis in zip(regular, self.rectilinear, strict=True)
        )

    @property
    def is_regular(self) -> bool:
        """Whether every chunk is ``chunks`` long (edge chunks cut at the array's end)."""
        return self.rectilinear is None

    def chunk_bounds(self, axis: int) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Where each chunk along ``axis`` starts, then the axis length (grid + 1 values)."""
        rect = None if self.rectilinear is None else self.rectilinear[axis]
        if rect is None:
            return regular_bounds(self.shape[axis], self.chunks[axis])
        return rect.bounds()

    def stored_chunk_shape(self, index: Sequence[int]) -> tuple[int, ...]:
        """The shape chunk ``index`` decodes to (``chunks`` unless the grid is irregular)."""
        if self.rectilinear is None:
            return self.chunks
        return tuple(
            c if rect is None else rect.stored[i]
            for c, rect, i in zip(self.chunks, self.rectilinear, index, strict=True)
        )

    def as_one_raw_chunk(self, attributes: Mapping[str, Any] | None = None) -> ArrayMeta:
        """A copy stored as one chunk of the whole array without codecs (values as raw
        bytes in ``dtype``'s byte order), as a loaded coordinate is; ``attributes`` replace
        the attributes. Every other field was validated when this one was made and is kept,
        so nothing else is checked again."""
        frozen = None if attributes is None else freeze_json(attributes, where="attributes")
        if self.rectilinear is not None:
            changes: dict[str, Any] = {"chunks": tuple(max(s, 1) for s in self.shape)}
            if frozen is not None:
                changes["attributes"] = frozen
            return self.replace(codecs=(), **changes)
        copy = object.__new__(ArrayMeta)
        for name in self.__dataclass_fields__:
            object.__setattr__(copy, name, getattr(self, name))
        object.__setattr__(copy, "chunks", tuple(max(s, 1) for s in self.shape))
        object.__setattr__(copy, "codecs", ())
        if frozen is not None:
            object.__setattr__(copy, "attributes", frozen)
        return copy

    @classmethod
    def trusted(
        cls,
        shape: tuple[int, ...],
        chunks: tuple[int, ...],
        dtype: np.dtype[Any],
        fill_value: Any,
        attributes: FrozenDict,
        dimension_names: tuple[str, ...] | None,
    ) -> ArrayMeta:
        """An array of regular chunks without codecs, made without the constructor's checks.

        For scanners whose values are valid by construction and already in the form the
        constructor would give them: ``shape`` and ``chunks`` tuples of ints (chunks >= 1),
        a numpy dtype Zarr v2 describes, the fill value as a numpy scalar of it (or None),
        attributes frozen (`freeze_json`) without ``_ARRAY_DIMENSIONS``, one str per
        dimension (or None). A small file's scan builds a few of these: the checks would
        cost a noticeable share of it.
        """
        meta = object.__new__(cls)
        for name, value in (
            ("shape", shape),
            ("chunks", chunks),
            ("dtype", dtype),
            ("fill_value", fill_value),
            ("codecs", ()),
            ("attributes", attributes),
            ("dimension_names", dimension_names),
            ("order", "C"),
            ("dimension_separator", "."),
            ("rectilinear", None),
        ):
            object.__setattr__(meta, name, value)
        return meta

    def replace(self, **changes: Any) -> ArrayMeta:
        """A copy with some fields changed (validated like a new one)."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        fields.update(changes)
        return ArrayMeta(**fields)

    # -- Zarr v2 ------------------------------------------------------------------------------

    def to_zarr_v2(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The ``.zarray`` and ``.zattrs`` documents (plain JSON objects).

        Fields are in the order kerchunk and zarr-python write them; every codec goes in
        ``filters`` (applied in order) and ``compressor`` is null, as kerchunk does.

        Raises
        ------
        UnsupportedFeatureError
            When the chunk grid is irregular (`rectilinear`): Zarr v2 has no way to say so.
        """
        if self.rectilinear is not None:
            axis = next(k for k, rect in enumerate(self.rectilinear) if rect is not None)
            raise UnsupportedFeatureError(
                f"the chunks along axis {axis} differ in length ({_describe(self, axis)}); "
                "Zarr v2 and kerchunk references need equal chunks"
            )
        zarray = {
            "shape": list(self.shape),
            "chunks": list(self.chunks),
            "dtype": dtype_to_json(self.dtype),
            "fill_value": encode_fill_value(self.fill_value, self.dtype),
            "order": self.order,
            "filters": [thaw_json(c) for c in self.codecs] or None,
            "dimension_separator": self.dimension_separator,
            "compressor": None,
            "zarr_format": 2,
        }
        zattrs: dict[str, Any] = {}
        if self.dimension_names is not None:
            zattrs[DIMENSIONS_ATTR] = list(self.dimension_names)
        zattrs.update(thaw_json(self.attributes))
        return zarray, zattrs

    @classmethod
    def from_zarr_v2(
        cls, zarray: Mapping[str, Any], zattrs: Mapping[str, Any] | None = None, *, where: str = ""
    ) -> ArrayMeta:
        """Parse ``.zarray`` / ``.zattrs`` documents; RefFormatError names ``where`` on failure."""
        prefix = f"{where}: " if where else ""
        try:
            return cls._from_zarr_v2(zarray, dict(zattrs or {}))
        except RefFormatError as exc:
            raise RefFormatError(f"{prefix}{exc}") from exc
        except (KeyError, TypeError, ValueError, SyntaxError) as exc:
            # SyntaxError: numpy parses comma-separated dtype strings ("08") with literal_eval
            raise RefFormatError(f"{prefix}invalid Zarr v2 array metadata: {exc!r}") from exc

    @classmethod
    def _from_zarr_v2(cls, zarray: Mapping[str, Any], zattrs: dict[str, Any]) -> ArrayMeta:
        if zarray.get("zarr_format", 2) != 2:
            raise RefFormatError(f"expected zarr_format 2, got {zarray.get('zarr_format')!r}")
        missing = [k for k in ("shape", "chunks", "dtype") if k not in zarray]
        if missing:
            raise RefFormatError(f".zarray lacks {', '.join(missing)}")
        dtype = dtype_from_json(zarray["dtype"])
        codecs = list(zarray.get("filters") or [])
        if zarray.get("compressor") is not None:
            codecs.append(zarray["compressor"])
        names = zattrs.pop(DIMENSIONS_ATTR, None)
        _decode_base64_fill(zattrs, dtype)
        return cls(
            shape=tuple(zarray["shape"]),
            chunks=tuple(zarray["chunks"]),
            dtype=dtype,
            fill_value=decode_fill_value(zarray.get("fill_value"), dtype),
            codecs=tuple(codecs),
            attributes=freeze_json(zattrs, where=".zattrs"),
            dimension_names=None if names is None else tuple(names),
            order=zarray.get("order", "C"),
            dimension_separator=zarray.get("dimension_separator", "."),
        )

    # -- comparison ---------------------------------------------------------------------------

    def _key(self) -> tuple[Any, ...]:
        return (
            self.shape,
            self.chunks,
            self.dtype,
            _hashable(encode_fill_value(self.fill_value, self.dtype)),
            self.codecs,
            self.attributes,
            self.dimension_names,
            self.order,
            self.dimension_separator,
            self.rectilinear,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayMeta):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _parse_rectilinear(
    value: Sequence[RectilinearAxis | None] | None, shape: tuple[int, ...], chunks: tuple[int, ...]
) -> tuple[RectilinearAxis | None, ...] | None:
    """Check a rectilinear grid against shape and chunks; None when it is in fact regular."""
    if value is None:
        return None
    axes = tuple(value)
    if len(axes) != len(shape):
        raise RefFormatError(f"rectilinear must have one entry per dimension of {shape}")
    out: list[RectilinearAxis | None] = []
    for k, rect in enumerate(axes):
        if rect is not None and not isinstance(rect, RectilinearAxis):
            raise RefFormatError(f"rectilinear[{k}] must be None or a RectilinearAxis")
        if rect is None or (rect.is_regular(chunks[k]) and rect.length == shape[k]):
            out.append(None)
            continue
        if rect.length != shape[k]:
            raise RefFormatError(
                f"the chunk sizes along axis {k} add up to {rect.length}, not to its length "
                f"{shape[k]}"
            )
        if chunks[k] != max(rect.stored):
            raise RefFormatError(
                f"chunks[{k}] must be the longest stored chunk length along that axis, "
                f"{max(rect.stored)}, got {chunks[k]}"
            )
        out.append(rect)
    return None if all(rect is None for rect in out) else tuple(out)


def _describe(meta: ArrayMeta, axis: int) -> str:
    """The first irregular chunk along ``axis`` of an irregular grid, in words."""
    assert meta.rectilinear is not None
    rect = meta.rectilinear[axis]
    assert rect is not None
    chunk = meta.chunks[axis]
    for k, (size, stored) in enumerate(zip(rect.sizes, rect.stored, strict=True)):
        last = k == len(rect.sizes) - 1
        if stored != chunk or (size != chunk and not last):
            return f"chunk {k} holds {size} positions stored as {stored}, others {chunk}"
    return f"chunk length {chunk}"


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _parse_ints(values: Sequence[int], name: str, *, minimum: int) -> tuple[int, ...]:
    if type(values) is tuple and all(type(v) is int and v >= minimum for v in values):
        return values  # already what the checks below would make of it
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise RefFormatError(f"{name} must be a sequence of integers, got {values!r}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < minimum:
            raise RefFormatError(f"{name} must hold integers >= {minimum}, got {list(values)!r}")
        out.append(int(v))
    return tuple(out)


def _parse_codecs(codecs: Sequence[Mapping[str, Any]]) -> tuple[FrozenDict, ...]:
    parsed = []
    for config in codecs:
        if not isinstance(config, Mapping) or not isinstance(config.get("id"), str):
            raise RefFormatError(f"a codec must be a numcodecs config with an 'id', got {config!r}")
        parsed.append(freeze_json(config, where=f"codec {config['id']!r}"))
    return tuple(parsed)


def _decode_base64_fill(zattrs: dict[str, Any], dtype: np.dtype[Any]) -> None:
    """A float ``_FillValue`` attribute written as xarray's Zarr v3 backend writes it (base64
    of a little-endian float64; VirtualiZarr's kerchunk writer copies it into ``.zattrs``)
    becomes the number again, so readers that mask by ``_FillValue`` see a number."""
    text = zattrs.get("_FillValue")
    if dtype.kind != "f" or not isinstance(text, str) or len(text) != 12:
        return
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return
    if len(raw) == 8:
        zattrs["_FillValue"] = float(np.frombuffer(raw, dtype="<f8")[0])
