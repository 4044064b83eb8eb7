"""Irregular (rectilinear) chunk grids read through refzarr: files of uneven lengths and differing
chunk lengths, concatenated by hand from their scans, equal numpy.concatenate of h5py's reads
through ArrayReader, read_many and open_dataset (lazy and dask), missing chunks included; zarr
through ReferenceStore refuses such an array with a clear error."""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refzarr
from refzarr import ChunkDecodeError, RefArray, RefGroup, UnsupportedFeatureError
from refzarr.io import RangeReader
from refzarr.model import ChunkManifest, RectilinearAxis
from refzarr.reader import ArrayReader
from refzarr.reader.array import read_many

WIDTH, WIDTH_CHUNK = 4, 3
FILL = -9

CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], str]] = {
    # name: (file lengths along time, each file's chunk length along time, dtype of "v")
    "uneven": ((5, 3, 7), (2, 2, 2), "<f4"),
    "mixed": ((5, 3, 7), (2, 3, 2), ">i2"),
    "shrinking": ((4, 5, 6), (4, 2, 3), "<f8"),
}
LENGTH = 15  # every case's total length


def _write(path: Path, k: int, length: int, chunk: int, dtype: str) -> Path:
    """One file: ``v`` (time, x) zlib-compressed, ``time``, and ``sparse`` with unwritten chunks."""
    rng = np.random.default_rng(k)
    values = (rng.normal(size=(length, WIDTH)) * 1000).astype(dtype)
    if values.dtype.kind == "f":
        values[rng.random(values.shape) < 0.2] = np.nan
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=values, chunks=(chunk, WIDTH_CHUNK), compression="gzip")
        f.create_dataset("time", data=np.arange(length, dtype="i8") + 100 * k, chunks=(chunk,))
        sparse = f.create_dataset(
            "sparse", shape=(length, WIDTH), chunks=(chunk, WIDTH_CHUNK), dtype="i2", fillvalue=FILL
        )
        if k == 0:
            sparse[0:2, 0:2] = 1  # only the first chunk written
        elif k == 2:
            sparse[length - 1, WIDTH - 1] = 3  # only the last chunk written
        # file 1: nothing written
    return path


def concat(arrays: list[RefArray], dims: tuple[str, ...], fill_value: Any = None) -> RefArray:
    """The arrays of several files concatenated along axis 0, as combine would (by hand)."""
    paths: list[str] = []
    ids, offsets, lengths, sizes, stored = [], [], [], [], []
    inlined: dict[tuple[int, ...], bytes] = {}
    start = 0
    for array in arrays:
        manifest, meta = array.manifest, array.meta
        pid = manifest.path_id.astype(np.int64)
        ids.append(np.where(pid >= 0, pid + len(paths), pid))
        paths += manifest.paths
        offsets.append(manifest.offset)
        lengths.append(manifest.length)
        for index, data in manifest.inlined.items():
            inlined[(index[0] + start, *index[1:])] = data
        n, c = meta.shape[0], meta.chunks[0]
        count = manifest.grid_shape[0]
        sizes += [min(c, n - i * c) for i in range(count)]
        stored += [c] * count
        start += count
    first = arrays[0].meta
    meta = first.replace(
        shape=(sum(sizes), *first.shape[1:]),
        chunks=(max(stored), *first.chunks[1:]),
        rectilinear=(RectilinearAxis(sizes, stored), *[None] * (first.ndim - 1)),
        dimension_names=dims,
        fill_value=fill_value,
    )
    manifest = ChunkManifest.from_arrays(
        paths, np.concatenate(ids), np.concatenate(offsets), np.concatenate(lengths), inlined
    )
    return RefArray(meta, manifest)


class Case:
    """The files of one case, their combined group, and numpy's answer."""

    def __init__(self, directory: Path, name: str) -> None:
        self.name = name
        self.lengths, chunks, dtype = CASES[name]
        self.files = [
            _write(directory / f"{name}{k}.h5", k, n, c, dtype)
            for k, (n, c) in enumerate(zip(self.lengths, chunks, strict=True))
        ]
        scans = [refzarr.scan(str(path)) for path in self.files]

        def member(var: str) -> list[RefArray]:
            found = [scan[var] for scan in scans]
            assert all(isinstance(a, RefArray) for a in found)
            return found  # type: ignore[return-value]

        self.group = RefGroup(
            members={
                "v": concat(member("v"), ("time", "x")),
                "sparse": concat(member("sparse"), ("time", "x"), fill_value=FILL),
                "time": concat(member("time"), ("time",)),
            }
        )

    def array(self, name: str) -> RefArray:
        found = self.group[name]
        assert isinstance(found, RefArray)
        return found

    def reader(self, name: str) -> ArrayReader:
        return ArrayReader(self.array(name), name, RangeReader(), threads=2)

    def expected(self, name: str, selection: Any = ...) -> np.ndarray:
        chosen = selection if isinstance(selection, tuple) else (selection,)
        if Ellipsis not in chosen:
            chosen = (*chosen, ...)
        parts = []
        for path in self.files:
            with h5py.File(path, "r") as f:
                parts.append(f[name][()])
        # numpy's type promotion makes the byte order native: keep the files' dtype
        return np.concatenate(parts).astype(parts[0].dtype)[chosen]


