"""Round-trip test kit: compare reference sets through fsspec, zarr-python 3, xarray and h5py.

Every check goes through the other libraries' own readers (fsspec's ReferenceFileSystem,
zarr, xarray), never through refzarr, so that a bug shared by refzarr's reader and writer
cannot hide itself. Reference sets are given as dicts or as paths of written files.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import h5py
import numpy as np
import ujson
import xarray as xr
import zarr
from fsspec.implementations.reference import LazyReferenceMapper, ReferenceFileSystem
from zarr.storage import FsspecStore

from refzarr import RefArray, RefGroup, to_kerchunk

__all__ = [
    "INLINE_SMALL",
    "KerchunkCase",
    "assert_arrays_match_h5",
    "assert_groups_identical",
    "assert_raw_xarray_matches_h5",
    "assert_refs_equivalent",
    "assert_xarray_matches_netcdf",
    "chunk_keys",
    "h5_datasets",
    "kerchunk_hdf5_refs",
    "open_zarr_group",
    "reference_fs",
    "reference_options",
]

INLINE_SMALL = 64
"""kerchunk ``inline_threshold`` that inlines the small chunks of conftest's ``write_netcdf``
file."""

RefsLike = Mapping[str, Any] | str | os.PathLike[str]
"""A reference dict, or the path of a JSON (possibly compressed) or Parquet reference set."""

_COMPRESSION = {".zst": "zstd", ".zstd": "zstd", ".gz": "gzip"}


# -- kerchunk ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class KerchunkCase:
    """A netCDF file and the references kerchunk produced for it."""

    netcdf: Path
    refs: dict[str, Any]
    inline_threshold: int

    def write_json(self, path: Path) -> Path:
        """Write the references as kerchunk users do (``ujson.dump`` to a ``.json`` file)."""
        with open(path, "w", encoding="utf-8") as f:
            ujson.dump(self.refs, f)
        return path


def kerchunk_hdf5_refs(path: Path, inline_threshold: int) -> dict[str, Any]:
    """kerchunk's references for an HDF5/netCDF4 file (errors raised, not quashed)."""
    from kerchunk.hdf import SingleHdf5ToZarr

    with open(path, "rb") as f:
        translator = SingleHdf5ToZarr(
            f, url=str(path), inline_threshold=inline_threshold, error="raise"
        )
        refs: dict[str, Any] = translator.translate()
    return refs


# -- opening reference sets with other libraries ----------------------------------------------


def reference_options(refs: RefsLike) -> dict[str, Any]:
    """fsspec ``reference://`` options for a reference set whose targets are local files."""
    options: dict[str, Any] = {"remote_protocol": "file", "skip_instance_cache": True}
    if isinstance(refs, Mapping):
        options["fo"] = dict(refs)
        return options
    options["fo"] = os.fspath(refs)
    compression = _COMPRESSION.get(Path(refs).suffix)
    if compression is not None:
        options["target_options"] = {"compression": compression}
    return options


def reference_fs(refs: RefsLike) -> ReferenceFileSystem:
    """fsspec's ReferenceFileSystem over a reference set."""
    fs: ReferenceFileSystem = fsspec.filesystem("reference", **reference_options(refs))
    return fs


def open_zarr_group(refs: RefsLike, path: str = "") -> zarr.Group:
    """zarr-python 3's read-only view of the group at ``path`` of a reference set (Zarr v2).

    The store is rooted at the group itself: zarr's FsspecStore lists the members of a nested
    group of a root-level store as ``/<path>``, which ReferenceFileSystem does not know, so
    nested groups would look empty (zarr 3.1.6, fsspec 2026.9).
    """
    store = FsspecStore.from_url(
        f"reference://{path}", storage_options=reference_options(refs), read_only=True
    )
    return zarr.open_group(store, mode="r", zarr_format=2)


# -- fsspec: key by key -----------------------------------------------------------------------


def _fetch(fs: ReferenceFileSystem, key: str) -> bytes | None:
    """The bytes of ``key``, or None when the reference set does not hold it."""
    try:
        data: bytes = fs.cat_file(key)
    except (FileNotFoundError, KeyError):
        return None
    return data


