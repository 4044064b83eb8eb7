"""FITS test kit: astropy's arrays for a file, named as FORMATS.md says, and checks that
refzarr's reader and fsspec + zarr-python give exactly those values."""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from astropy.io import fits
from astropy.utils.exceptions import AstropyWarning
from zarr.storage import FsspecStore

import refzarr
from refzarr import RefArray, RefGroup
from refzarr.io import RangeReader
from refzarr.reader.array import ArrayReader
from roundtrip import reference_options

__all__ = [
    "assert_decoded_match",
    "assert_raw_match",
    "assert_zarr_match",
    "astropy_raw",
    "has_subarray_fields",
]


def _names(hdul: fits.HDUList) -> list[str]:
    counts = Counter(h.name for h in hdul if h.name)
    out: list[str] = []
    for i, hdu in enumerate(hdul):
        if not hdu.name:
            name = f"HDU{i}"
        elif counts[hdu.name] > 1:
            name = f"{hdu.name}_{hdu.ver}"
        else:
            name = hdu.name
        out.append(f"{name}_{i}" if name in out else name)  # a name and EXTVER shared
    return out


def _opened(path: Path, **kwargs: Any) -> fits.HDUList:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AstropyWarning)
        return fits.open(path, memmap=False, **kwargs)


def _values(hdu: Any, raw: bool) -> np.ndarray[Any, Any] | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AstropyWarning)
        data = hdu.data
    if data is None or data.size == 0:
        return None
    if isinstance(hdu, fits.TableHDU) and not isinstance(hdu, fits.BinTableHDU):
        parsed = np.zeros(len(data), dtype=[(c.name, c.dtype) for c in hdu.columns])
        for c in hdu.columns:
            parsed[c.name] = data[c.name]
        return parsed
    if isinstance(hdu, fits.BinTableHDU | fits.GroupsHDU) and raw:
        return np.asarray(data).view(np.ndarray)
    return np.asarray(data)


def astropy_raw(path: Path, *, scaled: bool = False) -> dict[str, np.ndarray[Any, Any]]:
    """Every HDU's data as astropy reads it: raw (``do_not_scale_image_data``; tables as their
    stored records) or with astropy's default scaling."""
    out = {}
    with _opened(path, do_not_scale_image_data=not scaled) as hdul, warnings.catch_warnings():
        warnings.simplefilter("ignore", AstropyWarning)  # astropy reads HDUs lazily
        for name, hdu in zip(_names(hdul), hdul, strict=True):
            values = _values(hdu, raw=not scaled)
            if values is not None:
                out[name] = values
    return out


def has_subarray_fields(dtype: np.dtype[Any]) -> bool:
    """Whether a structured dtype has a field with a shape (zarr-python cannot read it)."""
    return bool(dtype.fields) and any(f[0].shape for f in dtype.fields.values())


def _expected_raw(group: RefGroup, path: Path) -> dict[str, np.ndarray[Any, Any]]:
    """astropy's raw values, or its default ones for arrays refzarr decodes by codec
    (unsigned, compressed, parsed ASCII) or holds decoded."""
    raw, scaled = astropy_raw(path), astropy_raw(path, scaled=True)
    out = {}
    for name, array in group.arrays():
        assert isinstance(array, RefArray)
        ids = [c["id"] for c in array.meta.codecs]
        decoded = "fits_decoded" in array.meta.attributes or "refzarr.fits_unsigned" in ids
        out[name] = scaled[name] if decoded else raw[name]
        variable = array.meta.attributes.get("fits_variable_length")
        if variable:
            with _opened(path) as hdul:
                data = hdul[array.meta.attributes["fits_hdu"]].data
                out[name] = _padded(data, array.meta.dtype, variable)
    return out


def _padded(data: Any, dtype: np.dtype[Any], variable: Any) -> np.ndarray[Any, Any]:
    """astropy's rows with variable-length cells padded, their lengths in ``<col>_length``."""
    out = np.zeros(len(data), dtype=dtype)
    for name in dtype.names or ():
        if name in variable:
            for row, cell in enumerate(data[name]):
                out[name][row, : len(cell)] = cell
                out[f"{name}_length"][row] = len(cell)
        elif not (name.endswith("_length") and name[: -len("_length")] in variable):
            out[name] = np.asarray(data).view(np.ndarray)[name]
    return out


def _assert_equal(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], name: str) -> None:
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    if want.dtype.fields:
        assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
        assert got.tobytes() == want.tobytes(), name
        return
    assert got.dtype.newbyteorder("=") == want.dtype.newbyteorder("="), (
        f"{name}: dtype {got.dtype} != {want.dtype}"
    )
    np.testing.assert_array_equal(got, want, strict=False, err_msg=name)


def assert_raw_match(group: RefGroup, path: Path) -> None:
    """refzarr's reader (undecoded) gives astropy's values for every array."""
    expected = _expected_raw(group, path)
    assert sorted(n for n, _ in group.arrays()) == sorted(expected)
    with refzarr.open_dataset(group, mask_and_scale=False, decode_times=False) as ds:
        for name, want in expected.items():
            got = np.asarray(ds[name].values)
            if want.dtype.fields:  # records come native-endian, field by field
                assert got.dtype == want.dtype.newbyteorder("="), name
                got = got.astype(want.dtype)
            _assert_equal(got, want, name)
    reader = RangeReader()
    for name, array in group.arrays():
        assert isinstance(array, RefArray)
        _assert_equal(ArrayReader(array, name, reader).read(), expected[name], name)


def assert_decoded_match(group: RefGroup, path: Path) -> None:
    """xarray's decoding through refzarr gives astropy's default (scaled) images exactly:
    values (NaN where astropy has NaN) and dtype."""
    scaled = astropy_raw(path, scaled=True)
    with refzarr.open_dataset(group, decode_times=False) as ds:
        for name, want in scaled.items():
            if want.dtype.fields:
                continue
            got = np.asarray(ds[name].values)
            assert got.dtype.newbyteorder("=") == want.dtype.newbyteorder("="), (
                f"{name}: decoded dtype {got.dtype} != astropy's {want.dtype}"
            )
            np.testing.assert_array_equal(got, want, err_msg=name)


def assert_zarr_match(refs: Any, group: RefGroup, path: Path) -> None:
    """fsspec + zarr-python on a written reference set give astropy's values (arrays with
    sub-array fields aside: zarr-python cannot read them)."""
    expected = _expected_raw(group, path)
    for name, want in expected.items():
        if has_subarray_fields(want.dtype):
            continue
        # each array opened alone: zarr cannot open a group holding sub-array dtypes
        store = FsspecStore.from_url(
            f"reference://{name}", storage_options=reference_options(refs), read_only=True
        )
        array = zarr.open_array(store, mode="r", zarr_format=2)
        _assert_equal(np.asarray(array[...]), want, name)
