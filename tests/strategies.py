"""Hypothesis strategies for the model: dtypes, fill values, ArrayMeta, ChunkManifest, RefGroup.

Sizes stay small (a few hundred chunks at most) so that property tests run in seconds; the
values are the hard ones: structured and byte-swapped dtypes, NaN and NaT fills, 0-d arrays
and zero-length dimensions, unicode everywhere, offsets and lengths up to ``2**63 - 1``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from refzarr import ArrayMeta, ChunkManifest, RefArray, RefGroup
from refzarr.model import INLINED, MISSING, WHOLE_FILE
from refzarr.model.meta import DIMENSIONS_ATTR

__all__ = [
    "MAX_OFFSET",
    "any_dtypes",
    "array_metas",
    "attribute_dicts",
    "chunk_shapes",
    "codec_lists",
    "fill_values",
    "grid_shapes",
    "json_values",
    "manifests",
    "member_names",
    "ref_arrays",
    "ref_groups",
    "scalar_dtypes",
    "structured_dtypes",
    "texts",
    "urls",
]

MAX_OFFSET = 2**63 - 1

# Chunk entry kinds drawn per chunk by `manifests`.
REFERENCE, WHOLE, INLINE, ABSENT = 0, 1, 2, 3

# -- text --------------------------------------------------------------------------------------


@functools.cache
def texts(min_size: int = 0, max_size: int = 12) -> st.SearchStrategy[str]:
    """Any unicode text that can be encoded (no lone surrogates), control characters included."""
    alphabet = st.characters(exclude_categories=("Cs",))
    return st.text(alphabet, min_size=min_size, max_size=max_size)


_NAME_ALPHABET = st.characters(
    categories=("L", "Nd"), include_characters=" _-.", exclude_characters="/"
)


@functools.cache
def member_names() -> st.SearchStrategy[str]:
    """Names a group member may have: letters of any script, digits, space, ``_-.``."""
    return st.text(_NAME_ALPHABET, min_size=1, max_size=8).filter(
        lambda n: n not in (".", "..") and not n.startswith(".z") and n != "zarr.json"
    )


_SCHEMES = ["", "/", "file:///tmp/", "s3://bucket/", "https://example.org/", "gs://b/", "memory://"]


@functools.cache
def urls() -> st.SearchStrategy[str]:
    """Non-empty URLs: common schemes followed by any unicode path (spaces, ``%``, ``{``...)."""
    return st.builds(str.__add__, st.sampled_from(_SCHEMES), texts(min_size=1, max_size=16))


# -- JSON values -------------------------------------------------------------------------------


@functools.cache
def _json_scalars() -> st.SearchStrategy[Any]:
    return (
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)
        | st.floats(allow_nan=True, allow_infinity=True)
        | texts()
    )


@functools.cache
def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """JSON values: scalars (NaN, infinities, 64-bit integers), lists, objects; unicode keys."""
    return st.recursive(
        _json_scalars(),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(texts(max_size=6), children, max_size=3)
        ),
        max_leaves=max_leaves,
    )


@functools.cache
def attribute_dicts(*, for_array: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """User attributes; an array's never hold ``_ARRAY_DIMENSIONS`` (that is dimension_names)."""
    keys = texts(max_size=10)
    if for_array:
        keys = keys.filter(lambda k: k != DIMENSIONS_ATTR)
    return st.dictionaries(keys, json_values(), max_size=4)


# -- dtypes and fill values --------------------------------------------------------------------


@functools.cache
def scalar_dtypes() -> st.SearchStrategy[np.dtype[Any]]:
    """Every non-structured dtype Zarr v2 can describe, in both byte orders."""
    return st.one_of(
        hnp.boolean_dtypes(),
        hnp.integer_dtypes(endianness="?"),
        hnp.unsigned_integer_dtypes(endianness="?"),
        hnp.floating_dtypes(endianness="?", sizes=(16, 32, 64)),
        hnp.complex_number_dtypes(endianness="?"),
        hnp.datetime64_dtypes(endianness="?"),
        hnp.timedelta64_dtypes(endianness="?"),
        hnp.byte_string_dtypes(max_len=8),
        hnp.unicode_string_dtypes(endianness="?", max_len=4),
        st.integers(1, 8).map(lambda n: np.dtype(f"V{n}")),
    )


@functools.cache
def structured_dtypes() -> st.SearchStrategy[np.dtype[Any]]:
    """Structured dtypes: unicode field names, sub-array fields, nested records."""
    flat = hnp.array_dtypes(scalar_dtypes(), max_size=3, allow_subarrays=True)
    return (flat | hnp.nested_dtypes(scalar_dtypes(), max_leaves=4)).filter(_untitled)


def _untitled(dtype: np.dtype[Any]) -> bool:
    """True when no field has a title (Zarr v2 has no place for one; ArrayMeta rejects them)."""
    if dtype.fields is None:
        return dtype.subdtype is None or _untitled(dtype.subdtype[0])
    return all(len(spec) == 2 and _untitled(spec[0]) for spec in dtype.fields.values())


@functools.cache
def any_dtypes() -> st.SearchStrategy[np.dtype[Any]]:
    """Scalar dtypes most of the time, structured ones sometimes."""
    return st.one_of(scalar_dtypes(), scalar_dtypes(), structured_dtypes())


def fill_values(dtype: np.dtype[Any]) -> st.SearchStrategy[Any]:
    """None, or a scalar of ``dtype`` (NaN, infinities and NaT included; any bytes for records)."""
    if dtype.kind == "V":
        raw = st.binary(min_size=dtype.itemsize, max_size=dtype.itemsize)
        return st.none() | raw.map(lambda b: np.frombuffer(b, dtype=dtype)[0])
    return st.none() | hnp.from_dtype(dtype).map(lambda v: np.array(v, dtype=dtype)[()])


# -- codecs ------------------------------------------------------------------------------------


_codec_keys = texts(max_size=5).filter(lambda k: k != "id")


@functools.cache
def _codec_configs(itemsize: int) -> st.SearchStrategy[dict[str, Any]]:
    level = st.integers(0, 9)
    return st.one_of(
        st.builds(lambda n: {"id": "zlib", "level": n}, level),
        st.builds(lambda n: {"id": "gzip", "level": n}, level),
        st.builds(lambda n: {"id": "zstd", "level": n}, st.integers(-5, 22)),
        st.just({"id": "shuffle", "elementsize": itemsize}),
        st.builds(
            lambda c, s: {"id": "blosc", "cname": c, "clevel": 5, "shuffle": s, "blocksize": 0},
            st.sampled_from(["lz4", "zstd", "blosclz"]),
            st.integers(-1, 2),
        ),
        # codecs refzarr does not know are kept verbatim, whatever their parameters
        st.builds(
            lambda name, extra: {"id": name, **extra},
            texts(min_size=1, max_size=8),
            st.dictionaries(
                texts(max_size=5).filter(lambda k: k != "id"), json_values(4), max_size=2
            ),
        ),
    )


def codec_lists(dtype: np.dtype[Any]) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Codec pipelines (numcodecs configs), empty included."""
    return st.lists(_codec_configs(dtype.itemsize), max_size=3)


# -- ArrayMeta ---------------------------------------------------------------------------------


def chunk_shapes(shape: Sequence[int]) -> st.SearchStrategy[tuple[int, ...]]:
    """Chunk shapes for ``shape``: from 1 up to past the edge (zero-length dimensions too)."""
    return _chunk_shapes(tuple(shape))


@functools.cache
def _chunk_shapes(shape: tuple[int, ...]) -> st.SearchStrategy[tuple[int, ...]]:
    return st.tuples(*(st.integers(1, max(1, side + 2)) for side in shape))


@st.composite
def array_metas(
    draw: st.DrawFn,
    *,
    dtypes: st.SearchStrategy[np.dtype[Any]] | None = None,
    max_dims: int = 3,
    max_side: int = 6,
) -> ArrayMeta:
    """ArrayMeta: 0-d to ``max_dims``-d, zero-length dimensions, every optional field varied."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=max_side))
    dtype = draw(dtypes if dtypes is not None else any_dtypes())
    names = st.lists(texts(max_size=6), min_size=len(shape), max_size=len(shape)).map(tuple)
    return ArrayMeta(
        shape=shape,
        chunks=draw(chunk_shapes(shape)),
        dtype=dtype,
        fill_value=draw(fill_values(dtype)),
        codecs=tuple(draw(codec_lists(dtype))),
        attributes=draw(attribute_dicts(for_array=True)),
        dimension_names=draw(st.none() | names),
        order=draw(st.sampled_from(["C", "F"])),
        dimension_separator=draw(st.sampled_from([".", "/"])),
    )


# -- ChunkManifest -----------------------------------------------------------------------------


@functools.cache
def grid_shapes(max_dims: int = 3, max_side: int = 5) -> st.SearchStrategy[tuple[int, ...]]:
    """Chunk grid shapes, the empty grid of a 0-d array and grids with no chunks included."""
    return hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=max_side)


