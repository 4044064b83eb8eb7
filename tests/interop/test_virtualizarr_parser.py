"""RefzarrParser inside VirtualiZarr (issue 18 part 4): ``open_virtual_dataset(url,
parser=RefzarrParser(), registry=...)`` on netCDF3, TIFF and GRIB files gives the values of the
format's own library and of refzarr's reader, loaded through VirtualiZarr's ManifestStore."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import refzarr
from corpus import corpus_files

pytest.importorskip("virtualizarr")

# zarr-python warns that fixed-width bytes and strings (netCDF3's char arrays) have no Zarr v3
# data type specification yet; VirtualiZarr holds every array as Zarr v3
pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")

from vzkit import assert_same_values, local_registry  # noqa: E402

from refzarr.interop.virtualizarr import RefzarrParser  # noqa: E402

NETCDF3 = [f for f in corpus_files("netcdf3") if f.name != "ref_nccopy3_subset.nc"]
"""ref_nccopy3_subset.nc (367 variables) takes ~10 s in xarray's Zarr backend: left out."""
TIFF = corpus_files("tiff")
GRIB = [
    f for f in corpus_files("grib") if f.name in {"era5-levels-members.grib", "rap.wrfnat.grib2"}
]


def _open(path: Path, parser: RefzarrParser, **kwargs: object) -> xr.Dataset:
    from virtualizarr import open_virtual_dataset

    return open_virtual_dataset(
        f"file://{path}", registry=local_registry(), parser=parser, **kwargs
    )


def _all_loaded(path: Path, parser: RefzarrParser, names: list[str]) -> xr.Dataset:
    return _open(path, parser, loadable_variables=names).load()


@pytest.mark.parametrize("path", NETCDF3, ids=lambda p: p.name)
def test_netcdf3_values_equal_the_netcdf_library(path: Path) -> None:
    with xr.open_dataset(path, engine="netcdf4") as truth:
        truth.load()
    got = _all_loaded(path, RefzarrParser(), list(truth.variables))
    assert_same_values(got, truth)
    for name, variable in truth.variables.items():
        assert set(got[name].attrs) == set(variable.attrs), name


def test_netcdf3_virtual_variables_hold_refzarrs_references() -> None:
    from virtualizarr.manifests import ManifestArray

    path = next(p for p in NETCDF3 if p.name == "example_1.nc")
    vds = _open(path, RefzarrParser(format="netcdf3"))
    scanned = refzarr.scan(path)
    virtual = [n for n, v in vds.variables.items() if isinstance(v.data, ManifestArray)]
    assert virtual
    back = refzarr.from_virtual_dataset(vds[virtual])
    for name in virtual:
        assert back[name].manifest == scanned[name].manifest, name


def _raw_through_store(path: Path, parser: RefzarrParser) -> xr.Dataset:
    """Undecoded values read by zarr-python through the parser's ManifestStore."""
    store = parser(f"file://{path}", local_registry())
    with xr.open_dataset(
        store, engine="zarr", consolidated=False, zarr_format=3, decode_cf=False
    ) as ds:
        return ds.load()


@pytest.mark.parametrize("path", TIFF, ids=lambda p: p.name)
def test_tiff_values_equal_refzarr_and_tifffile(path: Path) -> None:
    import tifffile

    scanned = refzarr.scan(path)
    with refzarr.open_dataset(scanned, decode_cf=False) as raw_truth:
        raw_truth.load()
    raw = _raw_through_store(path, RefzarrParser())
    assert_same_values(raw, raw_truth)
    decoded = _all_loaded(path, RefzarrParser(), list(raw_truth.variables))
    assert_same_values(decoded, xr.decode_cf(raw_truth))  # xarray decodes both alike
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        library = tifffile.imread(path, level=0)
    band = raw["band_data"].values
    assert band.size == library.size
    if band.shape == library.shape:
        np.testing.assert_array_equal(band, library, strict=True)
    else:  # planar (band, y, x) in tifffile, refzarr's (y, x, band) band-last layout
        np.testing.assert_array_equal(np.moveaxis(band, -1, 0), library, strict=True)


