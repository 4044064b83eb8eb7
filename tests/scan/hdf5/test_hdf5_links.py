"""Many links to one dataset: the object is scanned once, each link reads what h5py reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from h5kit import roundtrip, write_h5

import refzarr
from refzarr import RefArray
from refzarr.errors import ScanError, UnsupportedFeatureError
from refzarr.scan import ScannedGroup
from refzarr.scan.hdf5 import scanner as hdf5_scanner
from refzarr.scan.hdf5.types import creation_plist

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

    def counting(ds: h5py.Dataset) -> Any:
        opened.append(ds.name)
        return creation_plist(ds)

    monkeypatch.setattr(hdf5_scanner, "creation_plist", counting)
    group = hdf5_scanner.Hdf5Scanner()(str(linked))
    assert isinstance(group, ScannedGroup)
    assert len(opened) == 2, sorted(set(opened))  # /data and /other, whatever their links


def test_a_hard_link_to_a_damaged_header_is_no_dangling_link(tmp_path: Path) -> None:
    """HDF5 failing to open what a hard link names (not a checksum: the header's version) is
    a damaged file (ScanError), not a dangling link (skipped by ``on_unsupported="skip"``)."""
    path = tmp_path / "damaged.h5"
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("d", data=np.arange(3))
        f["soft"] = h5py.SoftLink("/nowhere")
        address = h5py.h5o.get_info(f["d"].id).addr
    data = bytearray(path.read_bytes())
    assert data[address : address + 5] == b"OHDR\x02"
    data[address + 4] = 7  # an object header version HDF5 does not know
    path.write_bytes(bytes(data))
    with pytest.raises(ScanError, match=r"object '/d': its object header cannot be read"):
        refzarr.scan(str(path), on_unsupported="skip")


def test_a_dangling_soft_link_is_still_unsupported(tmp_path: Path) -> None:
    path = write_h5(tmp_path / "dangling.h5", lambda f: f.__setitem__("s", h5py.SoftLink("/x")))
    with pytest.raises(UnsupportedFeatureError, match="'/s': dangling soft link"):
        refzarr.scan(str(path))
    group = refzarr.scan(str(path), on_unsupported="skip")
    assert isinstance(group, ScannedGroup)
    assert [s.path for s in group.skipped] == ["/s"]
