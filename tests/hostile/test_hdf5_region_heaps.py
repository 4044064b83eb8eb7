"""Region references point into the global heap (each names a collection and an object
holding its target and selection): before refzarr writes a dataset of them as text (through
HDF5's ``H5Rget_region``, which loops forever on a damaged collection) the collections are
checked like those of variable-length values. Attributes of region references are refused
by name (h5py reads their stored bytes only: nothing in the heap is followed).

Each file is written healthy and with object 1 of its first collection damaged; all are
scanned in one child process with a hard timeout (a hang fails the tests and names its
file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from heapkit import damaged_heap_object

import refzarr
from childkit import Outcome, scan_in_child

CHILD_TIMEOUT = 120.0
"""Seconds the child may take for every file (a few at most; more is a hang)."""


def _regions(f: h5py.File) -> list[Any]:
    data = f.create_dataset("data", data=np.arange(100.0).reshape(10, 10))
    return [data.regionref[2:4, 1:3], data.regionref[5:6, :], data.regionref[0, 0]]


def _contiguous(f: h5py.File) -> None:
    f.create_dataset("regions", data=_regions(f), dtype=h5py.regionref_dtype)


def _chunked(f: h5py.File) -> None:
    refs = _regions(f) * 2
    f.create_dataset("regions", data=refs, dtype=h5py.regionref_dtype, chunks=(2,))


def _deflated(f: h5py.File) -> None:
    refs = _regions(f) * 2
    kw: dict[str, Any] = {"chunks": (3,), "compression": "gzip", "shuffle": True}
    f.create_dataset("regions", data=refs, dtype=h5py.regionref_dtype, **kw)


def _attribute_vector(f: h5py.File) -> None:
    refs = _regions(f)
    f["data"].attrs.create("region", refs, dtype=h5py.regionref_dtype)


FILES: dict[str, tuple[Callable[[h5py.File], None], tuple[int, int]]] = {
    "contiguous": (_contiguous, (8, 8)),
    "contiguous-o4": (_contiguous, (4, 4)),
    "chunked": (_chunked, (8, 8)),
    "deflated": (_deflated, (8, 8)),
    "attribute": (_attribute_vector, (8, 8)),
}
DATASETS = ["contiguous", "chunked", "deflated"]


def _write(path: Path, write: Callable[[h5py.File], None], sizes: tuple[int, int]) -> None:
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_sizes(*sizes)
    with h5py.File(h5py.h5f.create(str(path).encode(), h5py.h5f.ACC_TRUNC, fcpl)) as f:
        write(f)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("regions")
    for name, (write, sizes) in FILES.items():
        healthy = folder / f"{name}.h5"
        _write(healthy, write, sizes)
        (folder / f"{name}-damaged.h5").write_bytes(damaged_heap_object(healthy.read_bytes()))
    return folder


@pytest.fixture(scope="module")
def outcomes(folder: Path) -> dict[str, Outcome]:
    cases = [{"id": p.name, "url": str(p)} for p in sorted(folder.glob("*.h5"))]
    return scan_in_child(cases, CHILD_TIMEOUT)


@pytest.mark.parametrize("name", DATASETS)
def test_a_damaged_collection_is_named(outcomes: dict[str, Outcome], name: str) -> None:
    outcome = outcomes[f"{name}-damaged.h5"]
    outcome.assert_error("ScanError", f"{name}-damaged.h5", "dataset '/regions'")
    assert "region references point into a damaged global heap collection" in outcome.message


@pytest.mark.parametrize("name", DATASETS)
def test_the_healthy_files_give_each_reference_as_text(
    outcomes: dict[str, Outcome], folder: Path, name: str
) -> None:
    assert outcomes[f"{name}.h5"].outcome == "result"
    path = folder / f"{name}.h5"
    got = refzarr.open_dataset(refzarr.scan(str(path)))["regions"].values
    with h5py.File(path, "r") as f:
        refs = f["regions"][()]
        for text, ref in zip(got.tolist(), refs.tolist(), strict=True):
            selected = f["data"][ref]
            assert text.startswith("/data {"), text
            assert selected.size >= 1
    assert got.tolist()[:2] == ["/data {(2,1)-(3,2)}", "/data {(5,0)-(5,9)}"]


@pytest.mark.parametrize("state", ["", "-damaged"])
def test_region_references_with_other_offsets_are_refused(
    outcomes: dict[str, Outcome], state: str
) -> None:
    outcomes[f"contiguous-o4{state}.h5"].assert_error(
        "UnsupportedFeatureError",
        f"contiguous-o4{state}.h5",
        "dataset '/regions'",
        "region references in a file with offsets of 4 bytes",
    )


@pytest.mark.parametrize("state", ["", "-damaged"])
def test_region_reference_attributes_are_refused_by_name(
    outcomes: dict[str, Outcome], state: str
) -> None:
    outcomes[f"attribute{state}.h5"].assert_error(
        "UnsupportedFeatureError",
        f"attribute{state}.h5",
        "dataset '/data': attribute 'region'",
        "RegionReference",
    )
