"""Vdata tables under ``vdata/`` read back as pyhdf's VS interface reads them: through refzarr's
array reader (structured dtypes with sub-array fields, which zarr-python cannot open) and,
for tables without such fields, through zarr on refzarr's store and on JSON."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyhdf.hdfext
import pyhdf.VS  # HDF.vstart needs pyhdf.VS imported
import pytest
from h4kit import refzarr_reader, zarr_reader
from pyhdf.HDF import HC, HDF

import refzarr
from corpus import CORPUS
from refzarr.io.fetch import RangeReader
from refzarr.reader.array import ArrayReader


def _pyhdf_tables(path: Path) -> dict[str, tuple[list[str], list[list[Any]]]]:
    """Every user vdata (not the SD interface's own) as pyhdf reads it: fields, records."""
    hdf = HDF(os.fspath(path))
    vs = hdf.vstart()
    try:
        found = {}
        for name, klass, ref, nrecs, *_ in vs.vdatainfo():
            if klass.startswith(("DimVal", "Attr0.0", "Var0.0", "CoordVar")):
                continue
            vd = vs.attach(ref)
            fields = vd.inquire()[2]
            found[name] = (fields, vd.read(nrecs) if nrecs else [])
            vd.detach()
        return found
    finally:
        vs.end()
        hdf.close()


def _write_tables(path: Path) -> None:
    hdf = HDF(os.fspath(path), HC.WRITE | HC.CREATE)
    vs = hdf.vstart()
    table = vs.create(
        "mixed",
        (("i", HC.INT16, 1), ("xyz", HC.FLOAT64, 3), ("name", HC.CHAR8, 6), ("u", HC.UINT32, 1)),
    )
    table.write([[1, [1.0, 2.0, 3.0], "abc", 7], [2, [4.0, 5.0, 6.0], "defghi", 8]])
    table.detach()
    flat = vs.create("flat", (("a", HC.INT32, 1), ("b", HC.FLOAT32, 1)))
    flat.write([[k, k / 4] for k in range(50)])
    flat.detach()
    by_field = vs.create("not_interlaced", (("a", HC.INT16, 1), ("b", HC.FLOAT64, 2)))
    assert pyhdf.hdfext.VSsetinterlace(by_field._id, 1) == 0  # NO_INTERLACE: field by field
    by_field.write([[k, [k / 2, k / 3]] for k in range(6)])
    by_field.detach()
    vs.end()
    hdf.close()


@pytest.fixture(scope="module", params=["hdifftst1", "generated"])
def tables(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    if request.param == "hdifftst1":
        path = CORPUS / "hdf4" / "hdifftst1.hdf"
        if not path.exists():
            pytest.skip("corpus absent")
    else:
        path = tmp_path_factory.mktemp("vdata") / "tables.hdf"
        _write_tables(path)
    return path, refzarr.scan(path)


def _expected_field(records: list[list[Any]], k: int, dtype: np.dtype[Any]) -> np.ndarray:
    column = [record[k] for record in records]
    if dtype.kind == "S":
        as_bytes = [
            bytes(v) if isinstance(v, list) else (v.encode() if isinstance(v, str) else bytes([v]))
            for v in column
        ]
        return np.array(as_bytes, dtype=dtype)
    return np.asarray(column, dtype=dtype.base)


def test_tables_match_pyhdf(tables: Any, tmp_path: Path) -> None:
    path, group = tables
    expected = _pyhdf_tables(path)
    assert sorted(group["vdata"].members) == sorted(expected)
    if "not_interlaced" in expected:  # records stored field by field: decoded and inlined
        assert group["vdata/not_interlaced"].manifest.path_id.tolist() == [-2]
    reader = RangeReader()
    json_path = tmp_path / "refs.json"
    refzarr.write(group, json_path)
    for name, (fields, records) in expected.items():
        array = group[f"vdata/{name}"]
        assert isinstance(array, refzarr.RefArray)
        dtype = array.meta.dtype
        assert list(dtype.names or ()) == fields
        readers = [ArrayReader(array, f"vdata/{name}", reader).read()]
        if not any(dtype[f].shape for f in fields):  # zarr-python opens no sub-array field
            readers += [
                refzarr_reader(group)(f"vdata/{name}"),
                zarr_reader(json_path)(f"vdata/{name}"),
            ]
        for got in readers:
            assert got.shape == (len(records),)
            for k, field in enumerate(fields):
                want = _expected_field(records, k, dtype[field])
                np.testing.assert_array_equal(got[field], want, err_msg=f"{name}.{field}")
