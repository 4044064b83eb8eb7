"""Vdata tables a user wrote (not the SD interface's own vdatas) as 1-D structured arrays
under ``vdata/``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from refzarr.errors import UnsupportedFeatureError
from refzarr.model import ArrayMeta, RefArray, RefGroup
from refzarr.scan.hdf4.storage import (
    INLINE_LIMIT,
    Context,
    Layout,
    inlined_manifest,
    missing,
    one_chunk,
    whole,
)
from refzarr.scan.hdf4.vsets import DFTAG_VH, FULL_INTERLACE, VData, record_dtype

__all__ = ["INTERNAL_CLASSES", "read_tables"]

INTERNAL_CLASSES = (
    "Attr0.0",
    "DimVal0.0",
    "DimVal0.1",
    "Var0.0",
    "CoordVar0.0",
    "_HDF_CHK_TBL_",
    "RIATTR0.0",
)
"""Vdata classes of HDF4's own bookkeeping (attributes, dimensions, chunk tables, ...)."""


def read_tables(
    ctx: Context,
    guarded: Callable[[str, Callable[[], Any]], Any],
    used_vgroups: set[int],
    used_vdatas: set[int],
) -> RefGroup:
    """Every user Vdata, by name (``/`` becomes ``_``; repeated names get ``_2``, ``_3``)."""
    members: dict[str, RefArray] = {}
    for ref in ctx.table.refs(DFTAG_VH):
        if ref in used_vdatas:
            continue
        vdata = ctx.vsets.vdata(ref)
        if vdata.klass.startswith(INTERNAL_CLASSES) or not vdata.fields:
            continue
        name = _unique(vdata.name.replace("/", "_") or f"vdata_{ref}", members)
        array = guarded(f"/vdata/{name}", partial(_table, ctx, vdata, name))
        if array is not None:
            members[name] = array
    return RefGroup({}, members)


def _unique(name: str, taken: dict[str, Any]) -> str:
    if name not in taken:
        return name
    k = 2
    while f"{name}_{k}" in taken:
        k += 1
    return f"{name}_{k}"


def _table(ctx: Context, vdata: VData, name: str) -> RefArray:
    what = f"{ctx.source.url}: vdata {vdata.name!r}"
    dtype = record_dtype(vdata, what)
    dtype = _packed(dtype)
    shape = (vdata.nrecords,)
    attrs = {"hdf4_class": vdata.klass} if vdata.klass else {}
    if vdata.nrecords == 0:
        layout = missing(shape)
    else:
        storage = ctx.vsets.records_storage(vdata, f"vdata {vdata.name!r}")
        nbytes = vdata.nrecords * vdata.record_size
        simple = len(storage.ranges) == 1 and storage.ranges[0][0] >= 0
        if simple and vdata.interlace == FULL_INTERLACE and dtype.itemsize == vdata.record_size:
            layout = one_chunk(ctx, storage.ranges[0][0], nbytes, shape)
        else:
            values = ctx.vsets.records(vdata, f"vdata {vdata.name!r}").astype(dtype)
            data = values.tobytes()
            if len(data) > INLINE_LIMIT:
                raise UnsupportedFeatureError(
                    f"{what}: records in linked blocks or not interlaced ({len(data)} bytes, "
                    f"more than the {INLINE_LIMIT} refzarr inlines)"
                )
            layout = Layout(whole(shape), inlined_manifest((1,), {(0,): data}), [])
    meta = ArrayMeta(
        shape=shape,
        chunks=layout.chunks,
        dtype=dtype,
        fill_value=None,
        codecs=layout.codecs,
        attributes=attrs,
        dimension_names=(f"{name}_row",),
    )
    return RefArray(meta, layout.manifest)


def _packed(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The record dtype with its fields packed in order (no padding a field list hides)."""
    assert dtype.names is not None
    return np.dtype([(n, dtype.fields[n][0]) for n in dtype.names])  # type: ignore[index]
