"""A reference set's record of sources comes from whoever wrote the set: `refresh` scans its
sources again with the recorded format and options, but never with recorded storage options
(refzarr writes none; a stranger's could send the user's requests, signed with their
credentials, to an endpoint of the stranger's choosing)."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import refzarr
from refzarr.model.frozen import thaw_json

ELSEWHERE = {"client_kwargs": {"endpoint_url": "http://127.0.0.1:9/not-yours"}}


def test_refresh_ignores_recorded_storage_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "a.h5"
    with h5py.File(source, "w") as f:
        f.create_dataset("v", data=np.arange(4))
    refs = tmp_path / "a.json"
    group = refzarr.scan(str(source))
    doc = thaw_json(group.sources)
    doc["scans"][0]["options"] = {"storage_options": ELSEWHERE}
    refzarr.write(dataclasses.replace(group, sources=doc), refs)
    with h5py.File(source, "w") as f:  # changed: refresh scans it again
        f.create_dataset("v", data=np.arange(6))
    module = importlib.import_module("refzarr.scan")
    scan, asked = module.scan, []

    def spy(url: str, format: str | None = None, **options: Any) -> Any:
        asked.append(options)
        return scan(url, format=format, **options)

    monkeypatch.setattr(module, "scan", spy)
    changes = refzarr.refresh(refs)
    assert [c.kind for c in changes] == ["changed"]
    assert asked == [{}]
    np.testing.assert_array_equal(refzarr.open_dataset(refs)["v"].values, np.arange(6))


def test_refresh_of_many_files_ignores_recorded_storage_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    netCDF4 = pytest.importorskip("netCDF4")

    def write(path: Path, day: int, n: int) -> None:
        with netCDF4.Dataset(path, "w") as ds:
            ds.createDimension("time", None)
            ds.createDimension("x", n)
            ds.createVariable("time", "i8", ("time",))[:] = [day]
            ds.createVariable("v", "f4", ("time", "x"))[:] = np.full((1, n), day)

    sources = [tmp_path / f"d{day}.nc" for day in range(2)]
    for day, path in enumerate(sources):
        write(path, day, 3)
    refs = tmp_path / "all.json"
    group = refzarr.combine([refzarr.scan(str(p)) for p in sources], concat_dims=["time"])
    doc = thaw_json(group.sources)
    for scan in doc["scans"]:  # alike: one batch of two files, scanned together
        scan["options"] = {"storage_options": ELSEWHERE}
    refzarr.write(dataclasses.replace(group, sources=doc), refs)
    for day, path in enumerate(sources):
        write(path, day + 10, 3)  # both changed: refresh scans them again together
    module = importlib.import_module("refzarr.parallel")
    scan_many, asked = module.scan_many, []

    def spy(urls: Any, **options: Any) -> Any:
        asked.append(options)
        return scan_many(urls, **options)

    monkeypatch.setattr(module, "scan_many", spy)
    refzarr.refresh(refs)
    assert len(asked) == 1
    assert "storage_options" not in asked[0]
    values = refzarr.open_dataset(refs)["v"].values
    np.testing.assert_array_equal(values, [[10] * 3, [11] * 3])
