"""xarray sees the same netCDF4 dataset through refzarr's references as in the file itself.

``xr.open_dataset(references, engine="zarr")`` through fsspec is compared with
``xr.open_dataset(file)`` (netCDF4-python), both CF-decoded: values, dtypes, dimensions,
coordinates and attributes, with ``xr.testing.assert_identical``. Where the two cannot be
identical, the difference is checked exactly and then set aside (`Differences`):

- packed data with float32 ``scale_factor`` / ``add_offset``: Zarr v2 attributes are JSON, so
  xarray over Zarr sees a Python float (float64, the attribute's exact value) and unpacks to
  float64, where over netCDF it unpacks to float32. The float64 values must equal exactly
  xarray's own unpacking of the file's packed values with the attributes as float64.
- a variable with chunks never written and no ``_FillValue``: those chunks must read as the
  HDF5 fill value (netCDF's default fill), so it is the Zarr fill value, which xarray over Zarr
  masks (as CF says readers should) and xarray over netCDF does not.
- variable-length strings: zarr-python 3 reads them as numpy's ``StringDType``, xarray over
  netCDF as fixed-width ``<U<n>``; the strings must be equal.
- enums: the mapping is attribute ``_hdf5_enum`` (the type's name ``_hdf5_enum_name``), which
  xarray over netCDF does not show (refzarr's engine shows them in ``encoding["dtype"]``).
- text attributes that are not UTF-8: ``"base64:<bytes>"`` (exact), where netCDF4-python
  replaces the undecodable bytes with U+FFFD.
- group attributes whose name starts with ``_nc`` (any case): xarray's Zarr backend hides them
  (it takes them for NCZarr's).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import netCDF4
import numpy as np
import pytest
import xarray as xr
from h5kit import roundtrip, write_h5

import refzarr
from corpus import CORPUS as CORPUS_ROOT
from refzarr.scan import ScannedGroup
from refzarr.scan.hdf5.attrs import BASE64_PREFIX
from refzarr.scan.hdf5.types import ENUM_ATTR, ENUM_NAME_ATTR
from roundtrip import reference_options

CORPUS = CORPUS_ROOT / "netcdf4"
NETCDF_FILES = sorted(p for p in CORPUS.iterdir() if p.is_file()) if CORPUS.is_dir() else []

# netCDF allows a dimension twice in one variable; xarray warns about it on both sides
DUPLICATE_DIMS = pytest.mark.filterwarnings("ignore:Duplicate dimension names:UserWarning")


# -- the comparison ---------------------------------------------------------------------------


@dataclass
class Differences:
    """The documented differences met while comparing one group (see the module docstring)."""

    float64_unpacked: list[str] = field(default_factory=list)
    string_dtype: list[str] = field(default_factory=list)
    default_fill_masked: list[str] = field(default_factory=list)
    enum_attribute: list[str] = field(default_factory=list)
    base64_attributes: list[str] = field(default_factory=list)
    hidden_nc_attributes: list[str] = field(default_factory=list)


def open_references(refs: Path, group: str, **kwargs: Any) -> xr.Dataset:
    """xarray over the references, rooted at ``group`` (see roundtrip.open_zarr_group)."""
    backend_kwargs = {"consolidated": False, "storage_options": reference_options(refs)}
    return xr.open_dataset(
        f"reference://{group}", engine="zarr", backend_kwargs=backend_kwargs, **kwargs
    )


def assert_same_as_netcdf(
    scanned: ScannedGroup, refs: Path, netcdf: Path, group: str = ""
) -> Differences:
    """The group through the references is identical to the file's, but for `Differences`.

    Variables the scan skipped (``scanned.skipped``) are left out of the file's side.
    """
    found = Differences()
    with (
        open_references(refs, group) as through_refs,
        xr.open_dataset(netcdf, engine="netcdf4", group=group or None) as direct,
    ):
        through_refs.load()
        direct.load()
        here = f"/{group}" if group else ""
        skipped = {
            name
            for parent, _, name in (s.path.rpartition("/") for s in scanned.skipped)
            if parent == here and "@" not in name and name in direct.variables
        }
        direct = direct.drop_vars(sorted(skipped))
        fixed = through_refs.copy()
        with h5py.File(netcdf, "r") as f:
            h5group = f[group or "/"]
            for name in direct.variables:
                _set_aside(fixed, direct, str(name), h5group, netcdf, found)
        _set_aside_attributes(fixed.attrs, direct.attrs, found, hidden=True)
        xr.testing.assert_identical(fixed, direct)
    return found


def _set_aside(
    fixed: xr.Dataset,
    direct: xr.Dataset,
    name: str,
    h5group: h5py.Group,
    netcdf: Path,
    found: Differences,
) -> None:
    """Check one variable's documented differences exactly, then take the file's side."""
    got, want = fixed[name].variable, direct[name].variable
    attrs = dict(got.attrs)
    mapping = attrs.pop(ENUM_ATTR, None)
    attrs.pop(ENUM_NAME_ATTR, None)
    if mapping is not None:
        enum = h5py.check_enum_dtype(_dataset(h5group, name).dtype)
        assert mapping == {k: int(v) for k, v in (enum or {}).items()}, name
        found.enum_attribute.append(name)
    _set_aside_attributes(attrs, want.attrs, found, hidden=False)
    data = got
    if got.dtype == np.float64 and want.dtype == np.float32 and _packed(want):
        _check_float64_unpacking(got, want, name, netcdf, h5group.name)
        found.float64_unpacked.append(name)
        data = want
    elif got.dtype.kind == "T" and want.dtype.kind == "U":
        assert got.values.tolist() == want.values.tolist(), name
        found.string_dtype.append(name)
        data = want
    elif not (got.dtype == want.dtype and got.equals(want)) and _never_written_default_fill(
        h5group, name, got, want
    ):
        found.default_fill_masked.append(name)
        data = want
    if data is not got or attrs != got.attrs:
        variable = xr.Variable(data.dims, data.data, attrs)
        if name in fixed.coords:
            fixed.coords[name] = variable
        else:
            fixed[name] = variable


def _set_aside_attributes(
    got: dict[Any, Any], want: dict[Any, Any], found: Differences, *, hidden: bool
) -> None:
    """Base64 text and (group level) hidden ``_nc`` attributes, checked and made the file's."""
    for key, value in want.items():
        if hidden and str(key).lower().startswith("_nc") and key not in got:
            found.hidden_nc_attributes.append(str(key))
            got[key] = value
        elif isinstance(got.get(key), str) and got[key].startswith(BASE64_PREFIX):
            raw = base64.standard_b64decode(got[key].removeprefix(BASE64_PREFIX))
            assert raw.decode("utf-8", "replace") == value, key
            found.base64_attributes.append(str(key))
            got[key] = value