@pytest.fixture(scope="module", params=list(CASES))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Case:
    return Case(tmp_path_factory.mktemp("irregular"), request.param)


def _assert_same(got: np.ndarray, expected: np.ndarray) -> None:
    """Exact: same dtype (byte order included), shape and values, NaN equal to NaN."""
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected, strict=True)


def _slices(size: int) -> st.SearchStrategy[Any]:
    bound = st.integers(-size - 2, size + 2) | st.none()
    step = st.integers(-5, 5).filter(lambda s: s != 0) | st.none()
    return st.builds(slice, bound, bound, step) | st.integers(-size, size - 1)


selections = st.tuples(_slices(LENGTH), _slices(WIDTH)).flatmap(
    lambda full: st.integers(0, 2).map(lambda k: full[:k])
)


def _xarray_can_index(selection: tuple[Any, ...]) -> bool:
    """xarray's lazy indexing fails on an empty slice with a negative step (IndexError in
    ``_decompose_slice``, whatever the backend): leave those to the ArrayReader tests."""
    sizes = (LENGTH, WIDTH)
    return not any(
        isinstance(item, slice) and (item.step or 1) < 0 and not len(range(*item.indices(n)))
        for item, n in zip(selection, sizes, strict=False)
    )


xarray_selections = selections.filter(_xarray_can_index)
_settings = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# -- the model the cases build ------------------------------------------------------------------


def test_cases_are_irregular(case: Case) -> None:
    meta = case.array("v").meta
    assert not meta.is_regular
    assert meta.shape == (LENGTH, WIDTH)
    assert meta.rectilinear is not None
    assert meta.rectilinear[1] is None


# -- ArrayReader --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["v", "sparse", "time"])
def test_whole_arrays_equal_h5py(case: Case, name: str) -> None:
    _assert_same(case.reader(name)[...], case.expected(name))


@_settings
@given(selection=selections, ellipsis=st.booleans())
def test_basic_selections_equal_numpy(
    case: Case, selection: tuple[Any, ...], ellipsis: bool
) -> None:
    chosen: Any = (*selection, ...) if ellipsis else selection
    for name in ("v", "sparse"):
        _assert_same(case.reader(name)[chosen], case.expected(name, chosen))


@_settings
@given(selection=_slices(LENGTH))
def test_one_dimensional_selections_equal_numpy(case: Case, selection: Any) -> None:
    _assert_same(case.reader("time")[selection], case.expected("time", selection))


def test_missing_chunks_fill_exactly_their_positions(case: Case) -> None:
    got = case.reader("sparse")[...]
    _assert_same(got, case.expected("sparse"))
    first, second = case.lengths[:2]
    middle = slice(first, first + second)
    assert (got[middle] == FILL).all()  # file 1 wrote nothing
    assert got[0, 0] == 1
    assert got[-1, -1] == 3


def test_read_many_reads_irregular_arrays_together(case: Case) -> None:
    got = read_many([case.reader("v"), case.reader("time")], RangeReader())
    _assert_same(got[0], case.expected("v"))
    _assert_same(got[1], case.expected("time"))


def test_a_chunk_stored_with_another_length_raises(case: Case) -> None:
    """Stored lengths that lie about the encoded chunks: a decode error, never wrong values."""
    array = case.array("v")
    rect = array.meta.rectilinear
    assert rect is not None
    assert rect[0] is not None
    longer = max(rect[0].stored) + 1
    lying = RectilinearAxis(rect[0].sizes, [longer] * len(rect[0].sizes))
    meta = array.meta.replace(chunks=(longer, WIDTH_CHUNK), rectilinear=(lying, None))
    reader = ArrayReader(RefArray(meta, array.manifest), "v", RangeReader())
    with pytest.raises(ChunkDecodeError, match=r"v/0\.0: decoded to \d+ bytes, a chunk of"):
        reader[0:1, 0:1]


# -- open_dataset -------------------------------------------------------------------------------


