"""How many global heap descriptors an attribute holds, from its header message: the same
count HDF5's datatype gives (read through h5py), or None (HDF5 is then asked), for every
datatype version h5py writes; netCDF's ``DIMENSION_LIST`` and ``REFERENCE_LIST`` are
counted from the header (no attribute opened)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from refzarr.scan.hdf5.global_heap import _attribute_cells
from refzarr.scan.hdf5.headers import ObjectHeaders

REF = h5py.ref_dtype
STR = h5py.string_dtype()
PLAIN = np.dtype([("a", "<i4"), ("b", "<f8"), ("c", "S3")])
TYPES: dict[str, Any] = {
    "int": np.dtype("<i2"),
    "float": np.dtype(">f4"),
    "fixed_string": np.dtype("S5"),
    "string": STR,
    "reference": REF,
    "plain_compound": PLAIN,
    "nested_compound": np.dtype([("x", PLAIN), ("y", "<u1")]),
    "compound_of_references": np.dtype([("dataset", REF), ("dimension", "<i4")]),
    "compound_with_string": np.dtype([("a", "<i4"), ("s", STR)]),
    "compound_with_sequence": np.dtype([("a", "<i4"), ("v", h5py.vlen_dtype("<i2"))]),
    "compound_with_array": np.dtype([("a", "<i4"), ("v", "<f4", (3,))]),
    "compound_with_string_array": np.dtype([("v", STR, (2,))]),
    "sequence_of_ints": h5py.vlen_dtype("<i8"),
    "sequence_of_references": h5py.vlen_dtype(REF),
    "sequence_of_compounds": h5py.vlen_dtype(PLAIN),
    "sequence_of_strings": h5py.vlen_dtype(STR),
    "enum": h5py.enum_dtype({"a": 0, "b": 1}, basetype="u1"),
    "array": np.dtype(("<i4", (2, 2))),
}
SHAPES = {"scalar": (), "vector": (3,), "matrix": (2, 2), "empty": (0,)}


def _value(dtype: np.dtype[Any], shape: tuple[int, ...], target: Any) -> Any:
    """Zeros of ``dtype`` and ``shape``, with object fields (references, sequences, strings)
    filled so that HDF5 writes them."""
    out = np.zeros(shape, dtype=dtype)
    if dtype.hasobject:
        flat = out.reshape(-1)
        for k in range(flat.size):
            flat[k] = _item(dtype, target)
    return out


def _item(dtype: np.dtype[Any], target: Any) -> Any:
    if dtype.names:
        return tuple(_item(dtype[name], target) for name in dtype.names)
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return _value(base, shape, target) if base.hasobject else np.zeros(shape, base)
    if h5py.check_ref_dtype(dtype):
        return target
    if h5py.check_string_dtype(dtype) is not None and dtype.kind == "O":
        return "text"
    vlen = h5py.check_vlen_dtype(dtype)
    if vlen is not None:
        base = np.dtype(vlen)
        return np.array([_item(base, target) for _ in range(2)], dtype=base)
    return np.zeros((), dtype)[()]


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_header_counts_are_hdf5s(tmp_path: Path, libver: str) -> None:
    path = tmp_path / f"{libver}.h5"
    with h5py.File(path, "w", libver=libver) as f:
        target = f.create_dataset("target", data=np.arange(3)).ref
        x = f.create_dataset("x", data=np.arange(4))
        for tname, dtype in TYPES.items():
            for sname, shape in SHAPES.items():
                x.attrs.create(f"{tname}_{sname}", _value(dtype, shape, target), dtype=dtype)
        dims = f.create_dataset("dim", data=np.arange(4))
        dims.make_scale("dim")
        x.dims[0].attach_scale(dims)
    with h5py.File(path, "r") as f:
        read = lambda at, n: Path(path).read_bytes()[at : at + n]  # noqa: E731
        headers = ObjectHeaders(f, read, path.stat().st_size)
        for obj in (f["x"], f["dim"]):
            data = headers.attribute_data(obj.id)
            assert data
            for name, (known, _) in data.items():
                asked = _attribute_cells(obj.id, name)
                if known is not None:  # counted here: what HDF5 counts (0: none)
                    assert known == (asked or 0), name
                elif name.split(b"_")[0] in (b"int", b"float", b"plain", b"nested", b"reference"):
                    pytest.fail(f"{name!r} not counted from the header")
        counted = {**headers.attribute_data(f["x"].id), **headers.attribute_data(f["dim"].id)}
    for name in (b"DIMENSION_LIST", b"REFERENCE_LIST", b"compound_of_references_vector"):
        assert counted[name][0] is not None, name
    for name in (b"sequence_of_strings_vector", b"compound_with_string_scalar"):
        assert counted[name][0] is None, name  # nested: HDF5 is asked, and they are refused
