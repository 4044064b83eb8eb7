"""An undefined fill value shows the same through `refzarr.to_icechunk` and through
VirtualiZarr's Icechunk writer fed by `refzarr.to_virtual_dataset`: missing chunks read as
zero, as the source's library reads them (HDF5's default fill value)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr

import refzarr

icechunk = pytest.importorskip("icechunk")
pytest.importorskip("virtualizarr")

from refzarr.formats.icechunk.repository import commit_icechunk, container_credentials  # noqa: E402


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Arrays without a fill value defined: some with unwritten chunks, one whole."""
    folder = tmp_path_factory.mktemp("fill")
    path = folder / "undefined.h5"
    with h5py.File(path, "w") as f:
        for name, dtype in [("f4", "f4"), ("f8", "f8"), ("i4", "i4"), ("u2", "u2")]:
            d = f.create_dataset(name, shape=(6,), chunks=(2,), dtype=dtype)
            d[0:2] = [5, 0]  # chunks 1 and 2 never written
        whole = f.create_dataset("whole", shape=(4,), chunks=(2,), dtype="f4")
        whole[:] = [0, 1, 2, 0]
    return path


def _open(repo: Path, folder: Path) -> xr.Dataset:
    prefix = folder.resolve().as_uri() + "/"
    credentials = container_credentials([prefix])
    storage = icechunk.local_filesystem_storage(str(repo))
    found = icechunk.Repository.open(storage, authorize_virtual_chunk_access=credentials)
    return xr.open_zarr(found.readonly_session("main").store, consolidated=False).load()


def _through_virtualizarr(group: refzarr.RefGroup, repo: Path, folder: Path) -> xr.Dataset:
    prefix = folder.resolve().as_uri() + "/"
    config = icechunk.RepositoryConfig.default()
    container = icechunk.local_filesystem_store(str(folder.resolve()) + "/")
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, container))
    storage = icechunk.local_filesystem_storage(str(repo))
    created = icechunk.Repository.create(storage, config)
    session = created.writable_session("main")
    refzarr.to_virtual_dataset(group).vz.to_icechunk(session.store)
    session.commit("virtualizarr")
    return _open(repo, folder)


def test_missing_chunks_read_alike_through_both_writers(source: Path, tmp_path: Path) -> None:
    group = refzarr.scan(source, inline_coordinates=0)
    commit_icechunk(group, tmp_path / "ours")
    ours = _open(tmp_path / "ours", source.parent)
    theirs = _through_virtualizarr(group, tmp_path / "vz", source.parent)
    with h5py.File(source) as f:
        for name in ("f4", "f8", "i4", "u2", "whole"):
            expected: Any = f[name][:]
            np.testing.assert_array_equal(ours[name].values, expected, strict=True)
            np.testing.assert_array_equal(theirs[name].values, expected, strict=True)


def test_arrays_without_missing_chunks_keep_the_masking_safe_stand_in(source: Path) -> None:
    """Never read there, NaN stands in (VirtualiZarr's kerchunk writer makes the fill value
    a mask: a zero would hide every zero of the data)."""
    vds = refzarr.to_virtual_dataset(refzarr.scan(source, inline_coordinates=0))
    assert np.isnan(vds["whole"].data.metadata.fill_value)
    assert vds["f4"].data.metadata.fill_value == 0
    assert vds["i4"].data.metadata.fill_value == 0