def _dataset(h5group: h5py.Group, name: str) -> h5py.Dataset:
    item = h5group.get(name)
    if not isinstance(item, h5py.Dataset) or "_nc4_non_coord_" + name in h5group:
        item = h5group[f"_nc4_non_coord_{name}"]
    assert isinstance(item, h5py.Dataset)
    return item


def _packed(variable: xr.Variable) -> bool:
    scales = [variable.encoding.get(k) for k in ("scale_factor", "add_offset")]
    return any(isinstance(s, np.float32) for s in scales)


def _check_float64_unpacking(
    got: xr.Variable, want: xr.Variable, name: str, netcdf: Path, group: str
) -> None:
    """``got`` is exactly xarray's unpacking with the file's attributes as float64."""
    with xr.open_dataset(netcdf, engine="netcdf4", group=group, decode_cf=False) as raw:
        packed = raw[name].variable.load()
    for key in ("scale_factor", "add_offset"):
        if key in packed.attrs:
            packed.attrs[key] = float(packed.attrs[key])  # exactly the file's value
    expected = xr.decode_cf(xr.Dataset({name: packed}))[name].variable
    assert expected.dtype == np.float64, name
    np.testing.assert_array_equal(got.values, expected.values, strict=True, err_msg=name)
    # the netCDF side computes in float32 (two roundings, large near cancellation): close
    scale = float(np.nanmax(np.abs(expected.values), initial=1.0))
    np.testing.assert_allclose(got.values, want.values, rtol=0, atol=1e-6 * scale, err_msg=name)


