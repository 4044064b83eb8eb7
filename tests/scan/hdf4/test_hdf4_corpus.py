"""Every HDF4 file of the corpus reads back exactly as pyhdf reads it: through refzarr's
reader and through fsspec + zarr-python 3 on the JSON and Parquet refzarr writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from h4kit import all_readers, assert_matches_pyhdf

import refzarr
from corpus import corpus_files

FILES = corpus_files("hdf4")

# fsspec reads Parquet reference sets with fastparquet by default, which pandas 3 deprecates
FASTPARQUET = pytest.mark.filterwarnings("ignore:The 'fastparquet' engine is deprecated")

SUBSTITUTES = {"SDSszip": "SDSgzip"}
"""pyhdf's bundled HDF4 has no szip decoder; the HDF4 test program that wrote
``sds_compressed.hdf`` stored the same values in its deflate SDS."""


@pytest.fixture(scope="module", params=FILES, ids=[p.name for p in FILES])
def scanned(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path: Path = request.param
    group = refzarr.scan(path)
    folder = tmp_path_factory.mktemp(path.stem)
    (folder / "read").mkdir()
    json_path, parquet_path = folder / "refs.json", folder / "refs.parq"
    refzarr.write(group, json_path)
    refzarr.write(group, parquet_path)
    return path, group, json_path, parquet_path


@FASTPARQUET
def test_corpus_matches_pyhdf(scanned: Any) -> None:
    path, group, json_path, _ = scanned
    readers = all_readers(group, json_path.parent / "read")
    assert assert_matches_pyhdf(path, group, readers, SUBSTITUTES) > 0


def test_corpus_reads_back_from_json(scanned: Any) -> None:
    """The written reference sets give back the scanned group."""
    _, group, json_path, parquet_path = scanned
    assert refzarr.read(json_path) == group
    assert refzarr.read(parquet_path) == group


def test_corpus_is_detected(scanned: Any) -> None:
    path = scanned[0]
    assert refzarr.scan(path, format="hdf4") == scanned[1]
