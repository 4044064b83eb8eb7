"""The kit shared by the Zarr scanner tests: what zarr-python reads from a store (the truth),
and the same arrays read back through refzarr's references, JSON, Parquet and refzarr's store."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zarr

import refzarr
from refzarr import ReferenceStore, RefGroup
from refzarr.scan.zarr.scanner import ZarrScanner  # registers refzarr's Zarr codecs
from roundtrip import open_zarr_group

__all__ = [
    "Readback",
    "assert_same",
    "readback",
    "roundtrip",
    "store_arrays",
    "store_attributes",
]

StoreWriter = Callable[[Any], None]


def store_arrays(url: str, **storage_options: Any) -> dict[str, np.ndarray]:
    """Every array of a store as zarr-python reads it, by path (``""``: a root array)."""
    root = zarr.open(url, mode="r", storage_options=storage_options or None)
    if isinstance(root, zarr.Array):
        return {"": np.asarray(root[...])}
    return {
        path: np.asarray(node[...])
        for path, node in root.members(max_depth=None)
        if isinstance(node, zarr.Array)
    }


def store_attributes(url: str) -> dict[str, dict[str, Any]]:
    """Every node's attributes as zarr-python reads them, by path."""
    root = zarr.open(url, mode="r")
    found = {"": dict(root.attrs.asdict())}
    if isinstance(root, zarr.Group):
        for path, node in root.members(max_depth=None):
            found[path] = dict(node.attrs.asdict())
    return found


def assert_same(got: np.ndarray, expected: np.ndarray, path: str) -> None:
    """Identical values and dtype (NaN and NaT equal where both have them); numpy's
    variable-width strings (zarr's v3 ``string``) equal as the same list of str."""
    if expected.dtype.kind == "T":
        assert got.dtype.kind in "TO", f"{path}: dtype {got.dtype} for strings"
        assert got.shape == expected.shape, path
        assert got.astype(object).tolist() == expected.astype(object).tolist(), path
        return
    assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype} != {expected.dtype}"
    np.testing.assert_array_equal(got, expected, strict=True, err_msg=path)


@dataclass
class Readback:
    """One scanned store written as JSON and Parquet, readable four ways."""

    group: RefGroup
    json: Path
    parquet: Path
    readers: dict[str, Callable[[str], np.ndarray]] = field(default_factory=dict)

    def read(self, how: str, path: str) -> np.ndarray:
        """The array at ``path`` read ``how``: json, parquet, store (refzarr) or dataset."""
        return self.readers[how](path)


def readback(group: RefGroup, tmp_path: Path, name: str = "refs") -> Readback:
    """``group`` written as JSON and Parquet, with a reader of each (fsspec + zarr-python
    3) and of refzarr's own `ReferenceStore` over the Parquet set read back by refzarr."""
    json_path, parquet_path = tmp_path / f"{name}.json", tmp_path / f"{name}.parq"
    refzarr.write(group, json_path)
    refzarr.write(group, parquet_path)
    ours = zarr.open_group(ReferenceStore(refzarr.read(parquet_path)), mode="r", zarr_format=2)

    def through(refs: Path) -> Callable[[str], np.ndarray]:
        groups: dict[str, zarr.Group] = {}  # one ReferenceFileSystem per group, not per array

        def read(path: str) -> np.ndarray:
            parent, _, name = path.rpartition("/")
            if parent not in groups:
                groups[parent] = open_zarr_group(refs, parent)
            return np.asarray(groups[parent][name][...])

        return read

    out = Readback(group, json_path, parquet_path)
    out.readers = {
        "json": through(json_path),
        "parquet": through(parquet_path),
        "store": lambda path: np.asarray(ours[path][...]),
    }
    return out


def roundtrip(
    url: str | Path,
    tmp_path: Path,
    hows: tuple[str, ...] = ("json", "parquet", "store"),
    **options: Any,
) -> RefGroup:
    """Scan the store at ``url`` and check every array reads back through each of ``hows``
    exactly as zarr-python reads it from the store; the scanned group is returned."""
    group = ZarrScanner(**options)(str(url))
    expected = store_arrays(str(url), **dict(options.get("storage_options") or {}))
    if set(expected) == {""}:
        expected = {next(iter(group.members)): expected[""]}
    assert sorted(path for path, _ in group.arrays()) == sorted(expected)
    back = readback(group, tmp_path)
    for how in hows:
        for path, values in expected.items():
            assert_same(back.read(how, path), values, f"{how} {path}")
    return group
