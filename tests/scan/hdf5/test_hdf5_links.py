"""Many links to one dataset: the object is scanned once, each link reads what h5py reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from h5kit import roundtrip, write_h5

from refzarr import RefArray
from refzarr.scan import ScannedGroup
from refzarr.scan.hdf5 import scanner as hdf5_scanner

LINKS = 40


def _links(f: h5py.File) -> None:
    data = f.create_dataset("data", data=np.arange(30.0), chunks=(7,))
    data.attrs["units"] = "m"  # a variable-length string: its heap is checked per scan
    other = f.create_dataset("other", data=np.arange(4, dtype="i2"))
    soft, hard = f.create_group("soft"), f.create_group("hard")
    for i in range(LINKS):
        soft[f"s{i}"] = h5py.SoftLink("/data")
        hard[f"h{i}"] = data
    soft["other"] = h5py.SoftLink("/other")
    hard["other"] = other


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_h5(tmp_path_factory.mktemp("links") / "links.h5", _links)


def test_every_link_reads_its_target(linked: Path, tmp_path: Path) -> None:
    group = roundtrip(linked, tmp_path)  # each link against h5py's value through it
    data = group["data"]
    assert isinstance(data, RefArray)
    for i in range(LINKS):
        assert group[f"soft/s{i}"] is data
        assert group[f"hard/h{i}"] is data
    assert group["soft/other"] is group["hard/other"] is group["other"]


def test_each_object_scanned_once(linked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attributes, heaps and creation properties of a dataset are read once, not per link."""
    opened: list[str] = []
    real = hdf5_scanner.creation_plist

    def counting(ds: h5py.Dataset) -> Any:
        opened.append(ds.name)
        return real(ds)

    monkeypatch.setattr(hdf5_scanner, "creation_plist", counting)
    group = hdf5_scanner.Hdf5Scanner()(str(linked))
    assert isinstance(group, ScannedGroup)
    assert len(opened) == 2, sorted(set(opened))  # /data and /other, whatever their links
