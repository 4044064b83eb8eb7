"""Checking that variables expected identical across files are: cheap fingerprints first
(same metadata and same chunk entries, or the same inlined bytes), then the stored bytes of
what is left (one batched fetch), then decoded values (NaN-aware) of what still differs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from refzarr.combine.checks import CHECKED_ATTRIBUTES, certainly_alike, quick_key
from refzarr.combine.values import UrlCheck, fetch_raw, read_values
from refzarr.errors import IncompatibleError
from refzarr.model import ChunkManifest, ManifestBlock, RefArray
from refzarr.model.frozen import json_identity
from refzarr.model.sparse import check_dense

__all__ = ["SameSet", "check_identical", "fingerprint"]

Describe = Callable[[Sequence[int]], str]


@dataclass(frozen=True)
class SameSet:
    """Arrays (``arrays[k]`` from file ``files[k]``) that must hold identical values."""

    what: str
    files: tuple[int, ...]
    arrays: tuple[RefArray, ...]
    coordinate: bool = False
    """A dimension coordinate: values that differ mean the files are on different grids."""


def check_identical(
    sets: Sequence[SameSet],
    describe: Describe,
    storage_options: Mapping[str, Any] | None,
    url_check: UrlCheck | None = None,
) -> None:
    """Raise IncompatibleError naming the first file whose array differs from the set's first.

    Shape, dtype, dimension names and CF packing attributes must agree; values are compared
    after decoding (NaN equals NaN), so the same data stored with other codecs or chunks is
    identical.
    """
    pending: list[tuple[SameSet, list[int]]] = []
    for same in sets:
        classes = _fingerprint_classes(same.arrays)
        if len(classes) > 1:  # the structure is part of the fingerprint: check it on one each
            reps = [members[0] for members in classes.values()]
            _check_structure(same, reps, describe)
            pending.append((same, reps))
    if not pending:
        return
    for same, reps in pending:  # values compared chunk by chunk: one slot per chunk
        for k in reps:
            manifest = same.arrays[k].manifest
            if manifest.sparse:
                files = f"{describe([same.files[reps[0]]])} and {describe([same.files[k]])}"
                check_dense(
                    manifest.nchunks,
                    f"{same.what}: comparing its values in {files} (their references differ)",
                )
    chosen = [same.arrays[k] for same, reps in pending for k in reps]
    labels = [f"{describe([same.files[k]])}: {same.what}" for same, reps in pending for k in reps]
    raws = iter(fetch_raw(chosen, storage_options, labels.__getitem__, url_check=url_check))
    still: list[tuple[SameSet, list[int]]] = []
    for same, reps in pending:
        keyed = {k: _raw_key(same.arrays[k], next(raws)) for k in reps}
        distinct: dict[Any, int] = {}
        for k in reps:
            distinct.setdefault(keyed[k], k)
        if len(distinct) > 1:
            still.append((same, list(distinct.values())))
    _compare_values(still, describe, storage_options, url_check)


def _check_structure(same: SameSet, chosen: list[int], describe: Describe) -> None:
    first = same.arrays[0].meta
    for k in chosen:
        meta, file = same.arrays[k].meta, same.files[k]
        for name, a, b in (
            ("shape", first.shape, meta.shape),
            ("dtype", first.dtype, meta.dtype),
            ("dimension names", first.dimension_names, meta.dimension_names),
            *(
                (f"attribute {n!r}", _attr(first.attributes, n), _attr(meta.attributes, n))
                for n in CHECKED_ATTRIBUTES
            ),
        ):
            if a != b:
                raise IncompatibleError(
                    f"{same.what} must be identical in every file, but its {name} differs: "
                    f"{a} in {describe([same.files[0]])}, {b} in {describe([file])}"
                )


def _attr(attributes: Mapping[str, Any], name: str) -> str | None:
    return json_identity(attributes[name]) if name in attributes else None


def _classes(arrays: Sequence[RefArray], key: Callable[[RefArray], Any]) -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = {}
    for k, array in enumerate(arrays):
        out.setdefault(key(array), []).append(k)
    return out


def _fingerprint_classes(arrays: Sequence[RefArray]) -> dict[Any, list[int]]:
    """`_classes` by `_fingerprint`, with a fast path for arrays stored like the first
    (the usual case: every file holds the same ``lat``)."""
    first = arrays[0]
    manifest = first.manifest
    entries = _entries(manifest)
    alike = [0]
    others = []
    for k in range(1, len(arrays)):
        array = arrays[k]
        if (
            entries is not None
            and certainly_alike(array.meta, first.meta)
            and (array.manifest is manifest or _entries(array.manifest) == entries)
        ):
            alike.append(k)
        else:
            others.append(k)
    classes = {fingerprint(first): alike}
    for k in others:
        classes.setdefault(fingerprint(arrays[k]), []).append(k)
    return classes


def _entries(manifest: ChunkManifest) -> tuple[Any, ...] | None:
    """The chunk entries of a one-block manifest, hashable (None for more blocks)."""
    if manifest.nchunks > manifest.block_size:  # more than one block
        return None
    return _block_entries(manifest.block(0))


def _block_entries(block: ManifestBlock) -> tuple[Any, ...]:
    inlined = block.inlined
    return (
        block.paths,
        block.path_id.tobytes(),
        block.offset.tobytes(),
        block.length.tobytes(),
        tuple(inlined.items()) if len(inlined) < 2 else tuple(sorted(inlined.items())),
    )


def _layout(array: RefArray) -> tuple[Any, ...]:
    meta = array.meta
    fill = repr(meta.fill_value)  # NaN fills alike (json_identity is slower, same answer here)
    # quick_key over every axis: dtype, codecs, dimension names, shape, CF attributes
    return (quick_key(meta, range(meta.ndim)), meta.chunks, fill)


def fingerprint(array: RefArray) -> tuple[Any, ...]:
    """Equal fingerprints mean equal values: same layout and the same chunk entries."""
    # the blocks holding written chunks (every block, but a sparse manifest's few), placed
    blocks = tuple(
        (block.start, *_block_entries(block)) for block in array.manifest.iter_written_blocks()
    )
    return (_layout(array), blocks)


def _raw_key(array: RefArray, raw: list[bytes | memoryview | None]) -> tuple[Any, ...]:
    """Equal keys mean equal values: same layout and the same stored bytes, chunk by chunk."""
    missing = array.manifest.written_entries().numbers.tobytes()  # which chunks are written
    return (_layout(array), missing, tuple(None if r is None else bytes(r) for r in raw))


def _compare_values(
    pending: list[tuple[SameSet, list[int]]],
    describe: Describe,
    storage_options: Mapping[str, Any] | None,
    url_check: UrlCheck | None,
) -> None:
    if not pending:
        return
    chosen = [(same, k) for same, reps in pending for k in reps]
    arrays = [same.arrays[k] for same, k in chosen]

    def name(i: int) -> str:
        same, k = chosen[i]
        return f"{describe([same.files[k]])}: {same.what}"

    values = iter(read_values(arrays, name, storage_options, url_check=url_check))
    for same, reps in pending:
        first = next(values)
        for k in reps[1:]:
            other = next(values)
            if not _equal(first, other):
                raise IncompatibleError(
                    f"{same.what} must be identical in every file, but its values differ "
                    f"between {describe([same.files[reps[0]]])} and "
                    f"{describe([same.files[k]])} ({_first_difference(first, other)}); "
                    f"{_advice(same)}"
                )


def _advice(same: SameSet) -> str:
    if same.coordinate:
        return (
            "the files are on different grids (is one of another tile, region or "
            "resolution?): leave such files out or combine each grid separately, or "
            "concatenate along that variable's dimension"
        )
    return "concatenate along that variable's dimension, or leave it out of the files"


def _equal(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        return bool(np.array_equal(a, b, equal_nan=True))
    if a.dtype.kind in "mM":
        return bool(np.all((a == b) | (np.isnat(a) & np.isnat(b))))
    return bool(np.array_equal(a, b))


def _first_difference(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> str:
    if a.shape != b.shape:
        return f"shapes {a.shape} and {b.shape}"
    if a.dtype != b.dtype:
        return f"dtypes {a.dtype} and {b.dtype}"
    if a.dtype.kind in "fc":
        differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
    else:
        differ = a != b
    where = np.argwhere(np.asarray(differ))
    if not where.size:  # NaT against NaT-like values, structured fields
        return "they differ in a value that compares equal element-wise"
    index = tuple(int(i) for i in where[0])
    return f"first at index {index}: {_plain(a[index])} vs {_plain(b[index])}"


def _plain(value: Any) -> str:
    """A value as Python shows it (``-3.5``, not ``np.float64(-3.5)``)."""
    return (
        repr(value.item())
        if isinstance(value, np.generic) and value.dtype.kind != "V"
        else repr(value)
    )
