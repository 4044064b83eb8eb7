"""DMR++ test kit: a minimal sidecar writer for HDF5 files the tests make, the comparison of a
sidecar's scan with the HDF5 scan of its data file (every difference, one line each), and the
check of values through refzarr's store and through fsspec + zarr on JSON and Parquet."""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import zarr

import refzarr
from corpus import corpus_files
from refzarr import RefArray, RefGroup
from refzarr.model.attr_types import TYPES_ATTR
from roundtrip import open_zarr_group

__all__ = [
    "CORPUS_SIDECARS",
    "DAP",
    "DMRPP",
    "assert_values_match_h5",
    "differences",
    "h5_values",
    "write_sidecar",
]

DAP = "http://xml.opendap.org/ns/DAP/4.0#"
DMRPP = "http://xml.opendap.org/dap/dmrpp/1.0.0#"
CORPUS_SIDECARS = corpus_files("dmrpp", ".dmrpp")

ET.register_namespace("", DAP)
ET.register_namespace("dmrpp", DMRPP)


# -- comparing two scans ----------------------------------------------------------------------


def differences(dmrpp: RefGroup, hdf5: RefGroup) -> list[str]:
    """Every difference between the two groups, ``"<path>: <what>: dmrpp=... hdf5=..."``."""
    out: list[str] = []
    groups_d, groups_h = dict(dmrpp.groups()), dict(hdf5.groups())
    _sets(out, "groups", set(groups_d), set(groups_h))
    for path in sorted(set(groups_d) & set(groups_h)):
        _attrs(out, path or "/", groups_d[path].attributes, groups_h[path].attributes)
    arrays_d, arrays_h = dict(dmrpp.arrays()), dict(hdf5.arrays())
    _sets(out, "arrays", set(arrays_d), set(arrays_h))
    for path in sorted(set(arrays_d) & set(arrays_h)):
        out.extend(_array(path, arrays_d[path], arrays_h[path]))
    return out


def _sets(out: list[str], what: str, dmrpp: set[str], hdf5: set[str]) -> None:
    if dmrpp != hdf5:
        out.append(f"{what}: only dmrpp={sorted(dmrpp - hdf5)} only hdf5={sorted(hdf5 - dmrpp)}")


def _without_unlimited(value: Any) -> Any:
    """``_nczarr_attr`` without its ``unlimited`` entry: a sidecar does not say which
    dimensions are unlimited (HDF5's maximum shape is not in it). Holding nothing else, it
    reads as absent: without types, the masking rules agree when no fill value is default."""
    if not isinstance(value, Mapping):
        return value
    rest = {k: v for k, v in value.items() if k != "unlimited"}
    return "<absent>" if rest == {"types": {}} and "unlimited" in value else rest


def _attrs(out: list[str], path: str, dmrpp: Any, hdf5: Any) -> None:
    for name in sorted(set(dmrpp) | set(hdf5)):
        a, b = dmrpp.get(name, "<absent>"), hdf5.get(name, "<absent>")
        if name == TYPES_ATTR:
            a, b = _without_unlimited(a), _without_unlimited(b)
        if a != b or _types(a) != _types(b):
            out.append(f"{path}: attribute {name!r}: dmrpp={a!r} hdf5={b!r}")


def _types(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_types(v) for v in value)
    return type(value)


def _array(path: str, dmrpp: RefArray, hdf5: RefArray) -> Iterator[str]:
    a, b = dmrpp.meta, hdf5.meta
    for field in ("shape", "chunks", "dtype", "codecs", "dimension_names"):
        x, y = getattr(a, field), getattr(b, field)
        if field == "codecs":  # sidecars do not say whether a scalar string is NULLTERM
            y = tuple(c for c in y if c.get("id") != "refzarr_hdf5_nullterm")
        if x != y:
            yield f"{path}: {field}: dmrpp={x!r} hdf5={y!r}"
    if not _same_fill(a.fill_value, b.fill_value):
        yield f"{path}: fill_value: dmrpp={a.fill_value!r} hdf5={b.fill_value!r}"
    out: list[str] = []
    _attrs(out, path, a.attributes, b.attributes)
    yield from out
    if a.chunks == b.chunks and dmrpp.manifest != hdf5.manifest:
        yield f"{path}: manifest: {_first_chunk_difference(dmrpp, hdf5)}"


def _same_fill(x: Any, y: Any) -> bool:
    if x is None or y is None:
        return x is y
    ax, ay = np.asarray(x), np.asarray(y)
    return ax.dtype == ay.dtype and ax.tobytes() == ay.tobytes()


def _first_chunk_difference(dmrpp: RefArray, hdf5: RefArray) -> str:
    for index in np.ndindex(*hdf5.manifest.grid_shape):
        x, y = dmrpp.manifest[index], hdf5.manifest[index]
        if x != y:
            return f"chunk {index}: dmrpp={_short(x)} hdf5={_short(y)}"
    return "paths differ"


