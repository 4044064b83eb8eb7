"""The kit shared by the HDF5 scanner tests: write a file, scan it, read back, compare with h5py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import zarr
from h5py import h5s, h5t

import refzarr
from corpus import CORPUS
from refzarr import RefArray
from refzarr.model import ArrayMeta
from refzarr.scan import ScannedGroup
from refzarr.scan.hdf5.dims import is_dimension_only
from roundtrip import open_zarr_group

__all__ = [
    "Writer",
    "array",
    "assert_array_matches_h5",
    "assert_matches_h5",
    "roundtrip",
    "source_path",
    "write_h5",
]

Writer = Callable[[h5py.File], None]


"""The real-file corpus (read in place)."""

CORPUS_FILES = sorted(
    path
    for kind in ("hdf5", "netcdf4")
    if (CORPUS / kind).is_dir()
    for path in (CORPUS / kind).iterdir()
    if path.is_file()
)
"""Every HDF5 and netCDF4 file of the corpus."""


def corpus_h5_files() -> Iterator[h5py.File]:
    """Each corpus file h5py can open, open read-only while the caller looks at it."""
    for path in CORPUS_FILES:
        try:
            f = h5py.File(path, "r")
        except OSError:
            continue
        with f:
            yield f


def write_h5(path: Path, writer: Writer, **kwargs: Any) -> Path:
    """An HDF5 file written by ``writer`` (h5py.File keyword arguments passed on)."""
    with h5py.File(path, "w", **kwargs) as f:
        writer(f)
    return path


def assert_matches_h5(got: np.ndarray, expected: np.ndarray, path: str) -> None:
    """Equal dtypes and identical values; a padded compound's padding is Zarr v2's own fields."""
    if expected.dtype.names is not None and got.dtype != expected.dtype:
        # Zarr v2 cannot give field offsets: padding becomes unnamed void fields (f1, ...)
        assert got.dtype.itemsize == expected.dtype.itemsize, path
        for name in expected.dtype.names:
            assert got.dtype[name] == expected.dtype[name], f"{path}.{name}"
            np.testing.assert_array_equal(got[name], expected[name], strict=True, err_msg=path)
        return
    assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype} != {expected.dtype}"
    np.testing.assert_array_equal(got, expected, strict=True, err_msg=path)


def source_path(f: h5py.File, path: str) -> str:
    """The HDF5 path of an array: netCDF stores variable ``x`` as ``_nc4_non_coord_x`` when
    ``x`` is also a dimension it is not the coordinate of."""
    item = f.get(path)
    if isinstance(item, h5py.Dataset) and not is_dimension_only(item):
        return path
    parent, _, name = path.rpartition("/")
    return f"{parent}/_nc4_non_coord_{name}" if parent else f"_nc4_non_coord_{name}"


def roundtrip(h5_path: Path, tmp_path: Path, **options: Any) -> ScannedGroup:
    """Scan, write JSON, read every array through fsspec + zarr, compare with h5py."""
    group = refzarr.scan(str(h5_path), **options)
    assert isinstance(group, ScannedGroup)
    json_path = tmp_path / f"{h5_path.stem}.json"
    refzarr.write(group, json_path)
    root = open_zarr_group(json_path)
    with h5py.File(h5_path, "r") as f:
        for path, arr in group.arrays():
            array = root[path]
            assert isinstance(array, zarr.Array)
            assert_array_matches_h5(array[...], f[source_path(f, path)], arr.meta, path)
    return group


def array(group: refzarr.RefGroup, path: str) -> RefArray:
    node = group[path]
    assert isinstance(node, RefArray)
    return node


# -- the kit: compare what zarr reads with what h5py reads, object arrays included --------------


def _expected(ds: h5py.Dataset, codec: str | None) -> np.ndarray:
    """What h5py reads, in the form the codec gives back (str for vlen-utf8, paths for refs)."""
    if ds.id.get_type().get_class() == h5t.OPAQUE:
        return _read_opaque(ds)
    # ds[...]: a scalar read with ds[()] is a numpy scalar, always in native byte order
    values = np.asarray(ds[...] if ds.shape == () else ds[()], dtype=object if codec else None)
    if h5py.check_ref_dtype(ds.dtype) is h5py.RegionReference:
        return values  # compared by what the selections select: see _assert_regions_select
    if h5py.check_ref_dtype(ds.dtype) is not None:
        names = [h5py.h5r.get_name(r, ds.id) if r else b"" for r in values.ravel()]
        return np.array([n.decode() for n in names], dtype=object).reshape(values.shape)
    if codec == "vlen-utf8":
        return np.array([v.decode() for v in values.ravel()], dtype=object).reshape(values.shape)
    return values


def _read_opaque(ds: h5py.Dataset) -> np.ndarray:
    """An opaque dataset's bytes: h5py's own reading fails for a tagged opaque type (it reads
    through an untagged one, and HDF5 converts between opaque types only when tags match)."""
    out = np.zeros(ds.shape, dtype=ds.dtype)  # zeros where HDF5 writes nothing, as h5py's
    ds.id.read(h5s.ALL, h5s.ALL, out, mtype=ds.id.get_type())
    return out


def assert_array_matches_h5(got: Any, ds: h5py.Dataset, meta: ArrayMeta, path: str) -> None:
    """What zarr read (``got``, of an array described by ``meta``) equals what h5py reads.

    Exact, with equal dtypes, except object arrays (vlen strings, references): equal values of
    equal Python types (``str`` for vlen-utf8, ``bytes`` for vlen-bytes), dtypes necessarily
    differ (zarr: StringDType / object; h5py: object holding bytes or references).
    """
    codec = meta.codecs[0]["id"] if meta.dtype.kind == "O" else None
    expected = _expected(ds, codec)
    if codec is None:
        assert_matches_h5(np.asarray(got), expected, path)
        return
    if codec == "vlen-utf8" and expected.ndim:
        assert isinstance(got.dtype, np.dtypes.StringDType), path
    got = np.asarray(got, dtype=object)
    if h5py.check_ref_dtype(ds.dtype) is h5py.RegionReference:
        _assert_regions_select(got, expected, ds, path)
        return
    assert got.shape == expected.shape, path
    assert got.ravel().tolist() == expected.ravel().tolist(), path
    assert all(type(a) is type(b) for a, b in zip(got.ravel(), expected.ravel(), strict=True)), path


def _assert_regions_select(got: np.ndarray, refs: np.ndarray, ds: h5py.Dataset, path: str) -> None:
    """Each region text selects, in its target, exactly the values h5py's reference selects."""
    assert got.shape == refs.shape, path
    for text, ref in zip(got.ravel(), refs.ravel(), strict=True):
        if not ref:
            assert text == "", path
            continue
        target_path, _, selection = text.partition(" ")
        target = ds.file[target_path]
        assert target == ds.file[ref], path
        mask = _region_mask(selection, target.shape)
        expected = np.sort(np.asarray(target[ref]).ravel())
        np.testing.assert_array_equal(np.sort(target[()][mask]), expected, err_msg=path)


def _region_mask(selection: str, shape: tuple[int, ...]) -> np.ndarray:
    """The elements an h5dump-style selection (``{(0,1)-(2,3), (5,5)}``, ``{ALL}``) names."""
    mask = np.zeros(shape, dtype=bool)
    body = selection.removeprefix("{").removesuffix("}")
    if body == "ALL":
        mask[...] = True
        return mask
    for item in filter(None, (part.strip() for part in body.replace("), (", ");(").split(";"))):
        corners = [tuple(int(c) for c in p.strip("()").split(",")) for p in item.split(")-(")]
        low, high = corners[0], corners[-1]
        mask[tuple(slice(a, b + 1) for a, b in zip(low, high, strict=True))] = True
    return mask
