"""Variable-length string attributes are read from their global heap collections, not by
h5py one by one: HDF5 finds an attribute by walking its object header, so h5py reading n
of them cost O(n²) (12,000 took ~10 s); the values are exactly h5py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import refzarr
from refzarr.scan.hdf5.attrs import attribute_to_json

STRINGS = h5py.string_dtype()
ASCII = h5py.string_dtype("ascii")


def _write(path: Path, libver: str, count: int) -> None:
    """String attributes of every shape and character set on a dataset and the root group;
    ``count`` more on the dataset."""
    with h5py.File(path, "w", libver=libver) as f:
        x = f.create_dataset("x", data=np.arange(4))
        for obj in (f, x):
            obj.attrs["utf8"] = "héllo"
            obj.attrs["empty"] = ""
            obj.attrs.create("ascii", "abc", dtype=ASCII)
            obj.attrs.create("not_utf8", b"ab\xff", dtype=ASCII)
            obj.attrs.create("not_utf8_either", b"\xfe!", dtype=STRINGS)
            obj.attrs["vector"] = np.array(["x", "yy", ""], dtype=STRINGS)
            obj.attrs["one"] = np.array(["only"], dtype=STRINGS)
            obj.attrs["matrix"] = np.array([["a", "b"], ["c", "dé"]], dtype=STRINGS)
            obj.attrs["long"] = "a long history; " * 300
        for k in range(count):
            x.attrs[f"text_{k:04d}"] = f"value {k}" * (k % 3 + 1)


@pytest.fixture(scope="module", params=["earliest", "latest"])
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Attributes in the header (compact) or in dense storage (a fractal heap)."""
    path = tmp_path_factory.mktemp("strings") / f"{request.param}.h5"
    _write(path, request.param, 300)
    return path


def test_string_attributes_are_h5py_values(written: Path) -> None:
    group = refzarr.scan(str(written))
    with h5py.File(written, "r") as f:
        for got, obj in ((group.attributes, f), (group.members["x"].meta.attributes, f["x"])):
            expected = {name: attribute_to_json(obj.attrs[name]) for name in obj.attrs}
            assert {k: v for k, v in got.items() if not k.startswith("_")} == _frozen(expected)


def test_string_attributes_are_not_opened_one_by_one(written: Path, opened: list[bytes]) -> None:
    refzarr.scan(str(written))
    assert not [name for name in opened if name.startswith(b"text_")]
    assert len(opened) < 10


def _frozen(value: Any) -> Any:
    """JSON lists as the scanner's frozen attributes hold them (tuples)."""
    if isinstance(value, dict):
        return {k: _frozen(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value
