"""Reference sets made by kerchunk's scanners (netCDF3, GRIB, FITS, TIFF, HDF4), read by refzarr.

A user moving from kerchunk keeps the sets they have. refzarr must read every array of them
as fsspec's ReferenceFileSystem + zarr-python does (exact, NaN-aware, dtype-aware), and where
kerchunk recorded something wrong (a byte range past the end of the file, a codec the data is
not compressed with, a root that is an array) it must raise a named error, never return other
values. (kerchunk's HDF5 sets are covered by tests/formats/test_roundtrip_kerchunk.py.)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
import zarr

import refzarr
from corpus import CORPUS, corpus_files

pytest.importorskip("kerchunk")

pytestmark = pytest.mark.filterwarnings("ignore")  # kerchunk's and cfgrib's own warnings


def _netcdf3(path: Path) -> dict[str, Any]:
    from kerchunk.netCDF3 import NetCDF3ToZarr

    refs: dict[str, Any] = NetCDF3ToZarr(str(path), inline_threshold=0).translate()
    return refs


def _grib(path: Path) -> dict[str, Any]:
    pytest.importorskip("cfgrib")
    from kerchunk.grib2 import scan_grib

    sets = scan_grib(str(path))
    assert len(sets) == 1, "the cases below hold one message each"
    refs: dict[str, Any] = sets[0]
    return refs


def _fits(path: Path) -> dict[str, Any]:
    from kerchunk.fits import process_file

    refs: dict[str, Any] = process_file(str(path))
    return refs


def _tiff(path: Path) -> dict[str, Any]:
    from kerchunk.tiff import tiff_to_zarr

    refs: dict[str, Any] = tiff_to_zarr(str(path))
    return refs


def _hdf4(path: Path) -> dict[str, Any]:
    from kerchunk.hdf4 import HDF4ToZarr

    refs: dict[str, Any] = HDF4ToZarr(str(path)).translate()
    return refs


KerchunkScan = Callable[[Path], dict[str, Any]]

READABLE: list[tuple[KerchunkScan, Path]] = [
    *((_netcdf3, path) for path in corpus_files("netcdf3", ".nc")),
    (_grib, CORPUS / "grib" / "gec00_20250101_00_soilw.grib2"),
    (_grib, CORPUS / "grib" / "CMC_reg_DEPR_ISBL_10_ps10km_2022072000_P000.grib2"),
    (_tiff, CORPUS / "tiff" / "cogeo.tif"),
    (_tiff, CORPUS / "tiff" / "image_rioCOG_gdal3.1.tif"),
]
"""Sets kerchunk writes right for these files: refzarr reads what fsspec reads."""


def _kerchunk_refs(scan: KerchunkScan, path: Path) -> dict[str, Any]:
    if not path.exists():
        pytest.skip(f"corpus file {path} is absent")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return scan(path)


def _fsspec_arrays(refs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every array of the set as fsspec's ReferenceFileSystem + zarr-python read it."""
    import kerchunk.codecs  # noqa: F401  (registers kerchunk's GRIB codec with numcodecs)

    fs = fsspec.filesystem("reference", fo=refs)
    root = zarr.open_group(fs.get_mapper(""), mode="r", zarr_format=2)
    return {path: array[...] for path, array in root.arrays()}


