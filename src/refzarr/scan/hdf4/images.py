"""GR raster images under ``images/``: the vgroup named ``RIG0.0`` lists one ``RI0.0`` vgroup
per image, holding its dimension record (tag 300: width, height, number type, components,
interlace), its raster data (tag 302, plain or a special element) and its attributes."""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from refzarr.codecs.chunk import decode_whole
from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.model import INLINED, ArrayMeta, RefArray, RefGroup
from refzarr.scan.hdf4.elements import Chunked, resolve
from refzarr.scan.hdf4.numtypes import nt_record_dtype
from refzarr.scan.hdf4.sd import attribute_value
from refzarr.scan.hdf4.storage import (
    INLINE_LIMIT,
    Context,
    Layout,
    inlined_manifest,
    layout_of,
    whole,
)
from refzarr.scan.hdf4.vsets import DFTAG_VG, DFTAG_VH, VGroup

__all__ = ["read_images"]

GR_NAME, RI_CLASS = "RIG0.0", "RI0.0"
DFTAG_ID, DFTAG_RI, DFTAG_CI = 300, 302, 303
INTERLACES = {0: "pixel", 1: "line", 2: "component"}


def read_images(
    ctx: Context, guarded: Callable[[str, Callable[[], Any]], Any], used: set[int]
) -> RefGroup:
    """The group of GR images (empty when the file has none); ``used`` receives the vdatas
    the images' attributes occupy."""
    gr = next(
        (
            ctx.vsets.group(ref)
            for ref in ctx.table.refs(DFTAG_VG)
            if ctx.vsets.group(ref).name == GR_NAME
        ),
        None,
    )
    if gr is None:
        return RefGroup({}, {})
    members: dict[str, RefArray] = {}
    for tag, ref in gr.members:
        if tag != DFTAG_VG or ctx.table.get(tag, ref) is None:
            continue
        image = ctx.vsets.group(ref)
        if image.klass != RI_CLASS:
            continue
        name = image.name.replace("/", "_") or f"image_{ref}"
        while name in members:
            name = f"{name}_{ref}"
        array = guarded(f"/images/{name}", partial(_image, ctx, image, name, used))
        if array is not None:
            members[name] = array
    return RefGroup(_attributes(ctx, gr, used, "GR file"), members)


def _attributes(ctx: Context, group: VGroup, used: set[int], what: str) -> dict[str, Any]:
    """GR attributes: one vdata each, named by its only field."""
    out: dict[str, Any] = {}
    for tag, ref in group.members:
        if tag != DFTAG_VH or ctx.table.get(tag, ref) is None:
            continue
        vdata = ctx.vsets.vdata(ref)
        used.add(ref)
        if len(vdata.fields) != 1:
            continue
        name = vdata.fields[0].name
        out[name] = attribute_value(ctx.vsets, vdata, f"{what}: attribute {name!r}")
    return out


def _image(ctx: Context, image: VGroup, name: str, used: set[int]) -> RefArray:
    what = f"GR image {image.name!r}"
    where = f"{ctx.source.url}: {what}"
    dims, data_ref = None, None
    for tag, ref in image.members:
        if tag == DFTAG_ID:
            dims = _dimension_record(ctx, ref, where)
        elif tag in (DFTAG_RI, DFTAG_CI) and data_ref is None:
            data_ref = (tag, ref)
    if dims is None:
        raise ScanError(f"{where}: no image dimension record (tag 300)")
    width, height, dtype, ncomps, interlace, comp_tag = dims
    if comp_tag:
        raise UnsupportedFeatureError(
            f"{where}: compressed the old raster way (compression tag {comp_tag}), not supported"
        )
    shape: tuple[int, ...]
    names: tuple[str, ...]
    if interlace == 0:
        shape, names = (height, width, ncomps), ("y", "x", "component")
    elif interlace == 1:
        shape, names = (height, ncomps, width), ("y", "component", "x")
    else:
        shape, names = (ncomps, height, width), ("component", "y", "x")
    attrs = _attributes(ctx, image, used, what)
    storage = None
    if data_ref is not None and ctx.table.get(*data_ref) is not None:
        dd = ctx.table.find(*data_ref, what)
        storage = resolve(ctx.table, ctx.source, dd, f"{what}: data")
    if ncomps == 1:  # one component: a plain 2-D image
        shape = tuple(s for s, n in zip(shape, names, strict=True) if n != "component")
        names = ("y", "x")
    if isinstance(storage, Chunked):
        layout = _chunked_image(ctx, storage, shape, dtype, ncomps, where)
    else:
        layout = layout_of(ctx, storage, shape, dtype, what)
    complete = layout.manifest.count_written() == layout.manifest.nchunks
    fill_value = None if complete else _missing_fill(storage, attrs.get("FillValue"), dtype)
    attrs["hdf4_interlace"] = INTERLACES.get(interlace, str(interlace))
    meta = ArrayMeta(
        shape=shape,
        chunks=layout.chunks,
        dtype=dtype,
        fill_value=fill_value,
        codecs=layout.codecs,
        attributes=attrs,
        dimension_names=tuple(f"{name}_{n}" for n in names),
    )
    return RefArray(meta, layout.manifest)


