"""Names that are not UTF-8: links, attributes and dimension scales.

HDF5 stores names as bytes; h5py gives one that is not UTF-8 as bytes, netCDF4-python cannot
open such a file. A Zarr key, attribute name or dimension name is text, so each such name is
an `UnsupportedFeatureError` naming the file, the group or object and the name's bytes (was
a TypeError reported as "reading the HDF5 structure failed", or, for a scale, a SystemError
out of h5py's callback); ``on_unsupported="skip"`` leaves out what it names and lists it.
Old-style groups (a symbol table, listed by h5py) and new-style ones (link messages read by
refzarr, compact and dense) alike.
"""

from __future__ import annotations

import re
from pathlib import Path

import h5py
import numpy as np
import pytest

import refzarr
from refzarr.errors import UnsupportedFeatureError

STYLES = {
    "symbol-table": {"libver": "earliest"},
    "compact": {"libver": "latest"},
    "dense": {"libver": "latest"},
}
"""How the groups of a test file keep their links (dense: past 8 links, the default)."""

BAD = b"caf\xe9"
"""A name in Latin-1: not UTF-8."""


def _write(path: Path, style: str, fill: dict[bytes | str, str]) -> Path:
    """A file whose root holds ``fill`` (name -> ``"dataset"``, ``"group"``, ``"soft"``),
    ``ok`` and, in the dense style, 10 more datasets."""
    with h5py.File(path, "w", **STYLES[style]) as f:  # type: ignore[arg-type]
        f.create_dataset("ok", data=np.arange(3.0))
        for k in range(10 if style == "dense" else 0):
            f.create_dataset(f"pad{k}", data=np.arange(2))
        for name, kind in fill.items():
            if kind == "dataset":
                f.create_dataset(name, data=np.arange(4))
            elif kind == "group":
                f.create_group(name).create_dataset("inside", data=np.arange(2))
            else:
                f[name] = h5py.SoftLink("/ok")
    return path


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("kind", ["dataset", "group", "soft"])
def test_a_link_name_that_is_not_utf8_is_named(tmp_path: Path, style: str, kind: str) -> None:
    path = _write(tmp_path / "f.h5", style, {BAD: kind, "zz": "dataset"})
    with h5py.File(path, "r") as f:
        assert BAD in list(f)  # h5py lists it as bytes
    expected = (
        f"{re.escape(str(path))}: group '/': link name b'caf\\\\xe9' is not UTF-8 text .*"
        "rename the link .* on_unsupported='skip'"
    )
    with pytest.raises(UnsupportedFeatureError, match=expected):
        refzarr.scan(str(path))


@pytest.mark.parametrize("style", STYLES)
def test_skipping_leaves_out_only_the_links_that_are_not_utf8(tmp_path: Path, style: str) -> None:
    bad = _write(tmp_path / "bad.h5", style, {BAD: "dataset", b"gr\xfcn": "group", "zz": "soft"})
    good = _write(tmp_path / "good.h5", style, {"zz": "soft"})
    got = refzarr.scan(str(bad), on_unsupported="skip")
    want = refzarr.scan(str(good))
    assert list(got.members) == list(want.members)  # the others, in h5py's order
    assert {item.path for item in got.skipped} == {"/caf\\xe9", "/gr\\xfcn"}
    assert all("not UTF-8" in item.reason for item in got.skipped)


@pytest.mark.parametrize("style", ["symbol-table", "compact"])
def test_an_attribute_name_that_is_not_utf8_is_named(tmp_path: Path, style: str) -> None:
    path = tmp_path / "f.h5"
    with h5py.File(path, "w", **STYLES[style]) as f:  # type: ignore[arg-type]
        ds = f.create_dataset("v", data=np.arange(3))
        ds.attrs[BAD] = 1
        ds.attrs["units"] = "m"
        f.attrs[b"\xff"] = "x"
        f.attrs["title"] = "t"
    expected = r"dataset '/v': attribute name b'caf\\xe9' is not UTF-8 .* rewrite the attribute"
    with pytest.raises(UnsupportedFeatureError, match=expected):  # members come first
        refzarr.scan(str(path))
    got = refzarr.scan(str(path), on_unsupported="skip")
    assert got.attributes == {"title": "t"}
    assert got.members["v"].meta.attributes == {"units": "m"}  # type: ignore[union-attr]
    assert {item.path for item in got.skipped} == {"/@\\xff", "/v@caf\\xe9"}


@pytest.mark.parametrize("style", ["symbol-table", "compact"])
def test_a_dimension_scale_whose_name_is_not_utf8_is_named(tmp_path: Path, style: str) -> None:
    """Its users are refused by name (h5py's scale callback turned the decoding error into
    a SystemError before)."""
    path = tmp_path / "f.h5"
    with h5py.File(path, "w", **STYLES[style]) as f:  # type: ignore[arg-type]
        x = f.create_dataset(b"\xe9x", data=np.arange(3.0))
        x.make_scale()
        f.create_dataset("v", data=np.arange(3)).dims[0].attach_scale(x)
        f.create_dataset("w", data=np.arange(5))
    expected = (
        r"dataset '/v': dimension scale name b'\\xe9x' is not UTF-8 text .*"
        "leave this dataset out"
    )
    with pytest.raises(UnsupportedFeatureError, match=expected):
        refzarr.scan(str(path))
    got = refzarr.scan(str(path), on_unsupported="skip")
    assert list(got.members) == ["w"]
    assert {item.path for item in got.skipped} == {"/v", "/\\xe9x"}


def test_a_netcdf_dimension_whose_name_is_not_utf8_is_named(tmp_path: Path) -> None:
    """A coordinate variable of two dimensions names its axes through netCDF's dimension
    ids (``_Netcdf4Coordinates``), not through attached scales."""
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        for dimid, name in enumerate((b"\xe9x", b"y")):
            dim = f.create_dataset(name, data=np.arange(2.0))
            dim.make_scale()
            dim.attrs["_Netcdf4Dimid"] = np.int32(dimid)
        coord = f.create_dataset("c", data=np.zeros((2, 2)))
        coord.make_scale()
        coord.attrs["_Netcdf4Coordinates"] = np.array([0, 1], dtype="i4")
    with pytest.raises(UnsupportedFeatureError, match=r"dataset '/c': dimension scale name b'"):
        refzarr.scan(str(path))


@pytest.mark.parametrize("style", ["symbol-table", "compact"])
def test_a_text_link_to_an_object_named_otherwise_is_kept(tmp_path: Path, style: str) -> None:
    """Only the name is refused: the same dataset and group under a UTF-8 soft link are
    members (HDF5 names an object by the path it was opened through)."""
    path = tmp_path / "f.h5"
    with h5py.File(path, "w", **STYLES[style]) as f:  # type: ignore[arg-type]
        f.create_dataset(BAD, data=np.arange(3))
        f.create_group(b"gr\xfcn").create_dataset("inside", data=np.arange(2))
        f.id.links.create_soft(b"alias", b"/" + BAD)
        f.id.links.create_soft(b"galias", b"/gr\xfcn")
    got = refzarr.scan(str(path), on_unsupported="skip")
    assert list(got.members) == ["alias", "galias"]
    assert list(got["galias"].members) == ["inside"]  # type: ignore[union-attr]
    assert [item.path for item in got.skipped] == ["/caf\\xe9", "/gr\\xfcn"]
