"""Round trips through VirtualiZarr (issue 18 part 4): RefGroup -> virtual dataset -> kerchunk
JSON / Parquet written by VirtualiZarr -> refzarr, and VirtualiZarr's HDF parser -> refzarr's
writers, compared value by value with refzarr's reader, zarr-python and h5py / netCDF4."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import refzarr

pytest.importorskip("virtualizarr")

# VirtualiZarr writes, and fsspec reads, Parquet references through pandas, which picks
# fastparquet when it is installed
pytestmark = pytest.mark.filterwarnings(
    "ignore:The 'fastparquet' engine is deprecated:pandas.errors.Pandas4Warning"
)

from vzkit import assert_same_values, local_registry, write_netcdf4  # noqa: E402

from refzarr.interop.virtualizarr import from_virtual_dataset, to_virtual_dataset  # noqa: E402
from roundtrip import assert_arrays_match_h5, assert_groups_identical, h5_datasets  # noqa: E402


@pytest.fixture(scope="module")
def netcdf4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_netcdf4(tmp_path_factory.mktemp("vz") / "interop.nc")


@pytest.fixture(scope="module")
def plain_netcdf4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file without its LZF variable, which VirtualiZarr 2.5's HDFParser cannot open."""
    return write_netcdf4(tmp_path_factory.mktemp("vz") / "plain.nc", lzf=False)


@pytest.fixture(scope="module")
def scanned(netcdf4: Path) -> refzarr.RefGroup:
    return refzarr.scan(netcdf4)


@pytest.fixture(scope="module")
def vds(scanned: refzarr.RefGroup) -> xr.Dataset:
    return refzarr.to_virtual_dataset(scanned)


def _netcdf(path: Path) -> xr.Dataset:
    with xr.open_dataset(path, engine="h5netcdf") as ds:  # netCDF-C has no LZF filter
        return ds.load()


def test_virtual_dataset_looks_like_virtualizarrs_own(plain_netcdf4: Path) -> None:
    """Same variables, virtual / loaded split, dtypes, codecs and fill values as the dataset
    VirtualiZarr's HDFParser makes of the file."""
    from virtualizarr import open_virtual_dataset
    from virtualizarr.manifests import ManifestArray
    from virtualizarr.parsers import HDFParser

    vds = refzarr.to_virtual_dataset(refzarr.scan(plain_netcdf4))
    theirs = open_virtual_dataset(
        f"file://{plain_netcdf4}", registry=local_registry(), parser=HDFParser()
    )
    assert sorted(vds.variables) == sorted(theirs.variables)
    assert sorted(vds.coords) == sorted(theirs.coords)
    shown = {k: v for k, v in vds.attrs.items() if not k.startswith("_nc")}  # xarray hides
    assert shown == theirs.attrs
    for name, ours in vds.variables.items():
        other = theirs[name].variable
        assert isinstance(ours.data, ManifestArray) == isinstance(other.data, ManifestArray), name
        assert ours.dtype == other.dtype, name
        assert ours.dims == other.dims, name
        if not isinstance(ours.data, ManifestArray):
            np.testing.assert_array_equal(ours.values, other.values, strict=True)
            continue
        assert ours.attrs.get("_FillValue") == other.attrs.get("_FillValue"), name
        mine, theirs_meta = ours.data.metadata, other.data.metadata
        assert mine.chunks == theirs_meta.chunks, name
        assert mine.to_dict()["codecs"] == theirs_meta.to_dict()["codecs"], name
        if name != "count":  # HDF5's storage fill value; refzarr: undefined (netCDF: none set)
            np.testing.assert_equal(mine.fill_value, theirs_meta.fill_value)
        assert ours.data.manifest == other.data.manifest, name


def test_back_from_virtual_dataset_is_the_same_group(
    vds: xr.Dataset, scanned: refzarr.RefGroup
) -> None:
    """Referenced arrays come back identical (metadata and manifest); inlined ones, which
    travel as loaded variables, come back as one raw inlined chunk holding the same values."""
    back = from_virtual_dataset(vds)
    assert back.attributes == scanned.attributes
    assert sorted(p for p, _ in back.arrays()) == sorted(p for p, _ in scanned.arrays())
    inlined = [p for p, a in scanned.arrays() if a.manifest.inlined]
    assert inlined  # the coordinates at least
    for path, array in scanned.arrays():
        got = back[path]
        assert isinstance(got, refzarr.RefArray)
        if path in inlined:
            # xarray encodes decoded times with the calendar it decoded them in, always
            attrs = dict(got.meta.attributes)
            if path == "time":
                assert attrs.pop("calendar") == "proleptic_gregorian"
            assert got.meta.replace(attributes=attrs) == array.meta.as_one_raw_chunk(), path
        else:
            assert got == array, path
    xr.testing.assert_identical(
        refzarr.open_dataset(back).load(), refzarr.open_dataset(scanned).load()
    )