@pytest.mark.parametrize("path", GRIB, ids=lambda p: p.name)
def test_grib_subgroups_through_the_parser(path: Path) -> None:
    scanned = refzarr.scan(path)
    leaves = [
        p
        for p, g in scanned.groups()
        if any(True for _ in g.arrays())
        and p
        and all(not isinstance(m, refzarr.RefGroup) for m in g.members.values())
    ]
    assert leaves
    for leaf in leaves[:2]:
        truth = refzarr.open_dataset(scanned, group=leaf).load()
        got = _all_loaded(path, RefzarrParser(group=leaf), list(truth.variables))
        assert_same_values(got, truth)


def test_inlined_coordinates_are_served(tmp_path: Path) -> None:
    """Coordinates refzarr computes (no file bytes) load through the ManifestStore: from an
    in-memory store registered in the registry (VirtualiZarr 2.5) or as inlined chunks."""
    path = next(p for p in TIFF if p.name == "RGB.byte.tif")
    scanned = refzarr.scan(path)
    assert scanned["x"].manifest.inlined
    vds = _open(path, RefzarrParser())
    np.testing.assert_array_equal(
        vds["x"].values, refzarr.open_dataset(scanned)["x"].values, strict=True
    )


def test_parser_output_written_by_virtualizarr_reads_back(tmp_path: Path) -> None:
    """netCDF3 -> RefzarrParser -> VirtualiZarr's kerchunk JSON -> refzarr.read: same values."""
    path = next(p for p in NETCDF3 if p.name == "example_1.nc")
    vds = _open(path, RefzarrParser())
    target = tmp_path / "refs.json"
    vds.vz.to_kerchunk(target, format="json")
    with xr.open_dataset(path, engine="netcdf4") as truth:
        truth.load()
    assert_same_values(refzarr.open_dataset(refzarr.read(target)).load(), truth)


def test_scalars_virtualizarr_writes_under_an_empty_chunk_key_read_back(tmp_path: Path) -> None:
    """VirtualiZarr (2.5 to 2.8) writes a 0-d array's chunk as ``name/`` (kerchunk and Zarr v2
    say ``name/0``), which fsspec + zarr read as the fill value: refzarr reads the file's value,
    refuses the key given twice, and writes it back as ``name/0``."""
    import json

    import netCDF4

    path = tmp_path / "scalar.nc"
    with netCDF4.Dataset(path, "w") as f:
        f.createVariable("height", "f8", ())[...] = 2.0
        f.createDimension("x", 2)
        f.createVariable("v", "f4", ("x",))[:] = [1.0, 2.0]
    target = tmp_path / "refs.json"
    _open(path, RefzarrParser()).vz.to_kerchunk(target, format="json")
    written = json.loads(target.read_text())
    assert "height/" in written["refs"]
    assert float(refzarr.open_dataset(target)["height"]) == 2.0
    refzarr.write(refzarr.read(target), tmp_path / "mended.json")
    assert "height/0" in json.loads((tmp_path / "mended.json").read_text())
    written["refs"]["height/0"] = written["refs"]["height/"]
    (tmp_path / "twice.json").write_text(json.dumps(written))
    with pytest.raises(refzarr.RefFormatError, match="given more than once"):
        refzarr.read(tmp_path / "twice.json")


def test_skip_variables_and_options_reach_the_scan() -> None:
    path = next(p for p in NETCDF3 if p.name == "example_1.nc")
    vds = _open(path, RefzarrParser(skip_variables=["rh"], inline_threshold=0))
    assert "rh" not in vds.variables
    assert "temp" in vds.variables


