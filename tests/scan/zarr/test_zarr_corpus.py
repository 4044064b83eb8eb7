"""Every Zarr store of the corpus: each array zarr-python reads is read back identical through
the written references (JSON and Parquet with fsspec + zarr-python 3, and refzarr's own store),
or is an `UnsupportedFeatureError` naming it; groups, names and attributes are the store's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
from zarrkit import Readback, assert_same, readback, store_arrays, store_attributes

import refzarr
from corpus import corpus_files
from refzarr.model.meta import DIMENSIONS_ATTR
from refzarr.scan import ScannedGroup

STORES = corpus_files("zarr")

pytestmark = [
    pytest.mark.skipif(not STORES, reason="the corpus is absent"),
    # fsspec reads Parquet reference sets with fastparquet (see tests/formats/test_parquet.py)
    pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated"),
]

EXPECTED_ARRAYS = {
    "zarr_implementations_zarr.zr": 4,
    "zarrita_v2.zarr": 30,
    "zarrita_v3.zarr": 45,
    "zarrs_datetime64_ns.zarr": 1,
    "zarrs_hierarchy.zarr": 2,
}
"""Arrays zarr-python reads in each store: all must be referenced (none is unsupported)."""


@pytest.fixture(scope="module", params=STORES, ids=[p.name for p in STORES])
def scanned(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Readback]:
    store: Path = request.param
    group = refzarr.scan(str(store), on_unsupported="skip")
    assert isinstance(group, ScannedGroup)
    return store, readback(group, tmp_path_factory.mktemp(store.name))


def _expected(store: Path, back: Readback) -> dict[str, np.ndarray]:
    found = store_arrays(str(store))
    if set(found) == {""}:  # a root array: named after the store's folder
        return {store.name.rsplit(".", 1)[0]: found[""]}
    return found


def test_detected_as_zarr(scanned: tuple[Path, Readback]) -> None:
    store, _ = scanned
    from refzarr.scan.detect import detect_format

    assert detect_format(str(store)).name == "zarr"
    assert detect_format(f"{store}/").name == "zarr"


def test_every_array_referenced(scanned: tuple[Path, Readback]) -> None:
    store, back = scanned
    assert isinstance(back.group, ScannedGroup)
    assert back.group.skipped == ()
    arrays = sorted(path for path, _ in back.group.arrays())
    assert arrays == sorted(_expected(store, back))
    assert len(arrays) == EXPECTED_ARRAYS[store.name]
    assert refzarr.scan(str(store)) == back.group  # nothing raises either
    assert refzarr.scan(f"{store}/") == back.group  # a directory URL ending in "/"


@pytest.mark.parametrize("how", ["json", "parquet", "store"])
def test_values_identical(scanned: tuple[Path, Readback], how: str) -> None:
    store, back = scanned
    for path, values in _expected(store, back).items():
        assert_same(back.read(how, path), values, f"{store.name} {how} {path}")


def test_groups_and_attributes(scanned: tuple[Path, Readback]) -> None:
    store, back = scanned
    attributes = store_attributes(str(store))
    root = zarr.open(str(store), mode="r")
    if isinstance(root, zarr.Array):
        assert dict(back.group.attributes) == {}
        return
    groups = dict(back.group.groups())
    assert sorted(groups) == sorted(
        ["", *(p for p, n in root.members(max_depth=None) if isinstance(n, zarr.Group))]
    )
    for path, group in groups.items():
        assert _thawed(group.attributes) == attributes[path], path
    for path, array in back.group.arrays():
        expected = dict(attributes[path])
        expected.pop(DIMENSIONS_ATTR, None)
        assert _thawed(array.meta.attributes) == expected, path


def _thawed(attributes: object) -> object:
    from refzarr.model.frozen import thaw_json

    return thaw_json(attributes)
