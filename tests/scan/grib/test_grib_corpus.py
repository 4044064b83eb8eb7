"""Every GRIB file of the corpus reads back through its references exactly as ecCodes decodes
it (every field, once) and as cfgrib names and places it: through refzarr's reader and
through fsspec + zarr-python 3 on the JSON and Parquet reference sets refzarr writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr
from gribkit import (
    EccField,
    assert_matches_cfgrib,
    assert_matches_eccodes,
    cfgrib_dataset,
    cfgrib_filter,
    eccodes_fields,
    grib_corpus,
    leaf_groups,
    scan,
    table_filter,
)

import refzarr
from refzarr import RefGroup
from roundtrip import open_zarr_group, reference_options

FILES = grib_corpus()
IDS = [p.name for p in FILES]

# fsspec reads Parquet reference sets with fastparquet, which pandas deprecates
FASTPARQUET = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")


class Scanned:
    """One corpus file: its scan, its written reference sets and ecCodes' fields."""

    def __init__(self, path: Path, where: Path) -> None:
        self.path = path
        self.group = scan(path)
        self.json = where / f"{path.name}.json"
        self.parquet = where / f"{path.name}.parq"
        refzarr.write(self.group, self.json)
        refzarr.write(self.group, self.parquet)
        self.fields: dict[tuple[int, int], EccField] = eccodes_fields(path)


_CACHE: dict[Path, Scanned] = {}


@pytest.fixture(scope="module", params=FILES, ids=IDS)
def scanned(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Scanned:
    path = request.param
    if path not in _CACHE:
        _CACHE[path] = Scanned(path, tmp_path_factory.mktemp(path.stem))
    return _CACHE[path]


def test_corpus_is_there() -> None:
    assert len(FILES) == 12, [p.name for p in FILES]  # MANIFEST.md lists 12 GRIB rows


def test_values_through_refzarr(scanned: Scanned) -> None:
    group = scanned.group

    def read(path: str, name: str) -> Any:
        with refzarr.open_dataset(group, group=path) as ds:
            return ds[name].values

    assert assert_matches_eccodes(group, scanned.fields, read) == len(scanned.fields)


@FASTPARQUET
@pytest.mark.parametrize("kind", ["json", "parquet"])
def test_values_through_zarr(scanned: Scanned, kind: str) -> None:
    refs = scanned.json if kind == "json" else scanned.parquet

    def read(path: str, name: str) -> Any:
        return open_zarr_group(refs, path)[name][...]

    assert_matches_eccodes(scanned.group, scanned.fields, read)


def _cfgrib_cases(group: RefGroup, path: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(group path, variable, cfgrib filter) for every group cfgrib can open on its own: not
    those whose fields need a ``_2`` sibling (cfgrib would mix or refuse them)."""
    cases = []
    paths = {p for p, _, _ in leaf_groups(group)}
    for leaf, node, name in leaf_groups(group):
        split = leaf[-2:] in ("_2", "_3") or f"{leaf}_2" in paths
        if split:
            continue
        keys = cfgrib_filter(node, name)
        if keys is None:
            attrs = node.members[name].meta.attributes  # type: ignore[union-attr]
            edition = int(node.attributes["GRIB_edition"])
            keys = {
                "stepType": attrs["GRIB_stepType"],
                "typeOfLevel": attrs["GRIB_typeOfLevel"],
                **table_filter(name, edition),
            }
        cases.append((leaf, name, keys))
    return cases


def test_names_and_coordinates_match_cfgrib(scanned: Scanned) -> None:
    """Through refzarr's reader, and through xarray + fsspec on the JSON references."""
    cases = _cfgrib_cases(scanned.group, scanned.path)
    assert cases
    options = reference_options(scanned.json)
    for leaf, name, keys in cases:
        with (
            cfgrib_dataset(scanned.path, keys) as theirs,
            refzarr.open_dataset(scanned.group, group=leaf) as ours,
            xr.open_dataset(
                f"reference://{leaf}",
                engine="zarr",
                backend_kwargs={"consolidated": False, "storage_options": options},
            ) as through_json,
        ):
            theirs.load()
            assert_matches_cfgrib(ours, theirs, name)
            assert_matches_cfgrib(through_json, theirs, name)


def test_layout(scanned: Scanned) -> None:
    """Groups at ``<name>/<stepType>/<typeOfLevel>``, ``time`` and ``step`` dimensions always,
    one chunk per field, float32 with NaN fill."""
    for leaf, node, name in leaf_groups(scanned.group):
        array = node.members[name]
        meta = array.meta  # type: ignore[union-attr]
        dims = meta.dimension_names
        assert dims is not None, leaf
        assert "time" in dims, leaf
        assert "step" in dims, leaf
        assert meta.dtype == np.float32, leaf
        assert np.isnan(meta.fill_value), leaf
        assert meta.codecs[-1]["id"] == "refzarr.grib", leaf
        assert leaf.split("/")[1] == meta.attributes["GRIB_stepType"], leaf