@st.composite
def manifests(
    draw: st.DrawFn,
    grid_shape: Sequence[int] | None = None,
    *,
    min_length: int = 0,
    kinds: Sequence[int] = (REFERENCE, WHOLE, INLINE, ABSENT),
    max_inline: int = 24,
) -> ChunkManifest:
    """Manifests mixing byte-range references, whole-file references, inlined and missing chunks.

    Offsets and lengths reach ``2**63 - 1``; ``min_length=1`` leaves out zero-length ranges
    (the Parquet layout cannot tell one from a whole file).
    """
    grid = tuple(grid_shape) if grid_shape is not None else draw(grid_shapes())
    paths = draw(st.lists(urls(), min_size=1, max_size=4, unique=True))
    kind = draw(hnp.arrays(np.int8, grid, elements=st.sampled_from(kinds)))
    ids = draw(hnp.arrays(np.int32, grid, elements=st.integers(0, len(paths) - 1)))
    offsets = draw(hnp.arrays(np.uint64, grid, elements=st.integers(0, MAX_OFFSET)))
    lengths = draw(hnp.arrays(np.uint64, grid, elements=st.integers(min_length, MAX_OFFSET)))
    present = (kind == REFERENCE) | (kind == WHOLE)
    path_id = np.where(present, ids, np.where(kind == INLINE, INLINED, MISSING))
    offset = np.where(kind == REFERENCE, offsets, np.uint64(0))
    length = np.where(kind == REFERENCE, lengths, np.where(kind == WHOLE, WHOLE_FILE, 0))
    inlined = {
        tuple(int(i) for i in index): draw(_inline_bytes(max_inline))
        for index in np.argwhere(kind == INLINE)
    }
    return ChunkManifest.from_arrays(paths, path_id, offset, length.astype(np.uint64), inlined)