def _short(entry: Any) -> str:
    return f"<{len(entry)} bytes inlined>" if isinstance(entry, bytes) else repr(entry)


# -- values -----------------------------------------------------------------------------------


def h5_values(ds: h5py.Dataset) -> np.ndarray:
    """What h5py reads, vlen strings as str objects (what ``vlen-utf8`` gives back)."""
    values = np.asarray(ds[()])
    if values.dtype.kind == "O":
        flat = [v.decode() if isinstance(v, bytes) else v for v in values.ravel()]
        return np.array(flat, dtype=object).reshape(values.shape)
    return values


def assert_values_match_h5(
    group: RefGroup, h5_path: Path, tmp_path: Path, names: Callable[[str], str] = str
) -> int:
    """Every array of ``group`` reads as h5py reads its dataset (``names(path)``), through
    refzarr's store and through fsspec + zarr on our JSON and Parquet; the count compared."""
    json_path, parquet_path = tmp_path / "refs.json", tmp_path / "refs.parq"
    refzarr.write(group, json_path)
    refzarr.write(group, parquet_path)
    roots = {
        "refzarr": zarr.open_group(refzarr.ReferenceStore(group), mode="r", zarr_format=2),
        "json": open_zarr_group(json_path),
        "parquet": open_zarr_group(parquet_path),
    }
    count = 0
    with h5py.File(h5_path, "r") as f:
        for path, _ in group.arrays():
            expected = h5_values(f[names(path)])
            for how, root in roots.items():
                array = root[path]
                assert isinstance(array, zarr.Array)
                got = np.asarray(array[...])
                if expected.dtype.kind == "O":  # zarr gives vlen-utf8 as str, StringDType
                    got = got.astype(object)
                _assert_same(got, expected, f"{how} {path}")
                count += 1
    return count