def _keys(fs: ReferenceFileSystem) -> set[str]:
    """Every key a reference set holds (chunk keys only when the chunk was written)."""
    refs = fs.references
    if isinstance(refs, LazyReferenceMapper):
        return _lazy_keys(fs, refs)
    return set(refs)


def _lazy_keys(fs: ReferenceFileSystem, refs: LazyReferenceMapper) -> set[str]:
    # iterating a LazyReferenceMapper fails on nested groups (fsspec 2026.9 takes every
    # directory for an array), so the keys are enumerated from its metadata instead
    keys = set(refs.zmetadata) | {".zmetadata"}
    for key, document in refs.zmetadata.items():
        path, _, name = key.rpartition("/")
        if name == ".zarray":
            written = (k for k in chunk_keys(path, document) if _fetch(fs, k) is not None)
            keys.update(written)
    return keys


def chunk_keys(path: str, zarray: Mapping[str, Any]) -> Iterator[str]:
    """Every chunk key of the Zarr v2 array at ``path`` (written or not)."""
    grid = [math.ceil(s / c) for s, c in zip(zarray["shape"], zarray["chunks"], strict=True)]
    separator = zarray.get("dimension_separator") or "."
    prefix = f"{path}/" if path else ""
    if not grid:
        yield f"{prefix}0"
        return
    for index in itertools.product(*(range(n) for n in grid)):
        yield prefix + separator.join(map(str, index))


def _array_docs(fs: ReferenceFileSystem, keys: set[str]) -> dict[str, dict[str, Any]]:
    docs = {}
    for key in keys:
        path, _, name = key.rpartition("/")
        if name == ".zarray":
            docs[path] = json.loads(fs.cat_file(key))
    return docs


def _harmless_extra(key: str, data: bytes | None) -> bool:
    """Keys a rewritten set may add: consolidated metadata, and empty attributes."""
    name = key.rpartition("/")[2]
    return name == ".zmetadata" or (name == ".zattrs" and data is not None and not json.loads(data))


def assert_refs_equivalent(expected: RefsLike, actual: RefsLike) -> None:
    """Every key of ``expected`` returns byte-identical data from ``actual`` through fsspec.

    Metadata keys are compared byte for byte too. Chunks absent from ``expected`` (never
    written) must be absent from ``actual``; ``actual`` may add only ``.zmetadata`` and empty
    ``.zattrs`` keys.
    """
    fs_a, fs_b = reference_fs(expected), reference_fs(actual)
    keys_a = _keys(fs_a)
    for key in sorted(keys_a):
        data_a, data_b = fs_a.cat_file(key), _fetch(fs_b, key)
        assert data_b is not None, f"key {key!r} is missing from the rewritten reference set"
        assert data_a == data_b, f"key {key!r}: {data_a[:200]!r} != {data_b[:200]!r}"
    for path, zarray in _array_docs(fs_a, keys_a).items():
        for key in chunk_keys(path, zarray):
            if key not in keys_a:
                assert _fetch(fs_b, key) is None, f"unwritten chunk {key!r} exists after rewrite"
    for key in sorted(_keys(fs_b) - keys_a):
        assert _harmless_extra(key, _fetch(fs_b, key)), f"rewrite added key {key!r}"


# -- zarr-python 3 against h5py ---------------------------------------------------------------


def h5_datasets(path: Path) -> dict[str, np.ndarray]:
    """Every dataset of an HDF5 file, by path (no leading ``/``), read whole by h5py."""
    found: dict[str, np.ndarray] = {}

    def visit(name: str, item: Any) -> None:
        if isinstance(item, h5py.Dataset):
            found[name] = np.asarray(item[()])

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return found


def assert_arrays_match_h5(refs: RefsLike, h5_path: Path) -> None:
    """zarr reads exactly the file's datasets through the references, equal in dtype and values.

    Values must be identical (NaN equal to NaN at the same places); dtypes must be equal,
    byte order included.
    """
    expected = h5_datasets(h5_path)
    fs = reference_fs(refs)
    arrays = sorted(key.rpartition("/")[0] for key in _keys(fs) if key.endswith(".zarray"))
    assert arrays == sorted(expected)
    root = open_zarr_group(refs)
    for path, values in expected.items():
        array = root[path]
        assert isinstance(array, zarr.Array)
        got = np.asarray(array[...])
        assert got.dtype == values.dtype, f"{path}: dtype {got.dtype} != {values.dtype}"
        np.testing.assert_array_equal(got, values, strict=True, err_msg=path)