@functools.cache
def _inline_bytes(max_size: int) -> st.SearchStrategy[bytes]:
    """Inlined chunk data: binary, ASCII text, and text that looks like ``base64:``."""
    return st.one_of(
        st.binary(max_size=max_size),
        st.text(st.characters(max_codepoint=127), max_size=max_size).map(str.encode),
        st.binary(max_size=max_size).map(lambda b: b"base64:" + b),
    )


# -- RefArray and RefGroup ---------------------------------------------------------------------


_ANY_ARRAY_METAS = array_metas()


@st.composite
def ref_arrays(
    draw: st.DrawFn,
    metas: st.SearchStrategy[ArrayMeta] | None = None,
    **manifest_options: Any,
) -> RefArray:
    """An array whose manifest matches its metadata's chunk grid."""
    meta = draw(metas if metas is not None else _ANY_ARRAY_METAS)
    return RefArray(meta, draw(manifests(meta.grid_shape, **manifest_options)))


def ref_groups(
    *,
    max_depth: int = 2,
    max_members: int = 3,
    arrays: st.SearchStrategy[RefArray] | None = None,
) -> st.SearchStrategy[RefGroup]:
    """Hierarchies of nested groups with arrays, attributes and unicode member names."""
    leaf = arrays if arrays is not None else ref_arrays()
    node: st.SearchStrategy[Any] = leaf
    for _ in range(max_depth):
        node = leaf | _groups_of(node, max_members)
    return _groups_of(node, max_members)


def _groups_of(members: st.SearchStrategy[Any], max_members: int) -> st.SearchStrategy[RefGroup]:
    return st.builds(
        RefGroup,
        attributes=attribute_dicts(),
        members=st.dictionaries(member_names(), members, max_size=max_members),
    )
