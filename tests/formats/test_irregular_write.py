"""Kerchunk writers and irregular (rectilinear) chunk grids: every writer raises
UnsupportedFeatureError before writing anything, naming the array, the dimension, the first
irregular chunk, its files and what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest

import refzarr
from refzarr import (
    ArrayMeta,
    ChunkManifest,
    RefArray,
    RefGroup,
    UnsupportedFeatureError,
    to_kerchunk,
)
from refzarr.formats.kerchunk_json import write as json_write
from refzarr.formats.parquet import write as parquet_write
from refzarr.model import MISSING, RectilinearAxis

URLS = ("s3://bucket/air-2020.nc", "s3://bucket/air-2021.nc", "s3://bucket/air-2022.nc")


def _irregular(
    lengths: tuple[int, ...],
    chunks: tuple[int, ...],
    *,
    dims: tuple[str, ...] | None = ("time", "y"),
    written: bool = True,
) -> RefArray:
    """Files of ``lengths`` along axis 0 in chunks of ``chunks``, concatenated; 2 columns."""
    sizes: list[int] = []
    stored: list[int] = []
    ids: list[int] = []
    for k, (n, c) in enumerate(zip(lengths, chunks, strict=True)):
        count = -(-n // c)
        sizes += [min(c, n - i * c) for i in range(count)]
        stored += [c] * count
        ids += [k] * count
    meta = ArrayMeta(
        shape=(sum(sizes), 2),
        chunks=(max(stored), 2),
        dtype=np.dtype("<f4"),
        codecs=({"id": "zlib", "level": 4},),
        dimension_names=dims,
        rectilinear=(RectilinearAxis(sizes, stored), None),
    )
    path_id = np.array(ids, dtype=np.int32).reshape(-1, 1)
    if not written:
        path_id[:] = MISSING
    offsets = np.arange(path_id.size, dtype=np.uint64).reshape(-1, 1) * np.uint64(100)
    nbytes = np.full_like(offsets, 100)
    if not written:
        offsets[:] = nbytes[:] = 0
    manifest = ChunkManifest.from_arrays(URLS[: len(lengths)], path_id, offsets, nbytes)
    return RefArray(meta, manifest)


def _regular() -> RefArray:
    meta = ArrayMeta(shape=(2,), chunks=(2,), dtype=np.dtype("<f8"), dimension_names=("y",))
    manifest = ChunkManifest.from_arrays([URLS[0]], np.zeros(1, np.int32), [8], [16])
    return RefArray(meta, manifest)


def _group(air: RefArray) -> RefGroup:
    """A regular array first (written first by every writer), the irregular one nested."""
    return RefGroup(
        attributes={"title": "t"},
        members={"y": _regular(), "grp": RefGroup(members={"air": air})},
    )


UNEVEN = _group(_irregular((5, 3, 7), (2, 2, 2)))

WRITES: list[tuple[str, dict[str, Any]]] = [
    ("refs.json", {}),
    ("refs.json", {"version": 1}),
    ("refs.json.zst", {}),
    ("refs.json.gz", {}),
    ("refs.parq", {}),
    ("refs.parq", {"record_size": 1}),
    ("nested/dir/refs.parq", {}),
    ("nested/dir/refs.json", {}),
]


@pytest.mark.parametrize(("name", "options"), WRITES)
def test_write_raises_and_leaves_nothing(
    tmp_path: Path, name: str, options: dict[str, Any]
) -> None:
    with pytest.raises(UnsupportedFeatureError, match="'grp/air'"):
        refzarr.write(UNEVEN, tmp_path / name, **options)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["refs.json", "refs.parq"])
def test_an_existing_reference_set_is_left_untouched(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    before = RefGroup(members={"y": _regular()})
    refzarr.write(before, target)
    listing = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(UnsupportedFeatureError):
        refzarr.write(UNEVEN, target)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == listing
    assert refzarr.read(target) == before


def test_the_message_names_array_dimension_chunk_files_and_remedies(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFeatureError) as raised:
        refzarr.write(UNEVEN, tmp_path / "refs.json")
    message = str(raised.value)
    for part in (
        "array 'grp/air'",
        "axis 0 (dimension 'time')",
        "chunk 2 holds 1 of its 2 positions but is not the last chunk",
        f"chunk 2 is in {URLS[0]}; chunk 3 is in {URLS[1]}",
        "nothing was written",
        "length along 'time' is a multiple of the chunk length (2)",
        "rechunk",
        "refzarr.open_dataset",
        "Icechunk",
    ):
        assert part in message, part


def test_differing_chunk_nbytesname_both_files() -> None:
    group = _group(_irregular((4, 3, 6), (2, 3, 2)))
    with pytest.raises(
        UnsupportedFeatureError,
        match=rf"chunk 2 is 3 long where chunk 1 is 2 long \(chunk 2 is in {URLS[1]}; "
        rf"chunk 1 is in {URLS[0]}\)",
    ):
        to_kerchunk(group)


def test_without_dimension_names_the_axis_is_named() -> None:
    group = _group(_irregular((3, 4), (2, 2), dims=None))
    with pytest.raises(UnsupportedFeatureError, match=r"along axis 0 \(dimension axis 0\)"):
        to_kerchunk(group)


def test_chunks_never_written_are_said_to_have_no_file() -> None:
    group = _group(_irregular((3, 4), (2, 2), written=False))
    with pytest.raises(UnsupportedFeatureError, match="chunk 1 is in no file: inlined or never"):
        to_kerchunk(group)


def test_every_writer_refuses(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFeatureError, match="'grp/air'"):
        to_kerchunk(UNEVEN)
    for version in (0, 1):
        with pytest.raises(UnsupportedFeatureError, match="'grp/air'"):
            json_write.render_json(UNEVEN, version=version)
    fs = fsspec.filesystem("file")
    with pytest.raises(UnsupportedFeatureError, match="'grp/air'"):
        parquet_write.write_parquet(UNEVEN, fs, str(tmp_path / "direct.parq"), record_size=10)
    assert list(tmp_path.iterdir()) == []


def test_regular_groups_still_write(tmp_path: Path) -> None:
    group = RefGroup(members={"y": _regular(), "grp": RefGroup(members={})})
    for name in ("refs.json", "refs.parq"):
        refzarr.write(group, tmp_path / name)
        assert refzarr.read(tmp_path / name) == group
