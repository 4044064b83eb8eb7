"""Variable-length values whose global heap collection is damaged (an object's size flipped,
which makes the HDF5 library loop forever reading it): attributes of datasets and groups,
compact datasets, chunked datasets behind filters other than deflate, variable-length
sequences; each a `ScanError` naming the file, the object and the collection, in bounded time
(all scans in one child process with a hard timeout: a hang fails the tests and names its
file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from heapkit import damaged_heap_object

from childkit import Outcome, scan_in_child

CHILD_TIMEOUT = 120.0
"""Seconds the child may take for every file (a few at most; more is a hang)."""

STRINGS = np.array(["x", "yy", "zzz", "wwww"], dtype=h5py.string_dtype())
LIBVERS: dict[str, Any] = {"v0": "earliest", "v2": ("v108", "v108")}


def _dataset_attribute(f: h5py.File) -> None:
    f.create_dataset("x", data=np.arange(4)).attrs["names"] = STRINGS


def _group_attribute(f: h5py.File) -> None:
    f.create_group("g").attrs["names"] = STRINGS


def _root_attribute(f: h5py.File) -> None:
    f.attrs["history"] = STRINGS[:1].astype(object)[0]


def _compact(f: h5py.File) -> None:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    space = h5py.h5s.create_simple(STRINGS.shape)
    kind = h5py.h5t.py_create(STRINGS.dtype, logical=True)
    h5py.h5d.create(f.id, b"strings", kind, space, dcpl=dcpl)
    f["strings"][...] = STRINGS


def _shuffled(f: h5py.File) -> None:
    f.create_dataset("strings", data=STRINGS, chunks=(2,), shuffle=True, compression="gzip")


def _shuffle_only(f: h5py.File) -> None:
    f.create_dataset("strings", data=STRINGS, chunks=(2,), shuffle=True)


def _sequences(f: h5py.File) -> None:
    kind = h5py.vlen_dtype(np.dtype("i4"))
    data = np.empty(3, dtype=object)
    data[:] = [np.arange(1, dtype="i4"), np.arange(2, dtype="i4"), np.arange(3, dtype="i4")]
    f.create_dataset("x", data=np.arange(4)).attrs.create("seq", data, dtype=kind)


WRITERS: dict[str, tuple[Callable[[h5py.File], None], str]] = {
    "dataset-attribute": (_dataset_attribute, "dataset '/x': attribute 'names': its"),
    "group-attribute": (_group_attribute, "group '/g': attribute 'names': its"),
    "root-attribute": (_root_attribute, "group '/': attribute 'history': its"),
    "compact": (_compact, "dataset '/strings': its"),
    "shuffle-deflate": (_shuffled, "dataset '/strings': its"),
    "shuffle": (_shuffle_only, "dataset '/strings': its"),
    "sequences": (_sequences, "dataset '/x': attribute 'seq': its"),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    folder = tmp_path_factory.mktemp("heaps")
    cases = []
    for kind, (write, _) in WRITERS.items():
        for version, libver in LIBVERS.items():
            healthy = folder / f"{kind}-{version}-healthy.h5"
            with h5py.File(healthy, "w", libver=libver) as f:
                write(f)
            damaged = folder / f"{kind}-{version}-damaged.h5"
            damaged.write_bytes(damaged_heap_object(healthy.read_bytes()))
            cases += [{"id": p.name, "url": str(p)} for p in (healthy, damaged)]
    return scan_in_child(cases, CHILD_TIMEOUT)


@pytest.mark.parametrize("version", LIBVERS)
@pytest.mark.parametrize("kind", WRITERS)
def test_a_damaged_collection_is_named(
    outcomes: dict[str, Outcome], kind: str, version: str
) -> None:
    name = f"{kind}-{version}-damaged.h5"
    outcome = outcomes[name]
    outcome.assert_error("ScanError", name, WRITERS[kind][1])
    assert "variable-length values point into a damaged global heap collection at byte" in (
        outcome.message
    )


@pytest.mark.parametrize("version", LIBVERS)
@pytest.mark.parametrize("kind", WRITERS)
def test_the_healthy_files_scan(outcomes: dict[str, Outcome], kind: str, version: str) -> None:
    outcome = outcomes[f"{kind}-{version}-healthy.h5"]
    if kind == "sequences":  # read, then refused
        outcome.assert_error("UnsupportedFeatureError", "attribute 'seq'", "not supported")
    else:
        assert outcome.outcome == "result", outcome


def test_a_collection_past_the_end_of_the_file(tmp_path: Path) -> None:
    """A variable-length attribute whose descriptor names a collection past the file's end."""
    path = tmp_path / "beyond.h5"
    with h5py.File(path, "w", libver="earliest") as f:  # no header checksums to mend
        _dataset_attribute(f)
    data = bytearray(path.read_bytes())
    cell = (1).to_bytes(4, "little") + data.find(b"GCOL").to_bytes(8, "little")
    at = data.find(cell, data.find(b"names\0"))  # the descriptor of "x" (1 byte long)
    assert at >= 0
    data[at + 4 : at + 12] = (len(data) + 4096).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    outcome = scan_in_child([{"id": "beyond", "url": str(path)}], CHILD_TIMEOUT)["beyond"]
    outcome.assert_error("ScanError", "beyond.h5", "attribute 'names'", "beyond the file's end")