def test_referenced_only_group_round_trips_exactly(plain_netcdf4: Path) -> None:
    group = refzarr.scan(plain_netcdf4)
    referenced = refzarr.RefGroup(
        attributes=group.attributes,
        members={n: m for n, m in group.members.items() if not m.manifest.inlined},
    )
    assert_groups_identical(from_virtual_dataset(to_virtual_dataset(referenced)), referenced)


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_kerchunk_written_by_virtualizarr_reads_back(
    vds: xr.Dataset, scanned: refzarr.RefGroup, netcdf4: Path, tmp_path: Path, fmt: str
) -> None:
    """RefGroup -> VirtualiZarr -> kerchunk written by VirtualiZarr -> refzarr.read: the same
    dataset through refzarr's reader, and the netCDF4 library's values."""
    target = tmp_path / f"refs.{fmt}"
    vds.vz.to_kerchunk(target, format=fmt)
    back = refzarr.read(target)
    through_vz = refzarr.open_dataset(back).load()
    xr.testing.assert_identical(through_vz, refzarr.open_dataset(scanned).load())
    assert_same_values(through_vz, _netcdf(netcdf4))
    for path, array in scanned.arrays():  # the very chunk references
        if not array.manifest.inlined:
            assert back[path].manifest == array.manifest, path


def test_kerchunk_written_by_virtualizarr_through_fsspec_and_zarr(
    vds: xr.Dataset, netcdf4: Path, tmp_path: Path
) -> None:
    target = tmp_path / "refs.json"
    vds.vz.to_kerchunk(target, format="json")
    assert_arrays_match_h5(json.loads(target.read_text()), netcdf4)


@pytest.fixture(scope="module")
def from_hdf_parser(plain_netcdf4: Path) -> refzarr.RefGroup:
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import HDFParser

    theirs = open_virtual_dataset(
        f"file://{plain_netcdf4}", registry=local_registry(), parser=HDFParser()
    )
    return from_virtual_dataset(theirs)


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_virtualizarr_hdf_parser_to_refzarr_writers(
    from_hdf_parser: refzarr.RefGroup, plain_netcdf4: Path, tmp_path: Path, fmt: str
) -> None:
    """VirtualiZarr's own HDF parser -> from_virtual_dataset -> refzarr.write: zarr-python
    through fsspec reads h5py's values, refzarr's reader the netCDF4 library's."""
    target = tmp_path / f"refs.{fmt}"
    refzarr.write(from_hdf_parser, target)
    assert_arrays_match_h5(str(target), plain_netcdf4)
    ours = refzarr.open_dataset(refzarr.read(target)).load()
    truth = _netcdf(plain_netcdf4)
    assert_same_values(ours, truth, [n for n in truth.variables if n != "count"])
    # count has no _FillValue: HDF5's storage fill value (netCDF's default for int) comes
    # through VirtualiZarr as the Zarr fill value, which Zarr v2 readers use to mask
    np.testing.assert_array_equal(ours["count"].values, truth["count"].values)


def test_from_hdf_parser_keeps_references(
    from_hdf_parser: refzarr.RefGroup, plain_netcdf4: Path
) -> None:
    """The chunk references VirtualiZarr found are the ones refzarr finds; its loaded
    coordinates come back as inlined arrays holding h5py's values."""
    datasets = h5_datasets(plain_netcdf4)
    for path, array in refzarr.scan(plain_netcdf4).arrays():
        got = from_hdf_parser[path]
        assert isinstance(got, refzarr.RefArray)
        if array.manifest.inlined:
            assert got.manifest.inlined, path
            raw = np.frombuffer(got.manifest[(0,) * got.meta.ndim], dtype=got.meta.dtype)
            np.testing.assert_array_equal(raw.reshape(got.shape), datasets[path], strict=True)
        else:
            assert got.manifest == array.manifest, path


def test_big_endian_and_missing_chunks(tmp_path: Path) -> None:
    """A big-endian array with a missing chunk keeps its byte order and its fill value."""
    import h5py

    path = tmp_path / "be.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("v", shape=(6,), chunks=(2,), dtype=">i4", fillvalue=-5)
        d[:2] = [1, 2]
        d[4:] = [5, 6]
    group = refzarr.scan(path)
    vds = to_virtual_dataset(group)
    meta = vds["v"].data.metadata
    assert meta.to_dict()["codecs"][0] == {"name": "bytes", "configuration": {"endian": "big"}}
    back = from_virtual_dataset(vds)
    assert_groups_identical(back, group)
    refs = vds.vz.to_kerchunk(format="dict")
    values = refzarr.ReferenceStore(refzarr.from_kerchunk(refs))
    import zarr

    got = zarr.open_array(values, path="v", mode="r", zarr_format=2)[...]
    np.testing.assert_array_equal(got, np.array([1, 2, -5, -5, 5, 6], dtype=">i4"), strict=True)


