"""Stacking image extensions that share a name (one per CCD: ``SCI`` with ``EXTVER`` 1, 2,
...) into one array along a new leading dimension ``extver``, each extension's chunks kept."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from refzarr.errors import UnsupportedFeatureError
from refzarr.model import ArrayMeta, ChunkManifest, RefArray
from refzarr.model.manifest import share_bytes
from refzarr.scan.fits.names import Dimensions

__all__ = ["stack_extensions"]

_PER_EXTENSION = ("fits_hdu",)
"""Attributes that always differ between the stacked extensions."""


def stack_extensions(
    members: dict[str, RefArray],
    hdu_names: list[str],
    array_names: list[str],
    dims: Dimensions,
    where: str,
) -> dict[str, RefArray]:
    """``members`` with the image arrays of HDUs sharing a name stacked into ``<name>``
    along ``extver`` (with a coordinate ``extver`` of their ``EXTVER``s); others as they are.

    Raises
    ------
    UnsupportedFeatureError
        When extensions sharing a name differ in shape, dtype, chunks, codecs, fill value or
        scaling (names them).
    """
    groups: dict[str, list[str]] = defaultdict(list)
    for hdu_name, array_name in zip(hdu_names, array_names, strict=True):
        if hdu_name and array_name != hdu_name and array_name in members:
            groups[hdu_name].append(array_name)
    out = {k: v for k, v in members.items() if not any(k in g for g in groups.values())}
    for hdu_name, names in groups.items():
        if hdu_name in out:
            raise UnsupportedFeatureError(f"{where}: cannot stack {names} as {hdu_name!r}: taken")
        arrays = [members[n] for n in names]
        _check_alike(arrays, names, where)
        versions = [int(a.meta.attributes.get("EXTVER", k + 1)) for k, a in enumerate(arrays)]
        axis = dims.name("extver", len(arrays), hdu_name)
        out[hdu_name] = _stacked(arrays, axis)
        if axis not in out:
            out[axis] = _coordinate(axis, versions)
    return out


def _check_alike(arrays: list[RefArray], names: list[str], where: str) -> None:
    first = arrays[0].meta
    for name, array in zip(names[1:], arrays[1:], strict=True):
        meta = array.meta
        for key in ("shape", "chunks", "dtype", "codecs", "fill_value", "dimension_names"):
            if getattr(meta, key) != getattr(first, key):
                raise UnsupportedFeatureError(
                    f"{where}: cannot stack {names[0]!r} and {name!r}: their {key} differ "
                    f"({getattr(first, key)} != {getattr(meta, key)}); scan without "
                    "stack_extensions"
                )
        for key in ("scale_factor", "add_offset"):
            if meta.attributes.get(key) != first.attributes.get(key):
                raise UnsupportedFeatureError(
                    f"{where}: cannot stack {names[0]!r} and {name!r}: their {key} differ; "
                    "scan without stack_extensions"
                )


def _stacked(arrays: list[RefArray], axis: str) -> RefArray:
    first = arrays[0].meta
    paths: list[str] = []
    ids, offsets, lengths = [], [], []
    inlined: dict[tuple[int, ...], bytes] = {}
    for k, array in enumerate(arrays):
        manifest = array.manifest
        remap = np.array([_index(paths, p) for p in manifest.paths] + [0], dtype=np.int32)
        pid = manifest.path_id
        ids.append(np.where(pid >= 0, remap[np.maximum(pid, 0)], pid))
        offsets.append(manifest.offset)
        lengths.append(manifest.length)
        inlined.update({(k, *index): data for index, data in manifest.inlined.items()})
    manifest = ChunkManifest.from_arrays(
        paths, np.stack(ids), np.stack(offsets), np.stack(lengths), inlined
    )
    meta = first.replace(
        shape=(len(arrays), *first.shape),
        chunks=(1, *first.chunks),
        attributes=_common_attributes([a.meta for a in arrays]),
        dimension_names=(axis, *(first.dimension_names or ())),
    )
    return RefArray(meta, manifest)


def _index(paths: list[str], path: str) -> int:
    if path not in paths:
        paths.append(path)
    return paths.index(path)


def _common_attributes(metas: list[ArrayMeta]) -> dict[str, Any]:
    """Cards equal in every extension; those that differ (or that some lack) as lists, one
    value per extension, under ``fits_headers``."""
    keys = dict.fromkeys(k for m in metas for k in m.attributes)
    common: dict[str, Any] = {}
    differing: dict[str, list[Any]] = {}
    for key in keys:
        values = [m.attributes.get(key) for m in metas]  # None where an extension lacks it
        if key not in _PER_EXTENSION and all(v == values[0] for v in values):
            common[key] = values[0]
        else:
            differing[key] = values
    common["fits_headers"] = differing
    return common


def _coordinate(axis: str, versions: list[int]) -> RefArray:
    values = np.asarray(versions, dtype="<i8")
    meta = ArrayMeta((len(values),), (len(values),), values.dtype, None, (), {}, (axis,))
    return RefArray(meta, ChunkManifest.one_inlined(share_bytes(values.tobytes())))