def _refzarr_arrays(refs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every array of the set as refzarr's own reader reads it."""
    group = refzarr.from_kerchunk(refs)
    store = refzarr.ReferenceStore(group)
    return {
        path: zarr.open_array(store, path=path, mode="r", zarr_format=2)[...]
        for path, _ in group.arrays()
    }


def _assert_identical(got: np.ndarray, want: np.ndarray, where: str) -> None:
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    equal_nan = want.dtype.kind in "fc"
    assert np.array_equal(got, want, equal_nan=equal_nan), f"{where}: values differ"


@pytest.mark.parametrize(
    ("scan", "path"), READABLE, ids=[f"{scan.__name__[1:]}-{path.name}" for scan, path in READABLE]
)
def test_kerchunk_sets_read_as_fsspec_reads_them(scan: KerchunkScan, path: Path) -> None:
    refs = _kerchunk_refs(scan, path)
    want = _fsspec_arrays(refs)
    got = _refzarr_arrays(refs)
    assert want, f"{path.name}: kerchunk's set holds no array"
    assert set(got) == set(want)
    for name in want:
        _assert_identical(got[name], want[name], f"{path.name}:{name}")


def test_a_range_past_the_end_names_the_likely_causes() -> None:
    """kerchunk's scan_grib reads GRIB2's length field in GRIB1 messages: the recorded length
    runs past the end of the file (fsspec's local reads stop at the end and happen to decode);
    refzarr refuses the range and says what to do."""
    refs = _kerchunk_refs(_grib, CORPUS / "grib" / "era5-2mt-2019-03-uk.grib")
    with pytest.raises(refzarr.ChunkFetchError, match="past the end") as caught:
        _refzarr_arrays(refs)
    message = str(caught.value)
    assert "era5-2mt-2019-03-uk.grib" in message
    assert "refzarr scan" in message
    assert "validate --sources" in message


def test_kerchunk_fits_image_reads_as_astropy() -> None:
    """kerchunk's FITS sets hold metadata as bytes, which fsspec + zarr-python 3 cannot open
    (fsspec hands zarr lists of ints); refzarr reads them, equal to astropy."""
    from astropy.io import fits

    path = CORPUS / "fits" / "m13.fits"
    got = _refzarr_arrays(_kerchunk_refs(_fits, path))
    with fits.open(path) as hdus:
        want = np.asarray(hdus[0].data)
    _assert_identical(got["PRIMARY"], want.astype(want.dtype.newbyteorder(">")), "PRIMARY")


@pytest.mark.parametrize("name", ["m13_rice.fits", "m13_gzip.fits"])
def test_kerchunk_compressed_fits_ranges_are_refused(name: str) -> None:
    """kerchunk references a tile-compressed image as raw pixels at the heap: past the end."""
    refs = _kerchunk_refs(_fits, CORPUS / "fits" / name)
    with pytest.raises(refzarr.ChunkFetchError, match="past the end"):
        _refzarr_arrays(refs)


def test_kerchunk_hdf4_codec_mismatch_is_a_decode_error() -> None:
    """kerchunk's HDF4 reader calls every compressed SDS deflate: the skipping-Huffman and
    szip ones fail to decode, by name, instead of reading as something else."""
    refs = _kerchunk_refs(_hdf4, CORPUS / "hdf4" / "sds_compressed.hdf")
    group = refzarr.from_kerchunk(refs)
    store = refzarr.ReferenceStore(group)
    want = _refzarr_arrays_of_scan(CORPUS / "hdf4" / "sds_compressed.hdf")
    for path, _ in group.arrays():
        array = zarr.open_array(store, path=path, mode="r", zarr_format=2)
        if path in ("SDSskiphuff", "SDSszip"):
            with pytest.raises(refzarr.ChunkDecodeError, match=path):
                array[...]
        elif path in want:
            _assert_identical(array[...], want[path], path)


def _refzarr_arrays_of_scan(path: Path) -> dict[str, np.ndarray]:
    group = refzarr.scan(str(path))
    store = refzarr.ReferenceStore(group)
    return {
        name: zarr.open_array(store, path=name, mode="r", zarr_format=2)[...]
        for name, _ in group.arrays()
    }


def test_a_root_array_set_is_refused_with_what_to_do() -> None:
    """kerchunk's tiff_to_zarr writes a single-image TIFF as a set whose root is an array."""
    refs = _kerchunk_refs(_tiff, CORPUS / "tiff" / "float_nan.tif")
    assert ".zarray" in refs.get("refs", refs)
    with pytest.raises(refzarr.RefFormatError, match="root of the reference set is an array") as e:
        refzarr.from_kerchunk(refs)
    assert "refzarr scan" in str(e.value)