def _assert_raw_equal(got: xr.Dataset, truth: xr.Dataset) -> None:
    """Undecoded values equal, NaN equal to NaN (structured values field by field)."""
    assert sorted(got.variables) == sorted(truth.variables)
    for name, want in truth.variables.items():
        a, b = got[name].values, want.values
        assert a.dtype == b.dtype, f"{name}: dtype {a.dtype} != {b.dtype}"
        for field in b.dtype.names or (None,):
            x, y = (a, b) if field is None else (a[field], b[field])
            np.testing.assert_array_equal(x, y, strict=True, err_msg=f"{name} {field or ''}")


@pytest.mark.parametrize(
    ("folder", "name", "group"),
    [
        ("fits", "ascii.fits", None),  # a structured (table) array through refzarr's codec
        ("fits", "m13_gzip.fits", None),  # tiles: refzarr's Zarr v3 codec with nested config
        ("hdf4", "MOD14.hdf4", None),
        ("hdf5", "bitshuffle_datasets.hdf5", None),  # a codec through refzarr.numcodecs
        ("netcdf4", "kerchunk_air.nc", None),
    ],
)
def test_other_formats_through_the_store(folder: str, name: str, group: str | None) -> None:
    path = next(p for p in corpus_files(folder) if p.name == name)
    scanned = refzarr.scan(path)
    with refzarr.open_dataset(scanned, group=group, decode_cf=False) as truth:
        truth.load()
    _assert_raw_equal(_raw_through_store(path, RefzarrParser()), truth)


def test_unsupported_arrays_are_named_or_skipped() -> None:
    """HDF4 vdata with big-endian fields in a structured dtype: named, or left out when the
    scan options say on_unsupported="skip"."""
    path = next(p for p in corpus_files("hdf4") if p.name == "hdifftst1.hdf")
    with pytest.raises(refzarr.UnsupportedFeatureError, match=r"vdata/vdata2.*big-endian"):
        RefzarrParser()(f"file://{path}", local_registry())
    store = RefzarrParser(on_unsupported="skip")(f"file://{path}", local_registry())
    with xr.open_dataset(
        store, engine="zarr", consolidated=False, zarr_format=3, decode_cf=False
    ) as ds:
        truth = refzarr.open_dataset(refzarr.scan(path), decode_cf=False)
        _assert_raw_equal(ds.load(), truth.load())


def test_open_virtual_datatree_on_grib() -> None:
    from virtualizarr import open_virtual_datatree

    path = GRIB[0]
    scanned = refzarr.scan(path)
    tree = open_virtual_datatree(
        f"file://{path}", registry=local_registry(), parser=RefzarrParser()
    )
    leaves = {p for p, g in scanned.groups() if p and any(True for _ in g.arrays())}
    assert leaves <= {node.path.strip("/") for node in tree.subtree}
    back = refzarr.from_virtual_dataset(tree)
    for path_, array in scanned.arrays():
        if not array.manifest.inlined:
            assert back[path_].manifest == array.manifest, path_


def test_parser_on_s3(s3: tuple[str, dict[str, object]]) -> None:
    """A netCDF3 file on S3 (moto): refzarr scans it through fsspec (storage_options),
    VirtualiZarr reads its chunks through the registry's obstore S3Store."""
    import fsspec
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import S3Store

    bucket, options = s3
    path = next(p for p in NETCDF3 if p.name == "example_1.nc")
    fs = fsspec.filesystem("s3", **options)
    fs.put_file(str(path), f"{bucket}/data/example_1.nc")
    client = options["client_kwargs"]
    assert isinstance(client, dict)
    store = S3Store(
        bucket,
        endpoint=client["endpoint_url"],
        region="us-east-1",
        access_key_id=options["key"],
        secret_access_key=options["secret"],
        client_options={"allow_http": True},
    )
    registry = ObjectStoreRegistry({f"s3://{bucket}": store})
    from virtualizarr import open_virtual_dataset

    url = f"s3://{bucket}/data/example_1.nc"
    with xr.open_dataset(path, engine="netcdf4") as truth:
        truth.load()
    vds = open_virtual_dataset(
        url,
        registry=registry,
        parser=RefzarrParser(storage_options=options),
        loadable_variables=list(truth.variables),
    )
    assert_same_values(vds.load(), truth)