def test_datatree_comes_back_nested(scanned: refzarr.RefGroup, vds: xr.Dataset) -> None:
    tree = xr.DataTree.from_dict({"/": vds, "/inner": vds[["temp"]]})
    back = from_virtual_dataset(tree)
    assert isinstance(back["inner"], refzarr.RefGroup)
    assert back["inner/temp"] == scanned["temp"]


def test_many_references_over_many_urls_round_trip() -> None:
    """40,000 chunks over 50 URLs (local paths and s3 URLs), missing chunks among them: the
    manifest comes back entry for entry, URLs in refzarr's form."""
    grid = (200, 200)
    rng = np.random.default_rng(4)
    paths = [f"/archive/file{i:02d}.nc" for i in range(25)]
    paths += [f"s3://bucket/archive/file{i:02d}.nc" for i in range(25)]
    ids = rng.integers(-1, len(paths), size=grid).astype(np.int32)  # -1: missing
    offsets = rng.integers(0, 2**40, size=grid).astype(np.uint64)
    lengths = rng.integers(1, 2**20, size=grid).astype(np.uint64)
    manifest = refzarr.ChunkManifest.from_arrays(
        paths, ids, np.where(ids >= 0, offsets, 0), np.where(ids >= 0, lengths, 0)
    )
    meta = refzarr.ArrayMeta(
        shape=(2000, 1995),  # a partial last chunk along x
        chunks=(10, 10),
        dtype=np.dtype(">i2"),
        fill_value=-7,
        codecs=[{"id": "shuffle", "elementsize": 2}, {"id": "zlib", "level": 1}],
        attributes={"units": "m", "scale_factor": 0.01},
        dimension_names=("y", "x"),
    )
    group = refzarr.RefGroup(
        attributes={"title": "many"}, members={"v": refzarr.RefArray(meta, manifest)}
    )
    vds = to_virtual_dataset(group)
    entry = vds["v"].data.manifest.dict()["0.0"]
    assert entry["path"].startswith(("file:///archive/", "s3://bucket/"))
    assert_groups_identical(from_virtual_dataset(vds), group)


def test_hierarchy_as_datatree_round_trips() -> None:
    """A GRIB file's groups (cfgrib-like) as a DataTree and back: every referenced array."""
    from corpus import corpus_files
    from refzarr.interop.virtualizarr import to_virtual_datatree

    path = next(p for p in corpus_files("grib") if p.name == "era5-levels-members.grib")
    scanned = refzarr.scan(path)
    tree = to_virtual_datatree(scanned)
    back = from_virtual_dataset(tree)
    assert sorted(p for p, _ in back.arrays()) == sorted(p for p, _ in scanned.arrays())
    for name, array in scanned.arrays():
        if not array.manifest.inlined:
            assert back[name] == array, name
    xr.testing.assert_identical(
        refzarr.open_datatree(back).load(), refzarr.open_datatree(scanned).load()
    )


def test_zarr_v3_written_by_virtualizarr_shows_no_refzarr_records(
    vds: xr.Dataset, scanned: refzarr.RefGroup, netcdf4: Path, tmp_path: Path
) -> None:
    """refzarr's per-array records travel in a hidden group attribute: an Icechunk (Zarr v3)
    store written by VirtualiZarr shows none of them through xarray (which shows every v3
    array attribute), reads the source's values, and the records are all in the group."""
    icechunk = pytest.importorskip("icechunk")
    import zarr

    from refzarr.formats.icechunk.repository import container_credentials
    from refzarr.model.hierarchy import ARRAY_RECORDS_ATTR

    prefix = netcdf4.parent.resolve().as_uri() + "/"
    config = icechunk.RepositoryConfig.default()
    store = icechunk.local_filesystem_store(str(netcdf4.parent.resolve()))
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, store))
    repo = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config,
        authorize_virtual_chunk_access=container_credentials([prefix]),
    )
    session = repo.writable_session("main")
    vds.vz.to_icechunk(session.store)
    session.commit("virtualizarr")
    written = repo.readonly_session("main").store
    with xr.open_zarr(written, consolidated=False) as got:
        shown = [(n, k) for n, v in got.variables.items() for k in v.attrs if k.startswith("_nc")]
        assert shown == []
        assert not [k for k in got.attrs if k.startswith("_nc")]
        assert_same_values(got.load(), _netcdf(netcdf4), ["temp", "packed", "count", "lzf"])
    records = zarr.open_group(written, mode="r").attrs[ARRAY_RECORDS_ATTR]
    assert sorted(records) == sorted(p for p, _ in scanned.arrays())  # each has notes
