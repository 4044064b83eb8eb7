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