# -- xarray against the netCDF file -----------------------------------------------------------


def _open_references(refs: RefsLike, group: str | None, **kwargs: Any) -> xr.Dataset:
    # rooted at the group, not opened with group=...: see open_zarr_group
    backend_kwargs = {"consolidated": False, "storage_options": reference_options(refs)}
    return xr.open_dataset(
        f"reference://{group or ''}", engine="zarr", backend_kwargs=backend_kwargs, **kwargs
    )


def assert_xarray_matches_netcdf(
    refs: RefsLike, netcdf: Path, group: str | None = None, *, check_dims: bool = True
) -> None:
    """xarray sees the same dataset through the references as in the netCDF file.

    With h5netcdf installed the decoded datasets must be identical (values, dtypes, coordinates,
    attributes); ``check_dims=False`` compares variable by variable instead, ignoring dimension
    names (kerchunk names a nested group's dimensions by their HDF5 path, ``grp/dim``). Without
    h5netcdf the undecoded variables are compared with h5py's arrays.
    """
    if importlib.util.find_spec("h5netcdf") is None:
        assert_raw_xarray_matches_h5(refs, netcdf, group)
        return
    with (
        _open_references(refs, group) as through_refs,
        xr.open_dataset(netcdf, engine="h5netcdf", group=group) as direct,
    ):
        through_refs.load()
        direct.load()
        if check_dims:
            xr.testing.assert_identical(through_refs, direct)
        assert sorted(through_refs.variables) == sorted(direct.variables)
        for name, variable in direct.variables.items():
            got = through_refs[name].variable
            assert got.dtype == variable.dtype, f"{name}: {got.dtype} != {variable.dtype}"
            np.testing.assert_array_equal(got.values, variable.values, strict=True, err_msg=name)
            assert got.attrs == variable.attrs, name


def assert_raw_xarray_matches_h5(refs: RefsLike, netcdf: Path, group: str | None = None) -> None:
    """xarray's undecoded variables through the references equal h5py's arrays exactly."""
    prefix = f"{group.strip('/')}/" if group else ""
    datasets = h5_datasets(netcdf)
    with _open_references(refs, group, decode_cf=False, mask_and_scale=False) as ds:
        for name, variable in ds.variables.items():
            expected = datasets[f"{prefix}{name}"]
            native = expected.astype(expected.dtype.newbyteorder("="))  # as xarray hands it out
            np.testing.assert_array_equal(variable.values, native, strict=True, err_msg=name)


# -- refzarr groups ---------------------------------------------------------------------------


def assert_groups_identical(actual: RefGroup, expected: RefGroup) -> None:
    """Equal groups whose kerchunk renderings are identical too (attribute order and types).

    A difference is reported at the first group or array path where it shows.
    """
    groups_a, groups_e = dict(actual.groups()), dict(expected.groups())
    assert sorted(groups_a) == sorted(groups_e), "group paths differ"
    for path, group in groups_e.items():
        assert groups_a[path].attributes == group.attributes, f"group {path!r}: attributes"
    arrays_a, arrays_e = dict(actual.arrays()), dict(expected.arrays())
    assert sorted(arrays_a) == sorted(arrays_e), "array paths differ"
    for path, array in arrays_e.items():
        got = arrays_a[path]
        assert got.meta == array.meta, f"array {path!r}: {got.meta} != {array.meta}"
        assert got.manifest == array.manifest, f"array {path!r}: {_first_difference(got, array)}"
    assert actual == expected
    assert to_kerchunk(actual) == to_kerchunk(expected)


def _first_difference(actual: RefArray, expected: RefArray) -> str:
    for index in np.ndindex(*expected.manifest.grid_shape):
        got, want = actual.manifest[index], expected.manifest[index]
        if got != want:
            return f"chunk {index}: {got!r} != {want!r}"
    return "manifests differ but every entry is equal"