def _native(values: np.ndarray) -> np.ndarray:
    """xarray's CF decoding turns big-endian data native; values and kind stay the same."""
    return values.astype(values.dtype.newbyteorder("="))


def test_open_dataset_equals_h5py(case: Case) -> None:
    ds = refzarr.open_dataset(case.group, mask_and_scale=False)
    for name in ("v", "sparse", "time"):
        _assert_same(ds[name].values, _native(case.expected(name)))
    assert ds.sizes == {"time": LENGTH, "x": WIDTH}
    assert ds.indexes["time"].size == LENGTH


def test_open_dataset_masks_as_netcdf4(case: Case) -> None:
    """An HDF5 fill value without a ``_FillValue`` attribute reads, but is not masked: what
    ``engine="netcdf4"`` and ``engine="h5netcdf"`` show of the file (issue 13)."""
    ds = refzarr.open_dataset(case.group)
    _assert_same(ds["sparse"].values, _native(case.expected("sparse")))


def test_encoding_does_not_claim_a_regular_chunk(case: Case) -> None:
    encoding = refzarr.open_dataset(case.group)["v"].encoding
    rect = case.array("v").meta.rectilinear
    assert rect is not None
    assert rect[0] is not None
    assert encoding["preferred_chunks"] == {"time": rect[0].sizes, "x": WIDTH_CHUNK}
    assert "chunks" not in encoding


def _opened(case: Case, *, lazy: bool) -> xr.Dataset:
    """The case's dataset opened lazily or with dask, once per case (not per example)."""
    cache: dict[bool, xr.Dataset] = case.__dict__.setdefault("_opened", {})
    if lazy not in cache:
        chunks = None if lazy else {}
        cache[lazy] = refzarr.open_dataset(case.group, chunks=chunks, mask_and_scale=False)
    return cache[lazy]


@_settings
@given(selection=xarray_selections)
def test_lazy_selections_equal_numpy(case: Case, selection: tuple[Any, ...]) -> None:
    ds = _opened(case, lazy=True)
    _assert_same(ds["v"][selection].values, _native(case.expected("v", selection)))


@_settings
@given(selection=xarray_selections)
def test_dask_arrays_follow_the_reference_chunks(case: Case, selection: tuple[Any, ...]) -> None:
    ds = _opened(case, lazy=False)
    rect = case.array("v").meta.rectilinear
    assert rect is not None
    assert rect[0] is not None
    assert ds["v"].chunks == (rect[0].sizes, (WIDTH_CHUNK, WIDTH - WIDTH_CHUNK))
    for name in ("v", "sparse"):
        _assert_same(ds[name][selection].values, _native(case.expected(name, selection)))


def test_dask_chunks_asked_for_read_correctly(case: Case) -> None:
    ds = refzarr.open_dataset(case.group, chunks={"time": 4}, mask_and_scale=False)
    assert ds["v"].chunks == ((4, 4, 4, 3), (WIDTH_CHUNK, WIDTH - WIDTH_CHUNK))
    _assert_same(ds["v"].values, _native(case.expected("v")))


# -- zarr through ReferenceStore ----------------------------------------------------------------


def _with_regular(case: Case) -> RefGroup:
    """The case's irregular ``v`` and a regular array ``w`` (the first file's ``v``).

    One irregular array only: zarr reads members concurrently, and every other one failing
    too would log "Task exception was never retrieved" for each.
    """
    regular = refzarr.scan(str(case.files[0]))["v"]
    assert isinstance(regular, RefArray)
    return RefGroup(members={"v": case.array("v"), "w": regular})


def test_store_refuses_the_irregular_array_and_serves_the_others(case: Case) -> None:
    store = refzarr.ReferenceStore(_with_regular(case))
    assert not asyncio.run(store.exists(".zmetadata"))  # it could only omit "v" in silence
    assert asyncio.run(store.exists("v/.zarray"))
    group = zarr.open_group(store, mode="r", zarr_format=2)
    with h5py.File(case.files[0], "r") as f:
        np.testing.assert_array_equal(group["w"][...], f["v"][()], strict=True)
    with pytest.raises(UnsupportedFeatureError, match=r"'v'.*axis 0.*refzarr\.open_dataset"):
        group["v"]
    with pytest.raises(UnsupportedFeatureError, match=r"array 'v'.*\.h5"):
        xr.open_zarr(store, consolidated=False)


def test_a_pickled_group_reads_the_same(case: Case) -> None:
    again = pickle.loads(pickle.dumps(case.group))
    assert again == case.group
    ds = refzarr.open_dataset(again, mask_and_scale=False)
    _assert_same(ds["v"].values, _native(case.expected("v")))
