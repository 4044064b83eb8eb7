"""Maximum shapes read from dataspace messages are exactly h5py's ``ds.maxshape``.

Over hypothesis-generated datasets (shapes, limits, unlimited axes, scalars, empty and
null dataspaces, version 1 and 2 dataspace messages) and every dataset of the corpus.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
from h5kit import CORPUS_FILES, corpus_h5_files, write_h5
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hdf5_attr_messages import _headers

from refzarr.scan.hdf5.dataset import ScannedDataset
from refzarr.scan.hdf5.headers import ObjectHeaders


def _check(headers: ObjectHeaders, ds: h5py.Dataset) -> bool:
    """Compare with h5py; whether the header gave the maximum shape."""
    found = headers.max_shape(ds.id, None, ds.shape)
    if found is None:
        return False
    assert found == ds.maxshape, ds.name
    address = ScannedDataset(ds.id, readonly=True).header_address
    assert headers.max_shape(ds.id, address, ds.shape) == found
    assert headers.max_shape(ds.id, address, (*ds.shape, 1)) is None  # another shape: HDF5's
    return True


_AXES = st.lists(
    st.tuples(st.integers(0, 6), st.sampled_from(["same", "more", "unlimited"])),
    min_size=0,
    max_size=4,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_AXES, st.sampled_from(["earliest", "latest"]), st.booleans())
def test_generated_dataspaces(
    tmp_path: Path, axes: list[tuple[int, str]], libver: str, null: bool
) -> None:
    shape = tuple(size for size, _ in axes)
    limits = tuple(
        size if kind == "same" else size + 3 if kind == "more" else None for size, kind in axes
    )

    def writer(f: h5py.File) -> None:
        if null:
            f.create_dataset("d", data=h5py.Empty("f4"))
            return
        chunked = bool(shape) and limits != shape
        chunks = tuple(max(1, s) for s in shape) if chunked else None
        # a chunk is at least 1 long, and no longer than a fixed maximum
        most = tuple(None if m is None else max(m, 1) for m in limits) if chunked else limits
        f.create_dataset("d", shape=shape, maxshape=most or None, chunks=chunks, dtype="i2")
        f["d"][...] = np.ones(shape, dtype="i2")

    path = write_h5(tmp_path / "space.h5", writer, libver=libver)
    with h5py.File(path, "r") as f:
        read = _check(_headers(f), f["d"])
        assert read or null  # a null dataspace is left to h5py


def _datasets(f: h5py.File) -> list[h5py.Dataset]:
    found: list[h5py.Dataset] = []
    f.visititems(lambda _n, obj: found.append(obj) if isinstance(obj, h5py.Dataset) else None)
    return found


def test_corpus_datasets() -> None:
    read = 0
    for f in corpus_h5_files():
        headers = _headers(f)
        read += sum(_check(headers, ds) for ds in _datasets(f))
    if CORPUS_FILES:
        assert read > 20
