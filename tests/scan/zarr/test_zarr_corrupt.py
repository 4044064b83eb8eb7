"""Damaged Zarr stores: a `ScanError` naming the store, the key and what was wrong, raised
while scanning (from the listing and the metadata, never by reading chunks)."""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr

import refzarr
from refzarr import ScanError, SourceNotFoundError
from refzarr.scan.zarr import ZarrScanner


def _store(path: Path, fmt: int = 3, **kwargs: object) -> Path:
    root = zarr.open_group(path, mode="w", zarr_format=fmt)
    a = root.create_array("a", shape=(6, 4), chunks=(3, 2), dtype="i4", **kwargs)  # type: ignore[arg-type]
    a[:] = np.arange(24).reshape(6, 4)
    return path


@pytest.mark.parametrize(("fmt", "key"), [(3, "zarr.json"), (2, ".zgroup")])
def test_unparsable_root_metadata(tmp_path: Path, fmt: int, key: str) -> None:
    store = _store(tmp_path / "s.zarr", fmt)
    (store / key).write_text("{ this is not JSON")
    with pytest.raises(ScanError, match=rf"s\.zarr: '{key}'.*zarr-python cannot parse"):
        ZarrScanner()(str(store))


@pytest.mark.parametrize(("fmt", "key"), [(3, "a/zarr.json"), (2, "a/.zarray")])
def test_unparsable_array_metadata(tmp_path: Path, fmt: int, key: str) -> None:
    store = _store(tmp_path / "s.zarr", fmt)
    (store / key).write_text(f'{{"zarr_format": {fmt}, "node_type": "array", "shape": "wide"}}')
    with pytest.raises(ScanError, match=rf"s\.zarr: '{key}'.*zarr-python cannot parse"):
        ZarrScanner()(str(store))


@pytest.mark.parametrize(("fmt", "chunk"), [(3, "a/c/1/0"), (2, "a/1.0")])
def test_uncompressed_chunk_of_wrong_size(tmp_path: Path, fmt: int, chunk: str) -> None:
    store = _store(tmp_path / "s.zarr", fmt, compressors=None)
    path = store / chunk
    path.write_bytes(path.read_bytes()[:-4])  # truncated: 20 bytes for 3 x 2 int32
    with pytest.raises(
        ScanError,
        match=rf"array 'a': chunk '{chunk}' is 20 bytes, but an uncompressed chunk is "
        r"exactly 24 bytes",
    ):
        ZarrScanner()(str(store))


def test_empty_compressed_chunk(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.zarr")
    (store / "a/c/0/1").write_bytes(b"")
    with pytest.raises(ScanError, match=r"chunk 'a/c/0/1' is 0 bytes, but a stored chunk holds"):
        ZarrScanner()(str(store))


def test_shard_smaller_than_its_index(tmp_path: Path) -> None:
    root = zarr.open_group(tmp_path / "s.zarr", mode="w")
    a = root.create_array("a", shape=(8,), chunks=(2,), shards=(4,), dtype="u1")
    a[:] = 1
    (tmp_path / "s.zarr/a/c/1").write_bytes(b"\x00" * 10)
    with pytest.raises(ScanError, match=r"chunk 'a/c/1' is 10 bytes, but .* at least 36 bytes"):
        ZarrScanner()(str(tmp_path / "s.zarr"))


@pytest.mark.parametrize("fmt", [2, 3])
def test_consolidated_metadata_pointing_nowhere(tmp_path: Path, fmt: int) -> None:
    store = _store(tmp_path / "s.zarr", fmt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(store, zarr_format=fmt)
    shutil.rmtree(store / "a")
    with pytest.raises(ScanError, match=r"array 'a': named by the store's consolidated metadata"):
        ZarrScanner()(str(store))


def test_no_such_store(tmp_path: Path) -> None:
    with pytest.raises(SourceNotFoundError, match=r"nothing\.zarr"):
        ZarrScanner()(str(tmp_path / "nothing.zarr"))


def test_a_file_is_no_store(tmp_path: Path) -> None:
    (tmp_path / "f.zarr").write_bytes(b"{}")
    with pytest.raises(ScanError, match="a file, not a Zarr store"):
        ZarrScanner()(str(tmp_path / "f.zarr"))


def test_directory_without_metadata(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.txt").write_text("x")
    with pytest.raises(ScanError, match=r"no \.zgroup, \.zarray or zarr\.json"):
        refzarr.scan(tmp_path / "d")
    with pytest.raises(ScanError, match=r"no metadata at '/'"):
        refzarr.scan(tmp_path / "d", format="zarr")


def test_directory_of_stores(tmp_path: Path) -> None:
    """A folder holding stores (not a store itself): the message names them and a glob."""
    for day in range(4):
        zarr.open_group(tmp_path / f"day{day}.zarr", mode="w")
    pattern = re.escape(
        f"it holds Zarr stores (day0.zarr, day1.zarr, day2.zarr, ...): scan "
        f"them instead (e.g. '{tmp_path}/*.zarr')"
    )
    with pytest.raises(ScanError, match=pattern):
        refzarr.scan(tmp_path)


def test_damaged_chunk_is_an_error_when_read(tmp_path: Path) -> None:
    """Chunk bytes are not read at scan time; a damaged one fails the read, never fills."""
    store = _store(
        tmp_path / "s.zarr",
        2,
        compressors=numcodecs.Zlib(),
        attributes={"_ARRAY_DIMENSIONS": ["y", "x"]},
    )
    (store / "a/0.0").write_bytes(b"\x78\x9c garbage")
    group = ZarrScanner()(str(store))
    with pytest.raises(refzarr.ChunkDecodeError, match=r"a/0\.0"):
        refzarr.open_dataset(group)["a"].values  # noqa: B018


def test_dimension_names_not_one_per_axis(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.zarr", 2, attributes={"_ARRAY_DIMENSIONS": ["x"]})
    with pytest.raises(ScanError, match=r"array 'a': its dimension names \['x'\] are not one"):
        ZarrScanner()(str(store))


def test_chunk_keys_outside_the_grid_are_ignored(tmp_path: Path) -> None:
    """As zarr-python does: a chunk left by a shrinking resize is no part of the array."""
    store = _store(tmp_path / "s.zarr", 3)
    (store / "a/c/9").mkdir()
    (store / "a/c/9/0").write_bytes(b"stale")
    (store / "a/c/0/x").write_bytes(b"not a chunk key")
    group = ZarrScanner()(str(store))
    assert group["a"].manifest.grid_shape == (2, 2)  # type: ignore[union-attr]