def _chunked_image(
    ctx: Context,
    storage: Chunked,
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    ncomps: int,
    where: str,
) -> Layout:
    """A chunked GR image, decoded and held in the reference set.

    HDF4 chunks a GR image as a (width, height) array whose bytes, in C order, are the
    image's pixels row by row: its chunks are no boxes of the image, so they cannot be
    referenced as Zarr chunks.
    """
    nbytes = math.prod(shape) * dtype.itemsize
    if ncomps != 1 or len(storage.shape) != 2 or nbytes > INLINE_LIMIT:
        raise UnsupportedFeatureError(
            f"{where}: a chunked GR image ({ncomps} components, {nbytes} bytes) cannot be "
            f"referenced (HDF4's chunks are no boxes of the image); refzarr inlines only "
            f"one-component images of at most {INLINE_LIMIT} bytes"
        )
    stored = layout_of(ctx, storage, storage.shape, dtype, where)
    fill = storage.fill if len(storage.fill) == dtype.itemsize else bytes(dtype.itemsize)
    meta = ArrayMeta(
        shape=storage.shape,
        chunks=stored.chunks,
        dtype=dtype,
        fill_value=np.frombuffer(fill, dtype=dtype)[0],
        codecs=stored.codecs,
    )
    values = decode_whole(meta, _stored_chunks(ctx, stored), where)
    data = np.ascontiguousarray(values).reshape(shape).tobytes()
    return Layout(whole(shape), inlined_manifest((1,) * len(shape), {(0,) * len(shape): data}), [])


def _stored_chunks(ctx: Context, layout: Layout) -> list[bytes | None]:
    manifest = layout.manifest
    out: list[bytes | None] = []
    inlined = manifest.inlined
    columns = zip(
        manifest.path_id.reshape(-1).tolist(),
        manifest.offset.reshape(-1).tolist(),
        manifest.length.reshape(-1).tolist(),
        strict=True,
    )
    for k, (pid, offset, length) in enumerate(columns):
        if pid == INLINED:
            index = tuple(int(i) for i in np.unravel_index(k, manifest.grid_shape))
            out.append(inlined[index])
        else:
            out.append(ctx.source.read_range(offset, length, "chunk") if pid >= 0 else None)
    return out


def _missing_fill(storage: Any, declared: Any, dtype: np.dtype[Any]) -> Any:
    """What HDF4 reads where an image has no data: the chunk header's fill, the
    ``FillValue`` attribute, else zeros."""
    if isinstance(storage, Chunked) and len(storage.fill) == dtype.itemsize:
        return np.frombuffer(storage.fill, dtype=dtype)[0]
    if isinstance(declared, int | float):
        return declared
    return 0


def _dimension_record(ctx: Context, ref: int, where: str) -> tuple[Any, ...]:
    dd = ctx.table.find(DFTAG_ID, ref, f"{where}: dimension record")
    raw = ctx.source.read_range(dd.offset, dd.length, f"{where}: dimension record")
    try:
        width, height, nt_tag, nt_ref, ncomps, interlace, comp_tag, _ = struct.unpack_from(
            ">iiHHhhHH", raw
        )
    except struct.error as exc:
        raise ScanError(f"{where}: damaged image dimension record: {exc}") from exc
    nt = ctx.table.find(nt_tag, nt_ref, f"{where}: number type")
    record = ctx.source.read_range(nt.offset, nt.length, f"{where}: number type")
    dtype = nt_record_dtype(record, where)
    if width < 0 or height < 0 or ncomps < 1:
        raise ScanError(f"{where}: image of {width} x {height} x {ncomps}")
    return width, height, dtype, ncomps, interlace, comp_tag
