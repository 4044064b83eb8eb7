"""Atomic outputs: a failed write leaves the old reference set byte-identical and no temporaries."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec
import numpy as np
import pytest

import refzarr
from refzarr.errors import RefFormatError
from refzarr.formats.atomic import atomic_path, write_atomic
from refzarr.formats.kerchunk_json import write as json_write
from refzarr.formats.source import Location, locate
from refzarr.model import ArrayMeta, ChunkManifest, RefArray, RefGroup
from refzarr.model.manifest import ManifestBlock

SUFFIXES = [".json", ".json.zst", ".json.gz"]


def small_group(url: str = "s3://bucket/a.nc") -> RefGroup:
    manifest = ChunkManifest.from_arrays([url], np.zeros(4, np.int32), np.arange(4) * 10, [10] * 4)
    meta = ArrayMeta(shape=(4,), chunks=(1,), dtype=np.dtype("<i8"))
    return RefGroup(attributes={"v": 1}, members={"x": RefArray(meta, manifest)})


class BrokenSource:
    """A lazy manifest whose second block cannot be loaded (a corrupt record file, say)."""

    block_size = 2

    def load_block(self, number: int) -> ManifestBlock:
        if number == 1:
            raise RefFormatError("refs.1.parq: corrupt record file")
        u64 = np.uint64
        return ManifestBlock(
            0, ("s3://b/x",), np.zeros(2, np.int32), np.zeros(2, u64), np.ones(2, u64), {}
        )


def broken_group() -> RefGroup:
    meta = ArrayMeta(shape=(4,), chunks=(1,), dtype=np.dtype("u1"))
    return RefGroup(members={"x": RefArray(meta, ChunkManifest.lazy((4,), BrokenSource()))})


def leftovers(directory: Path) -> list[str]:
    """Temporary or backup names left in ``directory`` (recursively)."""
    return [p.name for p in directory.rglob("*") if ".tmp-" in p.name or ".old-" in p.name]


@pytest.fixture(params=SUFFIXES)
def existing(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, bytes]:
    """A reference set already written, and its bytes."""
    target = tmp_path / f"refs{request.param}"
    refzarr.write(small_group(), target)
    return target, target.read_bytes()


# -- failures keep the old file -------------------------------------------------------------


def test_rendering_error_keeps_the_old_file(
    existing: tuple[Path, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    target, before = existing

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("rendering failed")

    monkeypatch.setattr(json_write, "render_parts", fail)
    with pytest.raises(RuntimeError, match="rendering failed"):
        refzarr.write(small_group("s3://other/b.nc"), target)
    assert target.read_bytes() == before
    assert leftovers(target.parent) == []


def test_manifest_that_fails_to_load_keeps_the_old_file(existing: tuple[Path, bytes]) -> None:
    target, before = existing
    with pytest.raises(RefFormatError, match="corrupt record file"):
        refzarr.write(broken_group(), target)
    assert target.read_bytes() == before
    assert leftovers(target.parent) == []


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_io_error_while_writing_keeps_the_old_file(
    existing: tuple[Path, bytes], monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """The disk fails after the new bytes went to the temporary file, or at the rename."""
    target, before = existing

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(OSError, match="No space left"):
        refzarr.write(small_group("s3://other/b.nc"), target)
    monkeypatch.undo()
    assert target.read_bytes() == before
    assert leftovers(target.parent) == []


def test_failed_first_write_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "new" / "refs.json"
    with pytest.raises(RefFormatError):
        refzarr.write(broken_group(), target)
    assert not target.exists()
    assert leftovers(tmp_path) == []


# -- successful writes ---------------------------------------------------------------------


def test_writing_over_an_existing_file_replaces_it(existing: tuple[Path, bytes]) -> None:
    target, before = existing
    newer = small_group("s3://other/b.nc")
    refzarr.write(newer, target)
    assert target.read_bytes() != before
    assert refzarr.read(target) == newer
    assert leftovers(target.parent) == []


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c" / "refs.json.zst"
    refzarr.write(small_group(), target)
    assert refzarr.read(target) == small_group()
    assert sorted(p.name for p in target.parent.iterdir()) == ["refs.json.zst"]


@pytest.fixture
def memory_root() -> Iterator[str]:
    root = f"memory://refzarr-atomic-{uuid.uuid4().hex[:8]}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_memory_targets(memory_root: str, suffix: str) -> None:
    fs = fsspec.filesystem("memory")
    target = f"{memory_root}/sub/refs{suffix}"
    refzarr.write(small_group(), target)
    before = fs.cat_file(target)
    assert refzarr.read(target) == small_group()
    with pytest.raises(RefFormatError):
        refzarr.write(broken_group(), target)
    assert fs.cat_file(target) == before
    newer = small_group("s3://other/b.nc")
    refzarr.write(newer, target)
    assert refzarr.read(target) == newer
    assert [p.rpartition("/")[2] for p in fs.find(memory_root)] == [f"refs{suffix}"]


# -- atomic_path for directories (the Parquet layout) ----------------------------------------


def write_tree(fs: fsspec.AbstractFileSystem, root: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = f"{root}/{name}"
        fs.makedirs(path.rpartition("/")[0], exist_ok=True)
        fs.pipe_file(path, data)


def tree(fs: fsspec.AbstractFileSystem, root: str) -> dict[str, bytes]:
    return {p[len(root) + 1 :]: fs.cat_file(p) for p in fs.find(root)}


def write_half_a_tree(location: Location) -> None:
    with atomic_path(location, directory=True) as temporary:
        write_tree(location.fs, temporary, {".zmetadata": b"new"})
        raise RuntimeError("half way")


def directory_location(tmp_path: Path, protocol: str, memory_root: str) -> Location:
    return locate(
        f"{memory_root}/set.parq" if protocol == "memory" else tmp_path / "set.parq", None
    )


@pytest.mark.parametrize("protocol", ["file", "memory"])
def test_directory_replaced_whole_or_not_at_all(
    tmp_path: Path, memory_root: str, protocol: str
) -> None:
    location = directory_location(tmp_path, protocol, memory_root)
    fs = location.fs
    old = {".zmetadata": b"old", "x/refs.0.parq": b"old-records"}
    with atomic_path(location, directory=True) as temporary:
        write_tree(fs, temporary, old)
    assert tree(fs, location.path) == old
    with pytest.raises(RuntimeError, match="half way"):
        write_half_a_tree(location)
    assert tree(fs, location.path) == old
    new = {".zmetadata": b"new", "y/refs.0.parq": b"new-records"}
    with atomic_path(location, directory=True) as temporary:
        write_tree(fs, temporary, new)
    assert tree(fs, location.path) == new
    parent = location.path.rpartition("/")[0]
    assert [p for p in fs.ls(parent, detail=False) if ".tmp-" in p or ".old-" in p] == []


def test_file_where_the_directory_goes_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "set.parq"
    target.write_bytes(b"not a directory")
    location = locate(target, None)
    with pytest.raises(IsADirectoryError), atomic_path(location, directory=True) as temporary:
        write_tree(location.fs, temporary, {".zmetadata": b"{}"})
    assert target.read_bytes() == b"not a directory"
    assert leftovers(tmp_path) == []


def test_write_atomic_joins_the_parts(tmp_path: Path, memory_root: str) -> None:
    parts = [b"{\n", memoryview(b'"a":"b"'), b"\n}\n"]
    for target in (str(tmp_path / "p.json"), f"{memory_root}/p.json"):
        location = locate(target, None)
        write_atomic(location, parts)
        assert location.fs.cat_file(location.path) == b'{\n"a":"b"\n}\n'