def _assert_same(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    if expected.dtype.names is not None and got.dtype != expected.dtype:
        # Zarr v2 cannot give field offsets: padding comes back as unnamed void fields
        assert got.dtype.itemsize == expected.dtype.itemsize, what
        for name in expected.dtype.names:
            assert got.dtype[name] == expected.dtype[name], f"{what}.{name}"
            np.testing.assert_array_equal(got[name], expected[name], strict=True, err_msg=what)
        return
    assert got.dtype == expected.dtype, f"{what}: {got.dtype} != {expected.dtype}"
    np.testing.assert_array_equal(got, expected, strict=True, err_msg=what)


# -- a minimal sidecar writer -----------------------------------------------------------------

_DAP_TYPES = {
    "u1": "Byte",
    "i1": "Int8",
    "i2": "Int16",
    "u2": "UInt16",
    "i4": "Int32",
    "u4": "UInt32",
    "i8": "Int64",
    "u8": "UInt64",
    "f4": "Float32",
    "f8": "Float64",
}
_FILTERS = {1: "deflate", 2: "shuffle", 3: "fletcher32", 4: "szip", 32001: "blosc"}
_SKIPPED_ATTRS = {"DIMENSION_LIST", "REFERENCE_LIST"}


def write_sidecar(
    h5_path: Path, sidecar: Path | None = None, *, href: str = "data/x.h5", fill_digits: int = 17
) -> Path:
    """Write a DMR++ sidecar of ``h5_path`` (default: beside it, ``.dmrpp`` added) as
    ``build_dmrpp`` would: chunks, filters, byte order, fill values (``fill_digits``
    significant digits for floats; build_dmrpp writes 6), compact data, vlen strings."""
    sidecar = sidecar or h5_path.with_name(h5_path.name + ".dmrpp")
    root = ET.Element(f"{{{DAP}}}Dataset", {"name": h5_path.name, f"{{{DMRPP}}}href": href})
    root.set("dapVersion", "4.0")
    root.set(f"{{{DMRPP}}}version", "3.21.1")
    with h5py.File(h5_path, "r") as f:
        _group(root, f, fill_digits)
    ET.ElementTree(root).write(sidecar, xml_declaration=True, encoding="utf-8")
    return sidecar


def _group(element: ET.Element, group: h5py.Group, digits: int) -> None:
    for name, item in group.items():
        if isinstance(item, h5py.Dataset) and item.is_scale:
            ET.SubElement(
                element, f"{{{DAP}}}Dimension", {"name": name, "size": str(item.shape[0])}
            )
    for name, value in group.attrs.items():
        _attribute(element, name, value)
    for name, item in group.items():
        if isinstance(item, h5py.Group):
            _group(ET.SubElement(element, f"{{{DAP}}}Group", {"name": name}), item, digits)
        else:
            _dataset(element, name, item, digits)


def _dataset(parent: ET.Element, name: str, ds: h5py.Dataset, digits: int) -> None:
    dtype = ds.dtype
    vlen = (
        h5py.check_string_dtype(dtype) is not None and h5py.check_string_dtype(dtype).length is None
    )
    if dtype.names:
        kind = "Structure"
    else:
        kind = "String" if dtype.kind in "SO" else _DAP_TYPES[dtype.str[1:]]
    var = ET.SubElement(parent, f"{{{DAP}}}{kind}", {"name": name})
    for field in dtype.names or ():
        member = dtype.fields[field][0]
        ET.SubElement(var, f"{{{DAP}}}{_DAP_TYPES[member.str[1:]]}", {"name": field})
    for axis, size in enumerate(ds.shape):
        scales = list(ds.dims[axis].values()) if not ds.is_scale else []
        if ds.is_scale and axis == 0:
            ET.SubElement(var, f"{{{DAP}}}Dim", {"name": ds.name})
        elif scales:
            ET.SubElement(var, f"{{{DAP}}}Dim", {"name": scales[0].name})
        else:
            ET.SubElement(var, f"{{{DAP}}}Dim", {"size": str(size)})
    for attr, value in ds.attrs.items():
        _attribute(var, attr, value)
    if vlen:
        vlsa = ET.SubElement(var, f"{{{DMRPP}}}vlsa")
        for value in np.asarray(ds[()], dtype=object).ravel():
            ET.SubElement(vlsa, f"{{{DAP}}}v").text = value.decode() if value else ""
        return
    _storage(var, ds, digits)
    if kind == "String" and ds.shape:
        ET.SubElement(
            var,
            f"{{{DMRPP}}}FixedLengthStringArray",
            {"string_length": str(dtype.itemsize), "pad": "null_pad"},
        )


def _storage(var: ET.Element, ds: h5py.Dataset, digits: int) -> None:
    plist = ds.id.get_create_plist()
    attrs = {}
    filters = [plist.get_filter(i) for i in range(plist.get_nfilters())]
    if filters:
        attrs["compressionType"] = " ".join(_FILTERS.get(f[0], str(f[0])) for f in filters)
        levels = [str(f[2][0]) for f in filters if f[0] == 1]
        if levels:
            attrs["deflateLevel"] = " ".join(levels)
    if plist.fill_value_defined() != h5py.h5d.FILL_VALUE_UNDEFINED:
        attrs["fillValue"] = _fill_text(ds, digits)
    if ds.dtype.kind in "iuf" and ds.dtype.itemsize > 1:
        attrs["byteOrder"] = "BE" if ds.dtype.byteorder == ">" else "LE"
    if ds.dtype.names:
        fields = [ds.dtype.fields[n] for n in ds.dtype.names]
        attrs["byteOrder"] = "BE" if fields[0][0].byteorder == ">" else "LE"
        ends = [f[1] for f in fields[1:]] + [ds.dtype.itemsize]
        attrs["structOffset"] = " ".join(map(str, ends))
    chunks = ET.SubElement(var, f"{{{DMRPP}}}chunks", attrs)
    layout = plist.get_layout()
    if layout == h5py.h5d.COMPACT:
        data = np.asarray(ds[()]).astype(ds.dtype).tobytes()
        ET.SubElement(var, f"{{{DMRPP}}}compact").text = base64.b64encode(data).decode()
    elif layout == h5py.h5d.CONTIGUOUS:
        if ds.id.get_offset() is not None:
            ET.SubElement(
                chunks,
                f"{{{DMRPP}}}chunk",
                {"offset": str(ds.id.get_offset()), "nBytes": str(ds.id.get_storage_size())},
            )
    else:
        sizes = ET.SubElement(chunks, f"{{{DMRPP}}}chunkDimensionSizes")
        sizes.text = " ".join(str(c) for c in ds.chunks)
        for k in range(ds.id.get_num_chunks()):
            info = ds.id.get_chunk_info(k)
            chunk = {
                "offset": str(info.byte_offset),
                "nBytes": str(info.size),
                "chunkPositionInArray": "[" + ",".join(str(i) for i in info.chunk_offset) + "]",
            }
            if info.filter_mask:
                chunk["fm"] = str(info.filter_mask)
            ET.SubElement(chunks, f"{{{DMRPP}}}chunk", chunk)


def _fill_text(ds: h5py.Dataset, digits: int) -> str:
    value = np.asarray(ds.fillvalue)
    if value.dtype.kind == "S":
        return value.tobytes().rstrip(b"\0").decode()
    if value.dtype.names:
        return "0"  # what build_dmrpp writes for HDF5's default fill of a compound
    if value.dtype.kind == "f":
        return f"{float(value):.{digits}g}"
    return str(value.item())


def _attribute(element: ET.Element, name: str, value: Any) -> None:
    if name in _SKIPPED_ATTRS:
        return
    values = np.asarray(value)
    kind = "String" if values.dtype.kind in "SUO" else _DAP_TYPES[values.dtype.str[1:]]
    attr = ET.SubElement(element, f"{{{DAP}}}Attribute", {"name": name, "type": kind})
    for item in values.ravel():
        text = (
            item.decode()
            if isinstance(item, bytes)
            else repr(item.item())
            if kind.startswith("Float")
            else str(item)
        )
        ET.SubElement(attr, f"{{{DAP}}}Value").text = text