def _never_written_default_fill(
    h5group: h5py.Group, name: str, got: xr.Variable, want: xr.Variable
) -> bool:
    """Whether ``got`` differs from ``want`` only by masking the HDF5 fill value of a variable
    with never-written chunks and no ``_FillValue`` (checked element by element)."""
    ds = _dataset(h5group, name)
    if "_FillValue" in ds.attrs:
        return False
    layout = ds.id.get_create_plist().get_layout()
    if layout == h5py.h5d.CONTIGUOUS:
        assert ds.id.get_offset() is None, f"{name}: masked, though it is written"
    else:
        assert layout == h5py.h5d.CHUNKED, name
        grid = np.prod([-(-s // c) for s, c in zip(ds.shape, ds.chunks, strict=True)])
        assert ds.id.get_num_chunks() < grid, f"{name}: masked, though every chunk is written"
    masked = want.values == np.asarray(ds.fillvalue)
    assert masked.any(), name
    assert np.isnan(got.values[masked]).all(), name
    np.testing.assert_array_equal(got.values[~masked], want.values[~masked], err_msg=name)
    return True


def compare_file(netcdf: Path, tmp_path: Path) -> dict[str, Differences]:
    """Scan (skipping the unsupported), write JSON, compare every group; differences met."""
    scanned = refzarr.scan(str(netcdf), on_unsupported="skip")
    assert isinstance(scanned, ScannedGroup)
    refs = tmp_path / f"{netcdf.name}.json"
    refzarr.write(scanned, refs)
    groups = [path for path, _ in scanned.groups()]
    for g in groups:
        assert_refzarr_engine_same_as_zarr(scanned, refs, g)
    return {g: assert_same_as_netcdf(scanned, refs, netcdf, g) for g in groups}


def assert_refzarr_engine_same_as_zarr(scanned: ScannedGroup, refs: Path, group: str) -> None:
    """refzarr's own engine (its reader, not zarr's) reads exactly the values the zarr engine
    reads. Decoded, the two differ on purpose: refzarr's engine decodes as engine="netcdf4"
    (attribute types, masking), which tests/reader/test_netcdf_parity.py checks."""
    with open_references(refs, group, decode_cf=False) as through_zarr:
        ours = refzarr.open_dataset(scanned, group=group or None, decode_cf=False).load()
        xr.testing.assert_equal(ours, through_zarr.load())


# -- the corpus -------------------------------------------------------------------------------


@DUPLICATE_DIMS
@pytest.mark.parametrize("netcdf", NETCDF_FILES, ids=lambda p: p.name)
def test_corpus_file_through_xarray(netcdf: Path, tmp_path: Path) -> None:
    try:
        xr.open_dataset(netcdf, engine="netcdf4").close()
    except TypeError as exc:  # ref_tst_compounds.nc: xarray cannot hold compound values
        pytest.skip(f"xarray cannot open {netcdf.name} from the file itself: {exc}")
    found = compare_file(netcdf, tmp_path)
    print(netcdf.name, {g: d for g, d in found.items() if d != Differences()})


# -- files written by netCDF4-python ----------------------------------------------------------


def _skipped(netcdf: Path) -> set[str]:
    scanned = refzarr.scan(netcdf, on_unsupported="skip")
    assert isinstance(scanned, ScannedGroup)
    return {s.path for s in scanned.skipped}


def _cf_file(path: Path) -> Path:
    """A netCDF4 file with the CF features xarray decodes, groups and netCDF's HDF5 tricks."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.set_auto_maskandscale(False)  # write the stored values themselves
        nc.title = "CF features"
        nc.createDimension("time", None)  # unlimited
        nc.createDimension("lat", 3)
        nc.createDimension("lon", 4)
        nc.createDimension("nchar", 5)
        nc.createDimension("bare", 2)  # a dimension without a coordinate variable
        nc.createDimension("station", 2)
        nc.createDimension("n", 3)  # variable "n" below is not its coordinate
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time.calendar = "noleap"
        time[:] = [0.0, 1.5, 31.0]
        hours = nc.createVariable("hours", "i4", ("time",))  # no _FillValue: not masked
        hours.units = "hours since 1990-01-01 00:00"
        hours[:] = [0, 6, 12]
        nc.createVariable("lat", "f4", ("lat",))[:] = [-10.0, 0.0, 10.0]
        nc.createVariable("lon", "f8", ("lon",))[:] = [0.0, 90.0, 180.0, 270.0]
        _packed_variables(nc)
        _fill_variables(nc)
        _text_and_dimension_variables(nc)
        grp = nc.createGroup("grp")
        grp.comment = "nested"
        grp.createDimension("level", 2)
        inner = grp.createVariable("inner", "i2", ("level", "lat"))
        inner[:] = np.arange(6, dtype="i2").reshape(2, 3)
        inner.units = "1"
        grp.createDimension("site", 2)  # a 2-D coordinate using a dimension of the root
        site = grp.createVariable("site", "S1", ("site", "nchar"))
        site[:] = netCDF4.stringtochar(np.array(["s1", "s2"], dtype="S5"))
    return path


def _packed_variables(nc: netCDF4.Dataset) -> None:
    packed = nc.createVariable("packed", "i2", ("time", "lat", "lon"), fill_value=np.int16(-32767))
    packed.scale_factor = np.float32(0.01)
    packed.add_offset = np.float32(273.15)
    values = np.arange(36, dtype="i2").reshape(3, 3, 4) * 37 - 500
    values[1, 1, :2] = -32767
    packed[:] = values
    flags = nc.createVariable("ubyte", "i1", ("lon",), fill_value=np.int8(-1))
    flags._Unsigned = "true"
    flags[:] = np.array([0, 127, -128, -1], dtype="i1")  # 0, 127, 128, missing


def _fill_variables(nc: netCDF4.Dataset) -> None:
    counts = nc.createVariable("count", "i4", ("lat",))  # no _FillValue, every value written
    counts[:] = [0, -2147483647, 5]  # netCDF's default int fill as a real value: not masked
    missing = nc.createVariable("with_missing", "f4", ("lon",))
    missing.missing_value = np.float32(-999.0)
    missing[:] = [1.0, -999.0, 0.0, 2.5]
    sparse = nc.createVariable("sparse", "f8", ("lat", "lon"), chunksizes=(1, 2), fill_value=-1e30)
    sparse[0, :2] = [1.0, 2.0]  # the other chunks are never written
    nc.createVariable("never", "i4", ("lat",))  # never written, no _FillValue


def _text_and_dimension_variables(nc: netCDF4.Dataset) -> None:
    chars = nc.createVariable("label", "S1", ("lat", "nchar"))
    chars[:] = netCDF4.stringtochar(np.array(["ab", "cde", ""], dtype="S5"))
    chars._Encoding = "utf-8"
    names = nc.createVariable("station", "S1", ("station", "nchar"))  # a 2-D coordinate
    names[:] = netCDF4.stringtochar(np.array(["x1", "y22"], dtype="S5"))
    nc.createVariable("bare_var", "f4", ("bare",))[:] = [1.5, 2.5]
    nc.createVariable("square", "i2", ("lat", "lat"))[:] = np.arange(9).reshape(3, 3)
    nc.createVariable("n", "i4", ("lat",))[:] = [7, 8, 9]  # stored as _nc4_non_coord_n
    words = nc.createVariable("words", str, ("lat",))  # variable-length strings
    words[:] = np.array(["one", "", "three"], dtype=object)


@DUPLICATE_DIMS
def test_netcdf4_python_file_through_xarray(tmp_path: Path) -> None:
    netcdf = _cf_file(tmp_path / "cf.nc")
    found = compare_file(netcdf, tmp_path)
    strings = [] if "/words" in _skipped(netcdf) else ["words"]
    assert found[""] == Differences(
        float64_unpacked=["packed"], string_dtype=strings, default_fill_masked=["never"]
    )
    assert found["grp"] == Differences()


def test_zarr_fill_value_follows_fill_value_attribute(tmp_path: Path) -> None:
    group = refzarr.scan(_cf_file(tmp_path / "cf.nc"), on_unsupported="skip")
    fills = {name: array.meta.fill_value for name, array in group.arrays()}
    assert fills["count"] is None  # every chunk written, no _FillValue: xarray masks nothing
    assert fills["with_missing"] is None
    assert fills["packed"] == -32767
    assert fills["sparse"] == -1.0e30  # chunks missing: they read as the fill value
    assert fills["never"] == -2147483647  # netCDF's default, as HDF5 reads it
    assert fills["lat"] is None
    assert group["station"].meta.dimension_names == ("station", "nchar")
    assert group["square"].meta.dimension_names == ("lat", "lat")
    assert group["n"].meta.dimension_names == ("lat",)
    assert group["grp/site"].meta.dimension_names == ("site", "nchar")


def _short_unlimited(path: Path) -> Path:
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createVariable("long", "f4", ("time",))[:] = [1.0, 2.0, 3.0]
        nc.createVariable("short", "f4", ("time",), fill_value=-1.0)[:1] = [5.0]
    return path


def test_variable_shorter_than_its_unlimited_dimension(tmp_path: Path) -> None:
    netcdf = _short_unlimited(tmp_path / "short.nc")
    with xr.open_dataset(netcdf, engine="netcdf4") as direct:
        assert direct["short"].shape == (3,)
    assert compare_file(netcdf, tmp_path) == {"": Differences()}


def _fills(f: h5py.File) -> None:
    f.create_dataset("complete", data=np.arange(4, dtype="i2"), fillvalue=-7)
    f.create_dataset("zero_fill", shape=(4,), chunks=(2,), dtype="f4", fillvalue=0.0)[:2] = 1
    f.create_dataset("gaps", shape=(4,), chunks=(2,), dtype="i4", fillvalue=-7)[:2] = 1
    declared = f.create_dataset("declared", data=np.arange(4.0), fillvalue=-1.0)
    declared.attrs["_FillValue"] = np.float32(-2.0)  # differs from HDF5's: every chunk written
    sparse = f.create_dataset("declared_sparse", shape=(4,), chunks=(2,), dtype="u1")
    sparse[2:] = 5
    sparse.attrs["_FillValue"] = np.uint8(9)  # no HDF5 fill value: the gap reads zeros
    f.create_dataset("empty", shape=(0, 3), dtype="i8", fillvalue=4)


def test_zarr_fill_value_rules(tmp_path: Path) -> None:
    group = roundtrip(write_h5(tmp_path / "fills.h5", _fills), tmp_path)
    fills = {name: array.meta.fill_value for name, array in group.arrays()}
    assert fills == {
        "complete": None,  # never read, and no _FillValue to mask
        "zero_fill": None,  # zeros, as a null fill value reads
        "gaps": -7,  # the missing chunk reads as HDF5 reads it
        "declared": -2.0,  # never read: the value xarray should mask
        "declared_sparse": None,  # zeros; xarray masks the attribute's 9
        "empty": None,
    }
    refs = tmp_path / "fills.json"
    refzarr.write(group, refs)
    with open_references(refs, "") as ds:
        assert ds["complete"].dtype == np.int16
        np.testing.assert_array_equal(ds["declared_sparse"].values, [0, 0, 5, 5])
        assert ds["declared"].values.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_empty_numeric_attributes_keep_their_type(tmp_path: Path) -> None:
    """An empty list has no type in JSON: empty int64/float64 attributes (null dataspaces,
    as netCDF-C writes them) read back typed, as netCDF4 shows them."""
    path = tmp_path / "empty.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 2)
        v = nc.createVariable("v", "f4", ("x",))
        v[:] = [1, 2]
        for name, dtype in (("i8", "i8"), ("f8", "f8"), ("i4", "i4")):
            v.setncattr(f"empty_{name}", np.array([], dtype))
    refs = tmp_path / "refs.json"
    refzarr.write(refzarr.scan(path), refs)
    with xr.open_dataset(path, engine="netcdf4") as expected:
        wanted = expected["v"].attrs
    for got in (
        refzarr.open_dataset(refs)["v"].attrs,
        xr.open_dataset(refs, engine="refzarr")["v"].attrs,
    ):
        for name in ("empty_i8", "empty_f8", "empty_i4"):
            assert isinstance(got[name], np.ndarray), name
            assert got[name].dtype == wanted[name].dtype, name
            assert got[name].size == 0, name
